package kafkaops

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaconn"
)

// Kafka names the cluster, topics and consumer group the operator tools
// (internal/ops) and the dead-letter tools (internal/deadletters) work on.
type Kafka struct {
	// Brokers are the bootstrap brokers.
	Brokers []string
	// Topic is the input topic, where a redrive publishes.
	Topic string
	// Group is the worker's consumer group; the dead-letter tools do not
	// use it.
	Group string
	// DLQTopic is the dead-letter topic.
	DLQTopic string
	// Timeout bounds each request to the cluster. Default 10s.
	Timeout time.Duration
	// Conn is the TLS and SASL setting every connection uses; nil connects
	// over plain TCP with no authentication.
	Conn *kafkaconn.Conn
}

// RequestTimeout is k.Timeout, 10s when not set.
func (k Kafka) RequestTimeout() time.Duration {
	if k.Timeout <= 0 {
		return 10 * time.Second
	}
	return k.Timeout
}

// Client returns a client of the cluster with k's timeout and connection
// setting.
func (k Kafka) Client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: k.RequestTimeout(), Transport: k.Conn.Transport()}
}

// Partitions lists topic's partition IDs in ascending order. A missing
// topic is an error wrapping ErrTopicNotFound, and is never created (see
// TopicPartitions).
func (k Kafka) Partitions(ctx context.Context, topic string) ([]int, error) {
	return TopicPartitions(ctx, k.Client(), k.Conn, k.Brokers, topic)
}

// ListOffsets asks for one offset per partition of topic: ts is
// kafka.FirstOffset, kafka.LastOffset or a time in Unix milliseconds (see
// the function ListOffsets).
func (k Kafka) ListOffsets(ctx context.Context, topic string, parts []int, ts int64) (map[int]int64, error) {
	return ListOffsets(ctx, k.Client(), topic, parts, ts)
}

// RequireTopic returns an error wrapping ErrTopicNotFound when topic does
// not exist, never creating it (see the function RequireTopic).
func (k Kafka) RequireTopic(ctx context.Context, topic string) error {
	return RequireTopic(ctx, k.Client(), topic)
}

// GroupMember is one live member of the consumer group.
type GroupMember struct {
	ID, ClientID, Host string
}

// GroupState describes the consumer group as the coordinator sees it.
type GroupState struct {
	// State is the coordinator's state name (Empty, Stable,
	// PreparingRebalance, CompletingRebalance, Dead).
	State   string
	Members []GroupMember
}

// DescribeGroup asks the group coordinator for the group's state and live
// members. A group that never existed is reported as Dead with no members.
func (k Kafka) DescribeGroup(ctx context.Context) (GroupState, error) {
	resp, err := k.Client().DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{k.Group}})
	if err != nil {
		return GroupState{}, fmt.Errorf("describe group %s: %w", k.Group, err)
	}
	for _, g := range resp.Groups {
		if g.GroupID != k.Group {
			continue
		}
		if g.Error != nil {
			return GroupState{}, fmt.Errorf("describe group %s: %w", k.Group, g.Error)
		}
		st := GroupState{State: g.GroupState}
		for _, m := range g.Members {
			st.Members = append(st.Members, GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost})
		}
		return st, nil
	}
	return GroupState{State: "Dead"}, nil
}

// Committed returns the group's committed offsets on the input topic; a
// partition with no commit is absent.
func (k Kafka) Committed(ctx context.Context, parts []int) (map[int]int64, error) {
	resp, err := k.Client().OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: k.Group, Topics: map[string][]int{k.Topic: parts}})
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", k.Group, err)
	}
	out := map[int]int64{}
	if errors.Is(resp.Error, kafka.GroupIdNotFound) {
		return out, nil // a group that never committed
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", k.Group, resp.Error)
	}
	for _, p := range resp.Topics[k.Topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("fetch offset of %s/%d: %w", k.Topic, p.Partition, p.Error)
		}
		if p.CommittedOffset >= 0 {
			out[p.Partition] = p.CommittedOffset
		}
	}
	return out, nil
}

// TopicRetention reads topic's retention.ms from the broker (DescribeConfigs).
// ok is false when the topic keeps messages forever (retention.ms = -1).
func (k Kafka) TopicRetention(ctx context.Context, topic string) (d time.Duration, ok bool, err error) {
	resp, err := k.Client().DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms"},
		}},
	})
	if err != nil {
		return 0, false, fmt.Errorf("describe configs of %s: %w", topic, err)
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return 0, false, fmt.Errorf("describe configs of %s: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName != "retention.ms" {
				continue
			}
			ms, err := strconv.ParseInt(e.ConfigValue, 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("retention.ms of %s: %q is not a number", topic, e.ConfigValue)
			}
			if ms < 0 {
				return 0, false, nil
			}
			return time.Duration(ms) * time.Millisecond, true, nil
		}
	}
	return 0, false, fmt.Errorf("describe configs of %s: broker returned no retention.ms", topic)
}
