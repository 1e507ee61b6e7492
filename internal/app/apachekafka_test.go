//go:build enginekafka

// The cases that only a real Apache Kafka broker can answer: its group
// coordinator's rebalance protocol, a broker that dies under the worker, and
// dead letters written with acks=all. Built with the
// enginekafka tag by scripts/engines/kafka.sh (make test-kafka), which
// starts the broker and names it in PAYCB_TEST_KAFKA_BROKERS; without a
// broker they fail rather than pass vacuously.

package app_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/consumer"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/invariant"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/pipeline"
)

// apacheKafkaHarness is newHarness on the broker PAYCB_TEST_KAFKA_BROKERS
// names, failing the test when none is named.
func apacheKafkaHarness(t *testing.T, partitions int32) *harness {
	t.Helper()
	require.NotEmpty(t, kafkaopstest.ExternalBrokers(),
		"%s must name the Apache Kafka broker (make test-kafka starts one)", kafkaopstest.EnvBrokers)
	h := newHarness(t, partitions)
	require.Nil(t, h.cluster, "a real broker, not kfake")
	return h
}

// checkWithMetrics runs the invariant checker over s with every worker's
// metrics: nothing lost, nothing posted twice, every message accounted for.
func (h *harness) checkWithMetrics(s demo.Stream, workers ...*running) invariant.Report {
	h.t.Helper()
	var opts []invariant.Option
	for _, w := range workers {
		opts = append(opts, invariant.WithMetrics(w.main.Registry))
	}
	rep, err := invariant.Check(context.Background(), h.db, h.brokers, h.dlq(), s, opts...)
	require.NoError(h.t, err)
	require.NoError(h.t, rep.Err())
	assert.Zero(h.t, rep.Lost, "lost")
	assert.Zero(h.t, rep.Doubled, "posted twice")
	assert.Equal(h.t, s.Events, rep.Claims, "one claim per distinct event")
	assert.Zero(h.t, rep.Acquired, "no claim left ACQUIRED")
	return rep
}

// TestApacheKafkaRebalanceWhileAPartitionIsMidBatch: a second worker joins
// while the first holds a settled, uncommitted batch. Either the first
// gives the batch up when the coordinator ends its generation, or it keeps
// holding it past the rebalance timeout, is evicted, and commits late into
// a generation that has ended; in both cases the batch is read again by
// the partition's next owner and nothing is lost or posted twice.
func TestApacheKafkaRebalanceWhileAPartitionIsMidBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		// honoursGeneration: the held batch returns when its generation
		// ends; otherwise it returns only once the second worker is in.
		honoursGeneration bool
	}{
		{"the batch is given up when the generation ends", true},
		{"the batch is held past the rebalance timeout", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := apacheKafkaHarness(t, 4)
			s := demo.Generate(demo.StreamOptions{Seed: 41, Trades: 80})
			h.produce(s.Messages)

			holding := make(chan struct{})
			release := make(chan struct{})
			var released bool
			var first atomic.Bool
			a := h.start(func(m *app.Main) {
				m.Config.Worker.BatchMax = 16
				m.Fault = func(ctx context.Context, p pipeline.FaultPoint) error {
					if p != consumer.FaultBeforeCommit {
						return nil
					}
					// Only the first batch to reach its commit is held (calls
					// from different partitions are concurrent).
					if !first.CompareAndSwap(false, true) {
						return nil
					}
					close(holding)
					if tc.honoursGeneration {
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-release:
							return nil
						}
					}
					<-release
					return nil
				}
			})
			// Registered after a's shutdown, so run before it: a test that
			// fails here must not leave a's batch held.
			t.Cleanup(func() {
				if !released {
					close(release)
				}
			})
			select {
			case <-holding:
			case <-time.After(time.Minute):
				t.Fatal("no batch reached its commit")
			}
			b := h.start(nil)
			// Given up, the batch lets a rejoin at once: both are members.
			// Held, it keeps a from rejoining: the coordinator waits out the
			// rebalance timeout and evicts a, and b is the only member.
			members := 2
			if !tc.honoursGeneration {
				members = 1
			}
			group := kafkaops.Kafka{Brokers: h.brokers, Topic: h.topic(), Group: h.group()}
			require.Eventually(t, func() bool {
				st, err := group.DescribeGroup(context.Background())
				return err == nil && st.State == "Stable" && len(st.Members) == members &&
					b.main.Worker() != nil && b.main.Worker().Ready() == nil
			}, time.Minute, 20*time.Millisecond, "b is a member of a stable generation with %d member(s)", members)
			close(release)
			released = true
			h.waitConsumed(2 * time.Minute)

			h.checkWithMetrics(s, a, b)
			// The held batch was counted once by a, and again by whoever read
			// it after the rebalance.
			handled := counted(t, a.main, "paycb_events_total", nil) + counted(t, b.main, "paycb_events_total", nil)
			assert.Greater(t, handled, float64(len(s.Messages)), "the held batch came back to the partition's next owner")
		})
	}
}

// committedTotal sums the group's committed offsets (0 for none).
func committedTotal(h *harness) int64 {
	var n int64
	for _, o := range h.committed() {
		n += max(o, 0)
	}
	return n
}

// kafkaScript runs scripts/engines/kafka.sh (PAYCB_TEST_KAFKA_SCRIPT)
// with verb.
func kafkaScript(t *testing.T, verb string) {
	t.Helper()
	script := os.Getenv("PAYCB_TEST_KAFKA_SCRIPT")
	require.NotEmpty(t, script, "PAYCB_TEST_KAFKA_SCRIPT must name scripts/engines/kafka.sh")
	out, err := exec.Command(script, verb).CombinedOutput()
	require.NoError(t, err, "kafka.sh %s: %s", verb, out)
}

// TestApacheKafkaBrokerRestartMidStream: the broker is SIGKILLed while the
// worker is part-way through the stream and started again on the same
// data; the worker rides it out and finishes every event exactly once.
func TestApacheKafkaBrokerRestartMidStream(t *testing.T) {
	h := apacheKafkaHarness(t, 4)
	s := demo.Generate(demo.StreamOptions{Seed: 43, Trades: 300})
	h.produce(s.Messages)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			kafkaScript(t, "up") // leave the broker running for the next test
		}
	})

	w := h.start(func(m *app.Main) { m.Config.Worker.BatchMax = 8 })
	joined := func() float64 { return counted(t, w.main, "paycb_group_joined", nil) }
	require.Eventually(t, func() bool { return committedTotal(h) > 0 }, time.Minute, 5*time.Millisecond,
		"the worker commits something")
	require.Eventually(t, func() bool { return joined() == 1 && w.main.Worker().Ready() == nil },
		time.Minute, 20*time.Millisecond, "a member with a live session")
	kafkaScript(t, "kill")
	killed := time.Now()
	require.Eventually(t, func() bool { return joined() == 0 && w.main.Worker().Ready() != nil },
		15*time.Second, 20*time.Millisecond, "the lost broker ends the membership within 15s")
	t.Logf("membership ended %s after the broker was killed: %v",
		time.Since(killed).Round(time.Millisecond), w.main.Worker().Ready())
	kafkaScript(t, "up")
	restarted = true
	// The first request on a connection pooled before the restart may fail
	// (EOF); read the progress once the client reconnects.
	var before int64 = -1
	require.Eventually(t, func() bool {
		ps, err := kafkaops.Progress(context.Background(), h.brokers, h.group(), h.topic())
		if err != nil {
			return false
		}
		before = 0
		for _, p := range ps {
			before += max(p.Committed, 0)
		}
		return true
	}, time.Minute, 50*time.Millisecond, "the restarted broker answers")
	require.Less(t, before, int64(len(s.Messages)), "the broker died mid-stream")

	restartedAt := time.Now()
	h.waitConsumed(3 * time.Minute)
	t.Logf("the stream finished %s after the broker was back (%d of %d messages committed before the kill)",
		time.Since(restartedAt).Round(100*time.Millisecond), before, len(s.Messages))
	h.checkWithMetrics(s, w)
	assert.Positive(t, counted(t, w.main, "paycb_processing_errors_total", nil),
		"the worker met the broker's absence")
	require.Eventually(t, func() bool { return joined() == 1 && w.main.Worker().Ready() == nil },
		time.Minute, 20*time.Millisecond, "a member again once the broker is back")
}

// TestApacheKafkaMembershipProbeIsAnswered: the worker's own heartbeat
// (its membership probe, sent beside kafka-go's) is one Apache Kafka's
// coordinator answers as a live session: over 20 s, longer than the probe's
// window (its interval plus 6 s), the instance never stops counting as
// joined and ready. A probe the coordinator refused (wrong member or
// generation, or the empty group instance id sent as an empty string
// instead of null) would end the membership inside that window.
func TestApacheKafkaMembershipProbeIsAnswered(t *testing.T) {
	h := apacheKafkaHarness(t, 2)
	w := h.start(nil)
	joined := func() float64 { return counted(t, w.main, "paycb_group_joined", nil) }
	require.Eventually(t, func() bool { return joined() == 1 && w.main.Worker().Ready() == nil },
		time.Minute, 20*time.Millisecond, "a member with a live session")
	require.Never(t, func() bool { return joined() != 1 || w.main.Worker().Ready() != nil },
		20*time.Second, 50*time.Millisecond, "the coordinator answers the probe as a live session")
}

// TestApacheKafkaDeadLettersAreWrittenWithAcksAll: the dead-letter topic
// gets a replica on a second broker and min.insync.replicas=2, then that
// broker dies. An acks=all write is now refused (NOT_ENOUGH_REPLICAS) while
// an acks=1 write would still be taken, so the worker's dead letters stay
// unwritten and their messages unacknowledged, nothing after them on the
// partition committed. Once min.insync.replicas is lowered, each dead
// letter is written exactly once and the partition moves on.
//
// One broker alone cannot show this: Kafka caps the effective
// min.insync.replicas at the replication factor, so a single-replica topic
// with min.insync.replicas=2 takes acks=all writes (checked first).
func TestApacheKafkaDeadLettersAreWrittenWithAcksAll(t *testing.T) {
	h := apacheKafkaHarness(t, 1)
	ctx := context.Background()
	minISR2 := map[string]string{"min.insync.replicas": "2"}

	single := h.name("single-replica")
	require.NoError(t, kafkaopstest.CreateTopics(ctx, h.brokers, map[string]int32{single: 1}, minISR2))
	t.Cleanup(func() { _ = kafkaopstest.DeleteTopics(context.Background(), h.brokers, single) })
	require.NoError(t, writeOne(ctx, h.brokers, single, kafka.RequireAll),
		"one replica: min.insync.replicas is capped at the replication factor")

	kafkaScript(t, "up-second")
	t.Cleanup(func() {
		kafkaScript(t, "kill-second")
		// Until the controller fences the dead broker, it could be given
		// the next test's partitions.
		assert.Eventually(t, func() bool {
			meta, err := (&kafka.Client{Addr: kafka.TCP(h.brokers...)}).Metadata(context.Background(), &kafka.MetadataRequest{})
			return err == nil && len(meta.Brokers) == 1
		}, time.Minute, 50*time.Millisecond, "the second broker fenced")
	})
	probe := h.name("acks-probe")
	t.Cleanup(func() { _ = kafkaopstest.DeleteTopics(context.Background(), h.brokers, probe) })
	require.NoError(t, kafkaopstest.DeleteTopics(ctx, h.brokers, h.dlq()))
	require.Eventually(t, func() bool { // the deletion completes asynchronously
		return kafkaopstest.CreateReplicatedTopics(ctx, h.brokers, map[string]int32{h.dlq(): 1, probe: 1}, 2, minISR2) == nil
	}, time.Minute, 200*time.Millisecond, "the dead-letter topic recreated with two replicas")
	isr := func(topic string) []int {
		ids, err := kafkaopstest.InSyncReplicas(ctx, h.brokers, topic, 0)
		if err != nil {
			return nil
		}
		return ids
	}
	require.Eventually(t, func() bool { return len(isr(h.dlq())) == 2 && len(isr(probe)) == 2 },
		time.Minute, 50*time.Millisecond, "both replicas in sync")
	kafkaScript(t, "kill-second")
	require.Eventually(t, func() bool { return len(isr(h.dlq())) == 1 && len(isr(probe)) == 1 },
		time.Minute, 50*time.Millisecond, "the dead broker leaves the ISRs")
	require.ErrorIs(t, writeOne(ctx, h.brokers, probe, kafka.RequireAll), kafka.NotEnoughReplicas, "acks=all is refused")
	require.NoError(t, writeOne(ctx, h.brokers, probe, kafka.RequireOne), "acks=1 is still taken")

	s := demo.Generate(demo.StreamOptions{Seed: 47, Trades: 6})
	require.Equal(t, 1, s.Malformed)
	require.Equal(t, 1, s.Conflicts)
	h.produce(s.Messages)
	w := h.start(nil)
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_processing_errors_total", map[string]string{"stage": "dead_letter"}) >= 2
	}, 2*time.Minute, 20*time.Millisecond, "the dead-letter write is refused, twice")
	ps, err := kafkaops.Progress(ctx, h.brokers, h.group(), h.topic())
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Positive(t, ps[0].Lag(), "the message to dead-letter is not acknowledged")
	assert.Empty(t, h.deadLetters(), "no dead letter was written")

	require.NoError(t, kafkaopstest.SetTopicConfig(ctx, h.brokers, h.dlq(), "min.insync.replicas", "1"))
	h.waitConsumed(2 * time.Minute)
	h.checkWithMetrics(s, w)
	kinds := map[string]int{}
	for _, m := range h.deadLetters() {
		kinds[header(m, deadletters.HeaderErrorKind)]++
	}
	assert.Equal(t, map[string]int{"malformed": 1, "conflict": 1}, kinds, "each dead letter written once")
}

// writeOne writes one message to topic with acks, retrying only while the
// partition's leadership settles (a new topic, a broker just restarted),
// and returns the broker's answer: nil or the partition's error.
func writeOne(ctx context.Context, brokers []string, topic string, acks kafka.RequiredAcks) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, RequiredAcks: acks, MaxAttempts: 1, BatchTimeout: time.Millisecond}
	defer func() { _ = w.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := w.WriteMessages(ctx, kafka.Message{Value: []byte("probe")})
		var werrs kafka.WriteErrors
		if errors.As(err, &werrs) {
			err = errors.Join(werrs...)
		}
		settling := errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.LeaderNotAvailable) ||
			errors.Is(err, kafka.UnknownTopicOrPartition)
		if !settling || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // a retry backoff, as a producer's
	}
}
