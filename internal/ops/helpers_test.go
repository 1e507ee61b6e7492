package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/ops"
)

const (
	testTopic = "channel-events"
	testGroup = "settlement-consumer"
	testDLQ   = testTopic + ".dlq"
)

// mustKafka gives the test the input topic (parts partitions) and the
// dead-letter topic: on an in-process cluster, or under names of the test's
// own on the real cluster PAYCB_TEST_KAFKA_BROKERS names.
func mustKafka(t *testing.T, parts int32) kafkaops.Kafka {
	t.Helper()
	k := kafkaopstest.Start(t, map[string]int32{testTopic: parts, testDLQ: 1, testTopic + ".settled": 1})
	return kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Name(testTopic), Group: k.Name(testGroup), DLQTopic: k.Name(testDLQ), Timeout: 10 * time.Second}
}

// produceAt writes n messages to partition p of topic, stamped at.
func produceAt(t *testing.T, k kafkaops.Kafka, topic string, p, n int, at time.Time) {
	t.Helper()
	w := &kafka.Writer{
		Addr: kafka.TCP(k.Brokers...), Topic: topic, RequiredAcks: kafka.RequireAll,
		Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return p }), BatchTimeout: time.Millisecond,
	}
	defer func() { _ = w.Close() }()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("k"), Value: []byte("v"), Time: at}
	}
	require.NoError(t, w.WriteMessages(context.Background(), msgs...))
}

// commit sets the group's committed offsets as an empty group would.
func commit(t *testing.T, k kafkaops.Kafka, offsets map[int]int64) {
	t.Helper()
	plan := ops.ReplayPlan{Topic: k.Topic, Group: k.Group}
	for p, o := range offsets {
		plan.Partitions = append(plan.Partitions, ops.PartitionReset{Partition: p, Target: o})
	}
	require.NoError(t, ops.ApplyReplay(context.Background(), k, plan))
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
