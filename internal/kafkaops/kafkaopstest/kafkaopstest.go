package kafkaopstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
)

// EnvBrokers is the environment variable naming a real cluster's bootstrap
// brokers, comma-separated (e.g. 127.0.0.1:19092). Unset or empty: kfake.
const EnvBrokers = "PAYCB_TEST_KAFKA_BROKERS"

// ExternalBrokers returns the brokers EnvBrokers names, or nil when it is
// unset or empty.
func ExternalBrokers() []string {
	v := strings.TrimSpace(os.Getenv(EnvBrokers))
	if v == "" {
		return nil
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Kafka is one test's Kafka.
type Kafka struct {
	// Brokers are the bootstrap brokers.
	Brokers []string
	// Fake is the in-process cluster; nil on a real cluster.
	Fake *kfake.Cluster
	// prefix is put before every topic and group name on a real cluster.
	prefix string
}

// Name is the name the test uses for base, a topic or a group name: base
// itself on kfake (the cluster is the test's own), base under the test's
// unique prefix on a real cluster. Name(t) + ".dlq" equals Name(t + ".dlq").
func (k *Kafka) Name(base string) string { return k.prefix + base }

// Start gives tb a Kafka with topics created, each base name mapped to its
// partition count (the created topics are Name(base)). On kfake the
// cluster closes, and on a real cluster the topics are deleted, when tb's
// test ends. opts apply to kfake only; passing any makes Start fail the
// test on a real cluster, where they cannot be honoured.
func Start(tb testing.TB, topics map[string]int32, opts ...kfake.Opt) *Kafka {
	tb.Helper()
	brokers := ExternalBrokers()
	if brokers == nil {
		c, addrs, err := inprocess.Start(topics, opts...)
		if err != nil {
			tb.Fatalf("start kfake: %v", err)
		}
		tb.Cleanup(c.Close)
		return &Kafka{Brokers: addrs, Fake: c}
	}
	if len(opts) > 0 {
		tb.Fatalf("kfake options given while %s names a real cluster", EnvBrokers)
	}
	k := &Kafka{Brokers: brokers, prefix: uniquePrefix(tb.Name())}
	named := make(map[string]int32, len(topics))
	for base, parts := range topics {
		named[k.Name(base)] = parts
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := CreateTopics(ctx, brokers, named, nil); err != nil {
		tb.Fatalf("create the test's topics: %v", err)
	}
	tb.Cleanup(func() {
		names := make([]string, 0, len(named))
		for n := range named {
			names = append(names, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DeleteTopics(ctx, brokers, names...); err != nil {
			tb.Errorf("delete the test's topics: %v", err)
		}
	})
	return k
}

// uniquePrefix is a topic-name-safe prefix made of the test's name and
// random bytes, so that runs of one test never share a topic either.
func uniquePrefix(test string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "t-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(rnd[:]) + "-"
}

func client(brokers []string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 15 * time.Second}
}

// CreateTopics creates each topic with its partition count, replication
// factor 1 and configs (nil for the broker's defaults), and returns once
// the metadata shows a leader for every partition: a real broker creates
// topics asynchronously.
func CreateTopics(ctx context.Context, brokers []string, topics map[string]int32, configs map[string]string) error {
	return CreateReplicatedTopics(ctx, brokers, topics, 1, configs)
}

// CreateReplicatedTopics is CreateTopics with replicas copies of every
// partition (the cluster needs that many brokers).
func CreateReplicatedTopics(ctx context.Context, brokers []string, topics map[string]int32, replicas int, configs map[string]string) error {
	req := &kafka.CreateTopicsRequest{}
	var entries []kafka.ConfigEntry
	for k, v := range configs {
		entries = append(entries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	names := make([]string, 0, len(topics))
	for name, parts := range topics {
		names = append(names, name)
		req.Topics = append(req.Topics, kafka.TopicConfig{
			Topic: name, NumPartitions: int(parts), ReplicationFactor: replicas, ConfigEntries: entries,
		})
	}
	resp, err := client(brokers).CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", names, err)
	}
	var errs []error
	for name, e := range resp.Errors {
		if e != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("create topics: %w", errors.Join(errs...))
	}
	return waitLeaders(ctx, brokers, topics)
}

// waitLeaders polls the metadata until every partition of topics has a
// leader.
func waitLeaders(ctx context.Context, brokers []string, topics map[string]int32) error {
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		meta, err := client(brokers).Metadata(ctx, &kafka.MetadataRequest{Topics: names})
		if err == nil {
			ready := 0
			for _, t := range meta.Topics {
				n := 0
				for _, p := range t.Partitions {
					if p.Error == nil && p.Leader.ID >= 0 && p.Leader.Host != "" {
						n++
					}
				}
				if t.Error == nil && int32(n) == topics[t.Name] {
					ready++
				}
			}
			if ready == len(topics) {
				return nil
			}
			err = fmt.Errorf("%d of %d topics have a leader for every partition", ready, len(topics))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for leaders of %v: %w (last: %w)", names, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// DeleteTopics deletes topics; one already gone is not an error.
func DeleteTopics(ctx context.Context, brokers []string, topics ...string) error {
	resp, err := client(brokers).DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	var errs []error
	for name, e := range resp.Errors {
		if e != nil && !errors.Is(e, kafka.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete topics: %w", errors.Join(errs...))
	}
	return nil
}

// SetTopicConfig sets one configuration entry of topic on a real cluster
// (e.g. min.insync.replicas).
func SetTopicConfig(ctx context.Context, brokers []string, topic, name, value string) error {
	resp, err := client(brokers).IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic,
			ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{
				Name: name, Value: value, ConfigOperation: kafka.ConfigOperationSet,
			}},
		}},
	})
	if err != nil {
		return fmt.Errorf("set %s=%s on %s: %w", name, value, topic, err)
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return fmt.Errorf("set %s=%s on %s: %w", name, value, topic, r.Error)
		}
	}
	return nil
}

// InSyncReplicas returns the broker IDs in the ISR of topic's partition.
func InSyncReplicas(ctx context.Context, brokers []string, topic string, partition int) ([]int, error) {
	meta, err := client(brokers).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("read metadata of %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			if p.ID != partition {
				continue
			}
			out := make([]int, 0, len(p.Isr))
			for _, b := range p.Isr {
				out = append(out, b.ID)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("read metadata of %s: no partition %d", topic, partition)
}
