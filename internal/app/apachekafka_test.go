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
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/invariant"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/worker"
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
// holding it until the second is a member, and its late commit belongs to
// a generation that has ended; in both cases the batch is redelivered to
// the partition's next owner and nothing is lost or posted twice.
func TestApacheKafkaRebalanceWhileAPartitionIsMidBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		// honoursGeneration: the held batch returns when its generation
		// ends; otherwise it returns only once the second worker is in.
		honoursGeneration bool
	}{
		{"the batch is given up when the generation ends", true},
		{"the batch is held until the second worker is in", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := apacheKafkaHarness(t, 4)
			s := demo.Generate(demo.StreamOptions{Seed: 41, Trades: 80})
			h.produce(s.Messages)

			holding := make(chan struct{})
			release := make(chan struct{})
			var released bool
			t.Cleanup(func() {
				if !released {
					close(release)
				}
			})
			var first atomic.Bool
			a := h.start(func(m *app.Main) {
				m.Config.Worker.BatchMax = 16
				m.Fault = func(ctx context.Context, p worker.FaultPoint) error {
					if p != worker.FaultBeforeCommit {
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
			select {
			case <-holding:
			case <-time.After(time.Minute):
				t.Fatal("no batch reached its commit")
			}
			require.Zero(t, committedTotal(h), "the held batch is the first to commit")
			b := h.start(nil) // returns once b is a member of a generation
			close(release)
			released = true
			h.waitConsumed(2 * time.Minute)

			h.checkWithMetrics(s, a, b)
			redelivered := counted(t, a.main, "paycb_events_total", map[string]string{"outcome": "redelivered"}) +
				counted(t, b.main, "paycb_events_total", map[string]string{"outcome": "redelivered"})
			assert.GreaterOrEqual(t, redelivered, 1.0, "the held batch came back to the partition's next owner")
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
	require.Eventually(t, func() bool { return committedTotal(h) > 0 }, time.Minute, 5*time.Millisecond,
		"the worker commits something")
	kafkaScript(t, "kill")
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
}
