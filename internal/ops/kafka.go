package ops

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/kafkaops"
)

// Kafka names the cluster, topics and group the tools work on.
type Kafka struct {
	// Brokers are the bootstrap brokers.
	Brokers []string
	// Topic is the input topic.
	Topic string
	// Group is the worker's consumer group.
	Group string
	// DLQTopic is the dead-letter topic.
	DLQTopic string
	// Timeout bounds each request to the cluster. Default 10s.
	Timeout time.Duration
	// Conn is the TLS and SASL setting every connection uses; nil connects
	// over plain TCP with no authentication.
	Conn *kafkaconn.Conn
}

// ErrGroupActive is returned, wrapped, when the consumer group has live
// members and the operation needs it empty.
var ErrGroupActive = errors.New("consumer group has live members")

func (k Kafka) client() *kafka.Client {
	t := k.Timeout
	if t <= 0 {
		t = 10 * time.Second
	}
	return &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: t, Transport: k.Conn.Transport()}
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
	resp, err := k.client().DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{k.Group}})
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

// requireEmptyGroup returns an error wrapping ErrGroupActive when the group
// has live members.
func (k Kafka) requireEmptyGroup(ctx context.Context) error {
	st, err := k.DescribeGroup(ctx)
	if err != nil {
		return err
	}
	if len(st.Members) > 0 {
		return fmt.Errorf("group %s is %s with %d member(s), first %s (%s): stop every worker first: %w",
			k.Group, st.State, len(st.Members), st.Members[0].ClientID, st.Members[0].Host, ErrGroupActive)
	}
	return nil
}

// partitions lists the topic's partition IDs in ascending order. A missing
// topic is an error wrapping ErrTopicNotFound, and is never created (see
// kafkaops.TopicPartitions).
func (k Kafka) partitions(ctx context.Context, topic string) ([]int, error) {
	return kafkaops.TopicPartitions(ctx, k.client(), k.Conn, k.Brokers, topic)
}

// committed returns the group's committed offsets on the input topic; a
// partition with no commit is absent.
func (k Kafka) committed(ctx context.Context, parts []int) (map[int]int64, error) {
	resp, err := k.client().OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: k.Group, Topics: map[string][]int{k.Topic: parts}})
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
	resp, err := k.client().DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
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
