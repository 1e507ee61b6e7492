package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/consumer"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/pipeline"
)

func TestMixedStreamIsSettledExactlyOnce(t *testing.T) {
	h := newHarness(t, 12)
	s := demo.Generate(demo.StreamOptions{Seed: 7, Trades: 150})
	h.produce(s.Messages)
	w := h.start(nil)
	h.waitConsumed(2 * time.Minute)

	h.checkStream(s)
	total := counted(t, w.main, "paycb_events_total", nil)
	assert.InDelta(t, float64(len(s.Messages)), total, 0, "every consumed message counted exactly once")
	assert.InDelta(t, float64(s.Events), counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "acquired"}), 0)
	assert.InDelta(t, float64(s.Conflicts), counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "conflict"}), 0)
	kinds := map[string]int{}
	for _, m := range h.deadLetters() {
		kinds[header(m, deadletters.HeaderErrorKind)]++
	}
	assert.Equal(t, map[string]int{"conflict": s.Conflicts, "malformed": s.Malformed}, kinds)
}

func TestCommittedOffsetIsTheNextToRead(t *testing.T) {
	h := newHarness(t, 1)
	s := demo.Generate(demo.StreamOptions{Seed: 3, Trades: 4, NoTraps: true})
	h.produce(s.Messages)
	h.start(nil)
	h.waitConsumed(time.Minute)
	// Offsets 0..n-1 were handled: the committed offset is n, the next one
	// to read, not n-1 (which would redeliver the last message) and not n+1
	// (which would skip the next).
	assert.Equal(t, map[int]int64{0: int64(len(s.Messages))}, h.committed())
	h.checkStream(s)
}

func TestRestartAfterDyingBetweenClaimAndSettle(t *testing.T) {
	for _, point := range []pipeline.FaultPoint{pipeline.FaultAfterAcquire, pipeline.FaultAfterSettle, consumer.FaultBeforeCommit} {
		t.Run(string(point), func(t *testing.T) {
			h := newHarness(t, 3)
			s := demo.Generate(demo.StreamOptions{Seed: 11, Trades: 30, NoTraps: true})
			h.produce(s.Messages)

			// The first worker dies at point on three messages (one per
			// partition at most): it is stopped with a tiny shutdown cap,
			// so it commits nothing after them, like a killed process.
			hits := make(chan struct{}, 3)
			first := h.start(func(m *app.Main) {
				m.Fault = blockOnce(point, 3, hits)
				m.Config.Worker.ShutdownTimeout = 100 * time.Millisecond
			})
			<-hits
			first.shutdown(t)

			second := h.start(nil)
			h.waitConsumed(2 * time.Minute)
			h.checkStream(s)
			if point == pipeline.FaultAfterAcquire {
				// The claim the first worker left ACQUIRED is settled by the
				// second through the fence, counted as a redelivery.
				assert.GreaterOrEqual(t, counted(t, second.main, "paycb_events_total", map[string]string{"outcome": "redelivered"}), 1.0)
			}
		})
	}
}

func TestGracefulShutdownCommitsWhatWasFinishedAndNothingMore(t *testing.T) {
	for _, batchMax := range []int{1, 4} {
		t.Run(fmt.Sprintf("batch-max-%d", batchMax), func(t *testing.T) {
			h := newHarness(t, 1)
			s := demo.Generate(demo.StreamOptions{Seed: 5, Trades: 10, NoTraps: true})
			require.Greater(t, len(s.Messages), 3*batchMax)
			h.produce(s.Messages)

			// Hold the third batch (of one message, or of up to four) just
			// before its offset commit.
			reached := make(chan struct{})
			release := make(chan struct{})
			seen := 0
			w := h.start(func(m *app.Main) {
				m.Config.Worker.BatchMax = batchMax
				m.Fault = func(_ context.Context, p pipeline.FaultPoint) error {
					if p != consumer.FaultBeforeCommit {
						return nil
					}
					seen++ // one partition: calls are sequential
					if seen == 3 {
						close(reached)
						<-release
					}
					return nil
				}
			})
			select {
			case <-reached:
			case <-time.After(time.Minute):
				t.Fatal("the third commit was never reached")
			}
			w.stop() // SIGTERM: stop fetching, finish the in-flight batch
			close(release)
			w.shutdown(t)

			handled := int64(counted(t, w.main, "paycb_events_total", nil))
			assert.Equal(t, map[int]int64{0: handled}, h.committed(),
				"every handled message is committed, nothing after them")
			assert.Less(t, handled, int64(len(s.Messages)), "nothing was fetched after the stop")
			if batchMax == 1 {
				assert.Equal(t, int64(3), handled)
			}
		})
	}
}

func TestSettleCommitWithUnknownOutcomeIsRetriedToOnePosting(t *testing.T) {
	h := newHarness(t, 1)
	proxy, proxied := sqldbtestProxy(t, h)
	s := demo.Generate(demo.StreamOptions{Seed: 9, Trades: 8, NoTraps: true})
	h.produce(s.Messages)
	armed := false
	h.start(func(m *app.Main) {
		m.Config.DB.DSN = proxied
		m.Fault = func(_ context.Context, p pipeline.FaultPoint) error {
			// Right after the fifth claim commits, the next COMMIT on the
			// wire is that event's settle transaction: drop the connection
			// once it has been forwarded.
			if p == pipeline.FaultAfterAcquire && !armed {
				armed = true
				proxy.CutAfterNextCommit()
			}
			return nil
		}
	})
	h.waitConsumed(time.Minute)
	assert.Equal(t, int64(1), proxy.CommitsCut())
	h.checkStream(s)
}

func TestDatabaseDownMidStream(t *testing.T) {
	h := newHarness(t, 2)
	proxy, proxied := sqldbtestProxy(t, h)
	first := demo.Generate(demo.StreamOptions{Seed: 21, Trades: 10, NoTraps: true})
	h.produce(first.Messages)
	w := h.start(func(m *app.Main) { m.Config.DB.DSN = proxied })
	h.waitConsumed(time.Minute)
	before := h.committed()

	proxy.Down()
	second := demo.Generate(demo.StreamOptions{Seed: 22, Trades: 10, NoTraps: true})
	h.produce(second.Messages)
	// Wait until the worker has failed on the new messages several times.
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_processing_errors_total", nil) >= 6
	}, time.Minute, 20*time.Millisecond)
	assert.Equal(t, before, h.committed(), "nothing is committed while the database is down")

	proxy.Up()
	h.waitConsumed(2 * time.Minute)
	all := first
	all.Messages = append(all.Messages, second.Messages...)
	all.Events += second.Events
	for k, v := range second.Paid {
		all.Paid[k] += v
	}
	for k, v := range second.Refunded {
		all.Refunded[k] += v
	}
	h.checkStream(all)
}

func TestTwoWorkersJoiningAndLeavingSettleEveryEventOnce(t *testing.T) {
	h := newHarness(t, 6)
	s := demo.Generate(demo.StreamOptions{Seed: 31, Trades: 120, NoTraps: true})
	half := len(s.Messages) / 2
	h.produce(s.Messages[:half])
	a := h.start(nil)
	b := h.start(nil) // joins mid-stream: a rebalance
	h.produce(s.Messages[half:])
	a.shutdown(t) // leaves mid-stream: another rebalance
	h.waitConsumed(2 * time.Minute)
	h.checkStream(s)
	_ = b
}
