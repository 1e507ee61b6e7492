package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/pipeline"
)

func TestOffsetCommitterSendsOfferedOffsetsInTheBackground(t *testing.T) {
	coord := &recordingCoordinator{committed: map[int]int64{}}
	c := newOffsetCommitter("t", coord.send)
	c.interval = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	ran := make(chan struct{})
	go func() { defer close(ran); c.run(ctx, &loops, Backoff{}) }()
	const partitions, offers = 12, 200
	var wg sync.WaitGroup
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := int64(1); next <= offers; next++ {
				c.Offer(p, next) // never waits for a request
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool {
		for p := range partitions {
			if coord.committedAt(p) != offers {
				return false
			}
		}
		return true
	})
	cancel()
	<-ran
	assert.Equal(t, 1, coord.maxFlight, "one request in flight at a time")
	coord.mu.Lock()
	defer coord.mu.Unlock()
	for _, req := range coord.requests {
		assert.NotEmpty(t, req, "no empty request")
	}
	t.Logf("%d offers in %d requests", partitions*offers, len(coord.requests))
}

func TestOffsetCommitterFlushesWhenTheGenerationEndsAfterEveryLoop(t *testing.T) {
	coord := &recordingCoordinator{committed: map[int]int64{}}
	c := newOffsetCommitter("t", coord.send)
	c.interval = time.Hour // only the flush sends
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Add(2)
	ran := make(chan struct{})
	go func() { defer close(ran); c.run(ctx, &loops, Backoff{}) }()
	c.Offer(0, 5)
	cancel() // the generation ends under the loops
	// A loop finishing its last batch after the end still offers it, and
	// the flush carries it: it waits for every loop.
	c.Offer(1, 7)
	loops.Done()
	c.Offer(0, 6)
	loops.Done()
	<-ran
	coord.mu.Lock()
	defer coord.mu.Unlock()
	require.Len(t, coord.requests, 1, "one request: the flush")
	assert.Equal(t, map[int]int64{0: 6, 1: 7}, coord.requests[0])
}

func TestOffsetCommitterKeepsRefusedOffsetsForTheNextRequest(t *testing.T) {
	unavailable := errors.New("coordinator not available")
	fails := 1
	coord := &recordingCoordinator{committed: map[int]int64{}, fail: func(map[int]int64) error {
		if fails > 0 {
			fails--
			return unavailable
		}
		return nil
	}}
	var answers []error
	c := newOffsetCommitter("t", coord.send)
	c.answered = func(_ map[int]int64, err error) { answers = append(answers, err) }
	c.Offer(0, 3)
	c.Offer(1, 4)
	require.ErrorIs(t, c.tick(), unavailable)
	c.Offer(1, 9) // a later offset replaces the refused one, never the reverse
	require.NoError(t, c.tick())
	assert.Equal(t, int64(3), coord.committedAt(0))
	assert.Equal(t, int64(9), coord.committedAt(1))
	assert.Equal(t, []error{unavailable, nil}, answers)
	require.NoError(t, c.tick(), "nothing pending: no request")
	assert.Len(t, coord.requests, 2)
}

func TestOffsetCommitterDropsOffsetsOfAGenerationThatIsOver(t *testing.T) {
	coord := &recordingCoordinator{committed: map[int]int64{}, fail: func(map[int]int64) error {
		return fmt.Errorf("commit: %w", kafka.RebalanceInProgress)
	}}
	c := newOffsetCommitter("t", coord.send)
	c.Offer(0, 3)
	require.ErrorIs(t, c.tick(), kafka.RebalanceInProgress)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.pending, "the next owner starts from the last commit")
}

// runWorker runs a worker with cfg (brokers, topic and group set by the
// caller) until the returned stop is called or the test ends.
func runWorker(t *testing.T, cfg Config, p *pipeline.Pipeline) (*Worker, func()) {
	t.Helper()
	cfg.Backoff = Backoff{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond}
	cfg.SessionTimeout, cfg.HeartbeatInterval, cfg.RebalanceTimeout = 6*time.Second, 100*time.Millisecond, 6*time.Second
	cfg.MaxWait, cfg.ShutdownTimeout = 50*time.Millisecond, 10*time.Second
	w := New(cfg, p, p.Metrics, slog.New(slog.DiscardHandler))
	return w, runUntilStopped(t, w)
}

// runUntilStopped runs w until the returned stop is called or the test
// ends; stop waits for Run to return nil (60 s at most).
func runUntilStopped(t *testing.T, w *Worker) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(60 * time.Second):
				t.Error("worker did not stop within 60s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventsCounted sums paycb_events_total, of outcome or of every outcome
// ("").
func eventsCounted(t *testing.T, reg *prometheus.Registry, outcome string) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && (outcome == "" || l.GetValue() == outcome) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}

// committedOffsets is the group's committed offset of every partition of
// topic (-1: none).
func committedOffsets(t *testing.T, brokers []string, group, topic string) (committed, ends map[int]int64) {
	t.Helper()
	ps, err := kafkaops.Progress(context.Background(), brokers, group, topic)
	require.NoError(t, err)
	committed, ends = map[int]int64{}, map[int]int64{}
	for _, p := range ps {
		committed[p.Partition], ends[p.Partition] = p.Committed, p.End
	}
	return committed, ends
}

// TestOffsetsNeverPassAnUnsettledMessage: partitions handle batches
// concurrently while attempts fail at random after the claim and after the
// settlement (the message is retried in place, its claim found ACQUIRED or
// SETTLED), offsets are committed in the background every millisecond, and
// a second worker joins and leaves (each revoke flushes). Every offset
// commit request the broker receives is checked, as it arrives, against
// the database: each message before the offset has its claim SETTLED. The
// stream is one payment of a trade of its own per message, so message
// (p, o) made the claim whose source is (p, o). It runs with each
// partition's batches alone, and merged across partitions (MergeMax).
func TestOffsetsNeverPassAnUnsettledMessage(t *testing.T) {
	for _, mergeMax := range []int{0, 64} {
		t.Run(fmt.Sprintf("merge-max-%d", mergeMax), func(t *testing.T) { offsetsNeverPassAnUnsettledMessage(t, mergeMax) })
	}
}

func offsetsNeverPassAnUnsettledMessage(t *testing.T, mergeMax int) {
	t.Helper()
	const topic, group, partitions = "channel-events", "settlement-consumer", 8
	cluster, brokers, err := inprocess.Start(map[string]int32{topic: partitions})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	envA := newPipelineEnv(t)
	envB := newPipelineEnvOn(t, envA.db)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 25))
	flaky := func(_ context.Context, p pipeline.FaultPoint) error {
		rngMu.Lock()
		defer rngMu.Unlock()
		switch {
		case p == pipeline.FaultAfterAcquire && rng.IntN(8) == 0:
			return errors.New("injected: failed after the claim")
		case p == pipeline.FaultAfterSettle && rng.IntN(8) == 0:
			return errors.New("injected: failed after the settlement")
		}
		return nil
	}
	envA.p.Fault, envB.p.Fault = flaky, flaky
	envA.p.MergeMax, envB.p.MergeMax = mergeMax, mergeMax
	merged := &mergeCounter{Settler: envA.svc}
	envA.p.Settler, envB.p.Settler = merged, merged

	checker := &commitChecker{db: envA.db, topic: topic}
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		checker.check(req.(*kmsg.OffsetCommitRequest))
		return nil, nil, false // the broker handles it
	})

	cfg := Config{Brokers: brokers, Topic: topic, GroupID: group, BatchMax: 8, CommitInterval: time.Millisecond}
	if mergeMax > 0 {
		cfg.BatchMax = 4 // every batch small enough to be merged
	}
	produceTrades(t, brokers, topic, 0, 300)
	_, stopA := runWorker(t, cfg, envA.p)
	require.Eventually(t, func() bool { return eventsCounted(t, envA.reg, "") >= 100 }, time.Minute, 5*time.Millisecond)
	b, stopB := runWorker(t, cfg, envB.p)
	produceTrades(t, brokers, topic, 300, 300)
	require.Eventually(t, func() bool { return b.currentGeneration() != 0 }, time.Minute, 5*time.Millisecond)
	require.Eventually(t, func() bool { return eventsCounted(t, envB.reg, "") > 0 }, time.Minute, 5*time.Millisecond)
	stopB() // its partitions move back to the first worker
	produceTrades(t, brokers, topic, 600, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, kafkaops.WaitConsumed(ctx, brokers, group, topic, 20*time.Millisecond, nil))
	stopA()

	violations, checked := checker.result()
	assert.Empty(t, violations[:min(len(violations), 10)], "offsets committed past a message not settled (%d in all)", len(violations))
	assert.Greater(t, checked, 50, "commit requests checked")
	var settled int
	require.NoError(t, envA.db.NewRaw("SELECT COUNT(*) FROM ss_channel_idempotent WHERE status = 'SETTLED'").Scan(context.Background(), &settled))
	assert.Equal(t, 800, settled)
	t.Logf("%d commit requests checked, %d merged transactions", checked, merged.n.Load())
	if mergeMax > 0 {
		assert.Positive(t, merged.n.Load(), "batches of several partitions were merged")
	}
}

// commitChecker checks each OffsetCommit request against the claims, as
// the broker receives it, before the broker handles it.
type commitChecker struct {
	db    *bun.DB
	topic string

	mu         sync.Mutex
	violations []string
	checked    int
}

func (c *commitChecker) check(q *kmsg.OffsetCommitRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rt := range q.Topics {
		if rt.Topic != c.topic {
			continue
		}
		for _, rp := range rt.Partitions {
			var settled int64
			err := c.db.NewRaw(`SELECT COUNT(*) FROM ss_channel_idempotent
				WHERE source_topic = ? AND source_partition = ? AND source_offset < ? AND status = 'SETTLED'`,
				c.topic, rp.Partition, rp.Offset).Scan(ctx, &settled)
			c.mu.Lock()
			switch {
			case err != nil:
				c.violations = append(c.violations, "check failed: "+err.Error())
			case settled != rp.Offset:
				c.violations = append(c.violations, fmt.Sprintf("partition %d committed at %d with %d messages before it settled",
					rp.Partition, rp.Offset, settled))
			}
			c.checked++
			c.mu.Unlock()
		}
	}
}

func (c *commitChecker) result() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...), c.checked
}

// TestRevokeFlushesSoTheNextOwnerRedeliversNothing: offsets are committed
// only by flushes here (the interval is an hour). The first worker handles
// every message; nothing is committed yet. A second worker joins: the
// first's generation ends, its committer flushes what was handled before
// the partitions move, and the second, owning half of them, handles none
// of those messages again. New messages are then handled by both, and the
// shutdowns flush theirs: the group has committed everything, every
// message counted once.
func TestRevokeFlushesSoTheNextOwnerRedeliversNothing(t *testing.T) {
	const topic, group = "channel-events", "settlement-consumer"
	cluster, brokers, err := inprocess.Start(map[string]int32{topic: 4})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	envA := newPipelineEnv(t)
	envB := newPipelineEnvOn(t, envA.db)
	cfg := Config{Brokers: brokers, Topic: topic, GroupID: group, BatchMax: 16, CommitInterval: time.Hour}

	produceTrades(t, brokers, topic, 0, 200)
	a, stopA := runWorker(t, cfg, envA.p)
	require.Eventually(t, func() bool { return eventsCounted(t, envA.reg, "") == 200 }, time.Minute, 5*time.Millisecond)
	committed, _ := committedOffsets(t, brokers, group, topic)
	assert.Equal(t, map[int]int64{0: -1, 1: -1, 2: -1, 3: -1}, committed, "nothing committed before the revoke")

	b, stopB := runWorker(t, cfg, envB.p)
	require.Eventually(t, func() bool {
		g := b.currentGeneration()
		b.mu.Lock()
		owns := len(b.partitions)
		b.mu.Unlock()
		return g != 0 && g == a.currentGeneration() && owns > 0
	}, time.Minute, 5*time.Millisecond, "both workers in one generation, the second owning partitions")
	committed, ends := committedOffsets(t, brokers, group, topic)
	assert.Equal(t, ends, committed, "the revoke flushed every handled message's offset")
	assert.Zero(t, eventsCounted(t, envB.reg, ""), "the new owner redelivers nothing")

	produceTrades(t, brokers, topic, 200, 100)
	require.Eventually(t, func() bool {
		return eventsCounted(t, envA.reg, "")+eventsCounted(t, envB.reg, "") == 300
	}, time.Minute, 5*time.Millisecond)
	stopB()
	stopA()
	committed, ends = committedOffsets(t, brokers, group, topic)
	assert.Equal(t, ends, committed, "the shutdowns flushed the rest")
	assert.Equal(t, 300, eventsCounted(t, envA.reg, "acquired")+eventsCounted(t, envB.reg, "acquired"), "each message handled once")
	assert.Zero(t, eventsCounted(t, envA.reg, "redelivered")+eventsCounted(t, envB.reg, "redelivered"))
}

// TestShutdownFlushesHandledOffsets: with offsets committed only by
// flushes, a worker that handled everything and is stopped has committed
// everything.
func TestShutdownFlushesHandledOffsets(t *testing.T) {
	const topic, group = "channel-events", "settlement-consumer"
	cluster, brokers, err := inprocess.Start(map[string]int32{topic: 3})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	env := newPipelineEnv(t)
	produceTrades(t, brokers, topic, 0, 90)
	_, stop := runWorker(t, Config{Brokers: brokers, Topic: topic, GroupID: group, BatchMax: 4, CommitInterval: time.Hour}, env.p)
	require.Eventually(t, func() bool { return eventsCounted(t, env.reg, "") == 90 }, time.Minute, 5*time.Millisecond)
	committed, _ := committedOffsets(t, brokers, group, topic)
	assert.Equal(t, map[int]int64{0: -1, 1: -1, 2: -1}, committed, "nothing committed while running")
	stop()
	committed, ends := committedOffsets(t, brokers, group, topic)
	assert.Equal(t, ends, committed)
	assert.Equal(t, int64(90), ends[0]+ends[1]+ends[2])
}
