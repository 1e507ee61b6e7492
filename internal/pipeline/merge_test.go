package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// --- The merger's rounds, as pure logic ---

// request is a merge request for the keys, of tenant 1, each counting one
// byte of a statement that may hold 1000.
func request(keys ...string) *mergeRequest {
	r := &mergeRequest{bytes: len(keys), limit: 1000}
	for _, k := range keys {
		r.leaders = append(r.leaders, moneyItem{key: idempotent.TenantKey{TenantID: 1, Key: idempotent.Key(k)}})
	}
	return r
}

// sized is r counting bytes of the round's largest statement.
func sized(r *mergeRequest, bytes int) *mergeRequest {
	r.bytes = bytes
	return r
}

// queued waits until m holds n queued requests.
func queued(t *testing.T, m *merger, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.queue) == n
	}, 10*time.Second, time.Millisecond, "want %d requests queued", n)
}

// joinAsync joins r from a goroutine of its own; the channel gives the
// round r was handed to lead (nil: another's round did it) and the error.
func joinAsync(ctx context.Context, m *merger, r *mergeRequest) <-chan []*mergeRequest {
	out := make(chan []*mergeRequest, 1)
	go func() {
		round, err := m.join(ctx, r)
		if err != nil {
			round = []*mergeRequest{}
		}
		out <- round
	}()
	return out
}

// enqueue joins each of reqs from a goroutine of its own, in order, each
// queued before the next joins; the channels are joinAsync's.
func enqueue(t *testing.T, m *merger, reqs ...*mergeRequest) []<-chan []*mergeRequest {
	t.Helper()
	m.mu.Lock()
	before := len(m.queue)
	m.mu.Unlock()
	out := make([]<-chan []*mergeRequest, len(reqs))
	for i, r := range reqs {
		out[i] = joinAsync(context.Background(), m, r)
		queued(t, m, before+i+1)
	}
	return out
}

func TestMergerRoundsTakeTheQueueInArrivalOrderUpToMax(t *testing.T) {
	m := &merger{max: 4}
	ctx := context.Background()
	a := request("a")
	round, err := m.join(ctx, a)
	require.NoError(t, err)
	require.Equal(t, []*mergeRequest{a}, round, "no round in flight: a starts one at once, alone")

	b, c, d, e := request("b1", "b2"), request("c1"), request("d1", "d2"), request("e1")
	joined := enqueue(t, m, b, c, d, e)
	bDone, cDone, dDone, eDone := joined[0], joined[1], joined[2], joined[3]

	m.finish(round)
	next := <-bDone
	require.Equal(t, []*mergeRequest{b, c, e}, next,
		"the next round, led by the first queued: b and c (3 events), d would pass max 4, e fits")
	m.finish(next)
	for _, done := range []<-chan []*mergeRequest{cDone, eDone} {
		assert.Nil(t, <-done, "done by b's round")
	}
	assert.Equal(t, []*mergeRequest{d}, <-dDone, "d leads the round after")
	m.finish([]*mergeRequest{d})
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.False(t, m.inFlight, "nothing queued: no round in flight")
}

// TestMergerLeavesABatchThatDoesNotFitForTheNextRound: of the queued b, c
// and d, c cannot join b's round, for holding a key b's round settles, or
// for statements that would pass the server's largest with b's; d, behind
// it, fits and goes with b, and c leads the round after.
func TestMergerLeavesABatchThatDoesNotFitForTheNextRound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b, c, d *mergeRequest
	}{
		{"c holds a key of b", request("k1", "k2"), request("k2"), request("k3")},
		{"c's statements would pass the limit of 1000 with b's", sized(request("b"), 600), sized(request("c"), 500), sized(request("d"), 400)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &merger{max: 64}
			round, err := m.join(context.Background(), request("lead"))
			require.NoError(t, err)
			joined := enqueue(t, m, tc.b, tc.c, tc.d)
			m.finish(round)
			next := <-joined[0]
			assert.Equal(t, []*mergeRequest{tc.b, tc.d}, next, "c waits for the round after")
			m.finish(next)
			assert.Nil(t, <-joined[2], "d: done by b's round")
			assert.Equal(t, []*mergeRequest{tc.c}, <-joined[1], "c leads the round after")
			m.finish([]*mergeRequest{tc.c})
		})
	}
}

func TestMergerRequestWhoseContextEndsInTheQueueLeavesIt(t *testing.T) {
	m := &merger{max: 64}
	round, err := m.join(context.Background(), request("lead"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	gone := request("gone")
	goneDone := make(chan error, 1)
	go func() {
		_, err := m.join(ctx, gone)
		goneDone <- err
	}()
	queued(t, m, 1)
	cancel()
	require.ErrorIs(t, <-goneDone, context.Canceled)
	queued(t, m, 0)
	m.finish(round)
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.False(t, m.inFlight, "the request that left is in no round")
}

// TestMergerGathersForTheRestOfTheWait: a request that finds the merger
// idle for its wait leads a round at once; one that comes sooner after a
// round started waits out the rest of the wait, and its round takes what
// queued meanwhile.
func TestMergerGathersForTheRestOfTheWait(t *testing.T) {
	asleep, wake := make(chan time.Duration), make(chan struct{})
	m := &merger{max: 64, wait: time.Hour, sleep: func(d time.Duration) {
		asleep <- d
		<-wake
	}}
	a := request("a")
	round, err := m.join(context.Background(), a)
	require.NoError(t, err)
	require.Equal(t, []*mergeRequest{a}, round, "idle for longer than the wait: a leads at once, alone")
	m.finish(round)

	b, c, d := request("b"), request("c1", "c2"), request("d")
	bDone := joinAsync(context.Background(), m, b)
	pause := <-asleep
	assert.Greater(t, pause, 59*time.Minute, "a round started just now: b waits out the rest of the wait")
	assert.LessOrEqual(t, pause, time.Hour)
	joined := enqueue(t, m, c, d)
	close(wake)
	assert.Equal(t, []*mergeRequest{b, c, d}, <-bDone, "b's round gathers what queued while it waited")
	m.finish([]*mergeRequest{b, c, d})
	for _, done := range joined {
		assert.Nil(t, <-done, "done by b's round")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.False(t, m.inFlight)
	assert.Empty(t, m.queue)
}

// TestMergerLeaderWhoseContextEndsStillLeads: a queued request whose
// context ends as it is made the next leader either leaves the queue
// before (and the one behind it leads) or leads its round all the same:
// never are the requests behind it left without a leader.
func TestMergerLeaderWhoseContextEndsStillLeads(t *testing.T) {
	for range 50 {
		m := &merger{max: 64}
		round, err := m.join(context.Background(), request("lead"))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		next, behind := request("next"), request("behind")
		nextDone := joinAsync(ctx, m, next)
		queued(t, m, 1)
		behindDone := enqueue(t, m, behind)[0]
		cancel() // races the hand-over to next
		m.finish(round)
		if got := <-nextDone; len(got) == 0 {
			// next left the queue first: behind leads.
			require.Equal(t, []*mergeRequest{behind}, <-behindDone)
			m.finish([]*mergeRequest{behind})
		} else {
			require.Equal(t, []*mergeRequest{next, behind}, got, "next leads though its context ended")
			m.finish(got)
			assert.Nil(t, <-behindDone, "done by next's round")
		}
		m.mu.Lock()
		assert.False(t, m.inFlight)
		assert.Empty(t, m.queue)
		m.mu.Unlock()
	}
}

// TestMergerEveryRequestIsInExactlyOneRound: many partitions' goroutines
// join at once, for many rounds; each request is done by exactly one
// round, no round holds more than max events or a key twice, and no round
// runs while another is in flight.
func TestMergerEveryRequestIsInExactlyOneRound(t *testing.T) {
	for _, wait := range []time.Duration{0, 200 * time.Microsecond} {
		t.Run(fmt.Sprintf("wait %s", wait), func(t *testing.T) { everyRequestInOneRound(t, wait) })
	}
}

// everyRequestInOneRound is TestMergerEveryRequestIsInExactlyOneRound
// with a merger that gathers for wait.
func everyRequestInOneRound(t *testing.T, wait time.Duration) {
	t.Helper()
	const partitions, batches, most = 12, 200, 10
	m := &merger{max: most, wait: wait}
	var mu sync.Mutex
	seen := map[*mergeRequest]int{}
	var running atomic.Int32
	var wg sync.WaitGroup
	for p := range partitions {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			for b := range batches {
				var keys []string
				for k := range 1 + rng.IntN(7) {
					// Keys shared between partitions now and then.
					keys = append(keys, fmt.Sprintf("k%d-%d", b, (p+k)%(partitions+2)))
				}
				slices.Sort(keys)
				keys = slices.Compact(keys)
				r := request(keys...)
				round, err := m.join(context.Background(), r)
				if err != nil {
					t.Errorf("join: %v", err)
					return
				}
				if round == nil {
					continue
				}
				assert.Equal(t, int32(1), running.Add(1), "one round in flight")
				mu.Lock()
				events, inRound := 0, map[idempotent.TenantKey]bool{}
				for _, q := range round {
					seen[q]++
					events += len(q.leaders)
					for _, it := range q.leaders {
						assert.False(t, inRound[it.key], "key %s twice in a round", it.key.Key)
						inRound[it.key] = true
					}
				}
				assert.True(t, len(round) == 1 || events <= most, "round of %d events", events)
				mu.Unlock()
				running.Add(-1)
				m.finish(round)
			}
		})
	}
	wg.Wait()
	assert.Len(t, seen, partitions*batches)
	for r, n := range seen {
		if n != 1 {
			t.Errorf("request %v done by %d rounds", r.leaders[0].key.Key, n)
		}
	}
}

// --- Merged rounds against MariaDB ---

// errPoisoned is the settlement failure of a poisoned event.
var errPoisoned = errors.New("injected: this event cannot be settled")

// gatedSettler wraps a Settler: SettleMergedFrom's batch sizes are recorded;
// an event whose key is poisoned fails every settlement that holds it.
type gatedSettler struct {
	Settler

	mu       sync.Mutex
	merged   []int
	poisoned map[idempotent.Key]bool
}

func newGatedSettler(s Settler) *gatedSettler {
	return &gatedSettler{Settler: s, poisoned: map[idempotent.Key]bool{}}
}

// gatedClaims wraps a ClaimStore: the first AcquireMany, once its insert
// has committed, waits, once entered is closed, until release is closed:
// the claims step of a round held in flight while other partitions queue.
// An insert that holds a poisoned key fails, as a deadlock on one batch's
// row fails the whole statement.
type gatedClaims struct {
	ClaimStore
	entered, release chan struct{}
	once             sync.Once

	mu       sync.Mutex
	poisoned map[idempotent.Key]bool
	inserts  []int // the claims each insert carried, failed ones too
}

func (g *gatedClaims) AcquireMany(ctx context.Context, claims []idempotent.Claim) ([]idempotent.Result, error) {
	g.mu.Lock()
	g.inserts = append(g.inserts, len(claims))
	for _, c := range claims {
		if g.poisoned[c.Key] {
			g.mu.Unlock()
			return nil, fmt.Errorf("claim %s: %w", c.Key, errPoisoned)
		}
	}
	g.mu.Unlock()
	res, err := g.ClaimStore.AcquireMany(ctx, claims)
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return res, err
}

func (g *gatedSettler) poison(evs ...channels.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ev := range evs {
		if g.poisoned[ev.Key] {
			return fmt.Errorf("%s: %w", ev.Key, errPoisoned)
		}
	}
	return nil
}

func (g *gatedSettler) SettleFrom(ctx context.Context, ev channels.Event, src settled.Source) (settlement.Result, error) {
	if err := g.poison(ev); err != nil {
		return settlement.Result{}, err
	}
	return g.Settler.SettleFrom(ctx, ev, src)
}

func (g *gatedSettler) SettleBatchFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]settlement.Result, error) {
	if err := g.poison(evs...); err != nil {
		return nil, err
	}
	return g.Settler.SettleBatchFrom(ctx, evs, sources)
}

func (g *gatedSettler) SettleMergedFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]settlement.Result, error) {
	g.mu.Lock()
	g.merged = append(g.merged, len(evs))
	g.mu.Unlock()
	if err := g.poison(evs...); err != nil {
		return nil, err
	}
	return g.Settler.SettleMergedFrom(ctx, evs, sources)
}

func (g *gatedSettler) mergedSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.merged)
}

// statementLog records the statements a bun.DB sends.
type statementLog struct {
	mu    sync.Mutex
	on    bool
	stmts []string
}

func (l *statementLog) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		l.stmts = append(l.stmts, e.Query)
	}
	return ctx
}

func (*statementLog) AfterQuery(context.Context, *bun.QueryEvent) {}

func (l *statementLog) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on, l.stmts = true, nil
}

func (l *statementLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = false
}

// count is how many recorded statements begin with prefix.
func (l *statementLog) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.stmts {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// mergeSetup is a pipeline on MariaDB that merges, with a gated settler,
// gated claims and the statements logged, and one partition's round held
// in flight: partition 0's payment is claimed (its insert committed) and
// its round waits, in the claims step, for claims.release.
type mergeSetup struct {
	env    *pipelineEnv
	gate   *gatedSettler
	claims *gatedClaims
	log    *statementLog
	first  <-chan error
	// firstMsgs is partition 0's batch, in flight.
	firstMsgs []kafka.Message
	seq       int
}

func newMergeSetup(t *testing.T) *mergeSetup {
	t.Helper()
	log := &statementLog{}
	env := newPipelineEnvOn(t, sqldbtest.MustMySQL(t).WithQueryHook(log))
	env.p.MergeMax = 64
	gate := newGatedSettler(env.svc)
	env.p.Settler = gate
	claims := &gatedClaims{ClaimStore: env.p.Claims, entered: make(chan struct{}), release: make(chan struct{}), poisoned: map[idempotent.Key]bool{}}
	env.p.Claims = claims
	s := &mergeSetup{env: env, gate: gate, claims: claims, log: log, seq: 100}
	first := make(chan error, 1)
	msgs := s.payments(0, 1)
	go func() { first <- env.p.Handle(context.Background(), msgs, make([]MessageState, len(msgs))) }()
	<-claims.entered
	s.first, s.firstMsgs = first, msgs
	return s
}

// payments is n new payments of trades of their own, of tenants 1001
// and 1002 in turn, as partition p's messages at offsets 0, 1, …
func (s *mergeSetup) payments(p, n int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		s.seq++
		tr := channelstest.NewTrade(channels.Codes()[s.seq%len(channels.Codes())], s.seq)
		tr.TenantID += int64(s.seq % 2)
		msgs[i] = kafka.Message{Topic: "channel-events", Partition: p, Offset: int64(i), Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{})}
	}
	return msgs
}

// partition is one partition's batch handed to the pipeline from a
// goroutine of its own.
type partition struct {
	msgs   []kafka.Message
	states []MessageState
	done   chan error
}

// handleAsync hands batch to the pipeline from a goroutine of its own.
func (s *mergeSetup) handleAsync(ctx context.Context, msgs []kafka.Message) *partition {
	pt := &partition{msgs: msgs, states: make([]MessageState, len(msgs)), done: make(chan error, 1)}
	go func() { pt.done <- s.env.p.Handle(ctx, pt.msgs, pt.states) }()
	return pt
}

// claimStatus is the status of msg's claim.
func (s *mergeSetup) claimStatus(t *testing.T, msg kafka.Message) idempotent.Status {
	t.Helper()
	ev := s.env.decode(t, msg.Value)
	return s.env.claim(t, ev).Status
}

// mergedCount is paycb_merged_transactions_total{result}.
func mergedCount(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "paycb_merged_transactions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("paycb_merged_transactions_total{result=%q} not found", result)
	return 0
}

// ledgerRows is how many ledger rows the database holds.
func ledgerRows(t *testing.T, db bun.IDB) int {
	t.Helper()
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_ledger_entry").Scan(context.Background(), &n))
	return n
}

// TestMergedRoundSettlesManyPartitionsInOneTransaction: while one
// partition's batch is in its transaction, six other partitions' batches
// (one or two new payments each) queue; the next round takes all of them:
// one lookup, one claims insert and one business transaction, a single
// COMMIT for the nine events of six partitions, and each partition's messages
// done and counted as acquired.
func TestMergedRoundSettlesManyPartitionsInOneTransaction(t *testing.T) {
	s := newMergeSetup(t)
	var parts []*partition
	events := 0
	for p := 1; p <= 6; p++ {
		n := 1 + p%2
		events += n
		parts = append(parts, s.handleAsync(context.Background(), s.payments(p, n)))
		queued(t, s.env.p.merger(), p)
	}
	s.log.start()
	close(s.claims.release)
	require.NoError(t, <-s.first)
	for i, pt := range parts {
		require.NoError(t, <-pt.done, "partition %d", i+1)
	}
	s.log.stop()
	for i, pt := range parts {
		for j, st := range pt.states {
			assert.True(t, st.done, "partition %d message %d", i+1, j)
			assert.Equal(t, idempotent.StatusSettled, s.claimStatus(t, pt.msgs[j]))
		}
	}
	assert.Equal(t, []int{events}, s.gate.mergedSizes(), "one merged transaction for every queued partition's events")
	assert.Equal(t, 2, s.log.count("COMMIT"), "the first partition's transaction and the merged one")
	assert.Equal(t, 1, s.log.count("INSERT INTO ss_channel_idempotent"), "one claims insert for the merged round")
	assert.Equal(t, 1, s.log.count("SELECT `id`, `tenant_id`, `idempotent_key`"), "one lookup for the merged round (three of its batches look up)")
	assert.Equal(t, 2, s.log.count("UPDATE ss_channel_idempotent"),
		"one fence for the first partition's transaction, one for the merged round's two tenants")
	assert.Equal(t, 1+events, eventsCounted(t, s.env.reg, "acquired"))
	assert.Equal(t, 2*(1+events), ledgerRows(t, s.env.db), "two ledger rows per payment")
	assert.InDelta(t, 1, mergedCount(t, s.env.reg, "settled"), 0, "paycb_merged_transactions_total{result=settled}")
	assert.InDelta(t, 0, mergedCount(t, s.env.reg, "split"), 0)
}

// TestMergedRoundLooksUpEveryKeyWhenOneBatchDoes: a round holding a batch
// of two new payments (whose rule looks its keys up) and a channel retry
// on another partition of a payment settled before (a single
// key, which alone would go straight to the insert) looks both up in one
// statement: the retry is found SETTLED there, a duplicate, and the
// insert carries only the two new claims, so no read-back follows it.
func TestMergedRoundLooksUpEveryKeyWhenOneBatchDoes(t *testing.T) {
	s := newMergeSetup(t)
	// The payment the retry repeats, settled by another worker process.
	earlier := s.payments(3, 1)
	require.NoError(t, newPipelineEnvOn(t, s.env.db).p.Handle(context.Background(), earlier, make([]MessageState, 1)))
	two := s.handleAsync(context.Background(), s.payments(1, 2))
	queued(t, s.env.p.merger(), 1)
	retry := earlier[0]
	retry.Partition, retry.Offset = 2, 7
	one := s.handleAsync(context.Background(), []kafka.Message{retry})
	queued(t, s.env.p.merger(), 2)
	s.log.start()
	close(s.claims.release)
	require.NoError(t, <-s.first)
	require.NoError(t, <-two.done)
	require.NoError(t, <-one.done)
	s.log.stop()

	for _, pt := range []*partition{two, one} {
		for j, st := range pt.states {
			assert.True(t, st.done, "partition %d message %d", pt.msgs[j].Partition, j)
			assert.Equal(t, idempotent.StatusSettled, s.claimStatus(t, pt.msgs[j]))
		}
	}
	assert.Equal(t, []int{2}, s.gate.mergedSizes(), "the round settles the two new payments")
	assert.Equal(t, 1, s.log.count("SELECT `id`, `tenant_id`, `idempotent_key`"),
		"one lookup of the round's three keys, and no read-back after the insert")
	assert.Equal(t, 1, s.log.count("INSERT INTO ss_channel_idempotent"), "one claims insert for the merged round")
	assert.Equal(t, 3, eventsCounted(t, s.env.reg, "acquired"), "the first payment and the two new ones")
	assert.Equal(t, 1, eventsCounted(t, s.env.reg, "duplicate"), "the retry")
	assert.Equal(t, 2*4, ledgerRows(t, s.env.db), "two ledger rows per payment (the earlier one too), posted once")
}

// TestPoisonedEventInAMergedRoundHoldsOnlyItsPartition: an event that
// cannot be settled fails the merged transaction; the round hands each
// partition its own events back, every other partition settles them and
// is done, and only the poisoned event's partition returns an error, its
// claim ACQUIRED (its batch's other event settled alone). Once the event
// can be settled, that partition's retry settles it, once.
func TestPoisonedEventInAMergedRoundHoldsOnlyItsPartition(t *testing.T) {
	s := newMergeSetup(t)
	var parts []*partition
	batches := make([][]kafka.Message, 5)
	for p := range batches {
		batches[p] = s.payments(p+1, 2)
	}
	const bad = 2 // partition 3's first message
	poisoned := s.env.decode(t, batches[bad][0].Value)
	s.gate.mu.Lock()
	s.gate.poisoned[poisoned.Key] = true
	s.gate.mu.Unlock()
	for p, msgs := range batches {
		parts = append(parts, s.handleAsync(context.Background(), msgs))
		queued(t, s.env.p.merger(), p+1)
	}
	close(s.claims.release)
	require.NoError(t, <-s.first)
	for p, pt := range parts {
		err := <-pt.done
		if p == bad {
			require.ErrorIs(t, err, errPoisoned)
			assert.False(t, pt.states[0].done, "the poisoned message is not done")
			assert.True(t, pt.states[0].acquired, "its claim was made by it")
			assert.Equal(t, idempotent.StatusAcquired, s.claimStatus(t, pt.msgs[0]))
			assert.True(t, pt.states[1].done, "the batch's other event settled alone")
			continue
		}
		require.NoError(t, err, "partition %d", p+1)
		for j, st := range pt.states {
			assert.True(t, st.done, "partition %d message %d", p+1, j)
		}
	}
	assert.Equal(t, []int{10}, s.gate.mergedSizes(), "one merged attempt; the split settled alone")
	assert.InDelta(t, 1, mergedCount(t, s.env.reg, "split"), 0, "paycb_merged_transactions_total{result=split}")

	s.gate.mu.Lock()
	delete(s.gate.poisoned, poisoned.Key)
	s.gate.mu.Unlock()
	pt := parts[bad]
	require.NoError(t, s.env.p.Handle(context.Background(), pt.msgs, pt.states), "the poisoned partition's retry")
	assert.Equal(t, idempotent.StatusSettled, s.claimStatus(t, pt.msgs[0]))
	assert.Equal(t, 1+10, eventsCounted(t, s.env.reg, "acquired"), "each event counted once, as acquired")
	assert.Equal(t, 2*11, ledgerRows(t, s.env.db), "each payment posted once")
}

// TestFailedClaimsOfAMergedRoundHoldOnlyTheirPartition: a round's claims
// insert fails as a whole when one batch's row fails it (a deadlock, a lock
// wait timeout, a certification failure); each batch then claims its own
// alone, so only the partition whose own claims fail again pays an attempt:
// the others are claimed, settled and done in the same call.
func TestFailedClaimsOfAMergedRoundHoldOnlyTheirPartition(t *testing.T) {
	s := newMergeSetup(t)
	batches := make([][]kafka.Message, 4)
	for p := range batches {
		batches[p] = s.payments(p+1, 2)
	}
	const bad = 1 // partition 2's second message
	s.claims.mu.Lock()
	s.claims.poisoned[s.env.decode(t, batches[bad][1].Value).Key] = true
	s.claims.mu.Unlock()
	var parts []*partition
	for p, msgs := range batches {
		parts = append(parts, s.handleAsync(context.Background(), msgs))
		queued(t, s.env.p.merger(), p+1)
	}
	close(s.claims.release)
	require.NoError(t, <-s.first)
	for p, pt := range parts {
		err := <-pt.done
		if p == bad {
			require.ErrorIs(t, err, errPoisoned)
			for j, st := range pt.states {
				assert.False(t, st.done, "message %d of the partition whose claims fail", j)
			}
			continue
		}
		require.NoError(t, err, "partition %d", p+1)
		for j, st := range pt.states {
			assert.True(t, st.done, "partition %d message %d", p+1, j)
			assert.Equal(t, idempotent.StatusSettled, s.claimStatus(t, pt.msgs[j]))
		}
	}
	s.claims.mu.Lock()
	inserts := slices.Clone(s.claims.inserts)
	s.claims.mu.Unlock()
	assert.Equal(t, []int{1, 8, 2, 2, 2, 2}, sortedAfterFirstTwo(inserts),
		"the first partition's claim, the round's failed insert of eight, then each batch's own")

	// Once its row can be claimed, the partition's retry settles it.
	s.claims.mu.Lock()
	clear(s.claims.poisoned)
	s.claims.mu.Unlock()
	pt := parts[bad]
	require.NoError(t, s.env.p.Handle(context.Background(), pt.msgs, pt.states))
	assert.Equal(t, 2*9, ledgerRows(t, s.env.db), "each payment posted once")
}

// sortedAfterFirstTwo is xs with all but its first two sorted (the order in
// which concurrent batches ran is not the test's).
func sortedAfterFirstTwo(xs []int) []int {
	out := slices.Clone(xs)
	if len(out) > 2 {
		slices.Sort(out[2:])
	}
	return out
}

// TestCrashInAMergedRoundLeavesOrphansTheSweeperSettlesOnce: a process
// that dies after a merged round's claims committed (after-acquire, in
// the round), in its merged transaction (the transaction and the splits
// fail), or after it committed (after-settle, in every partition) leaves
// no settled message unposted and no posting doubled: the sweeper settles
// the orphans through the fence, and the stream delivered again to a new
// pipeline (the partitions' next owner) finds every claim settled.
func TestCrashInAMergedRoundLeavesOrphansTheSweeperSettlesOnce(t *testing.T) {
	for _, step := range []string{"after-acquire", "merged-transaction", "after-settle"} {
		t.Run(step, func(t *testing.T) {
			s := newMergeSetup(t)
			crash := errors.New("injected: the process died here")
			var batches [][]kafka.Message
			for p := 1; p <= 4; p++ {
				batches = append(batches, s.payments(p, 2))
			}
			switch step {
			case "after-acquire", "after-settle":
				point := FaultAfterAcquire
				if step == "after-settle" {
					point = FaultAfterSettle
				}
				s.env.p.Fault = func(_ context.Context, p FaultPoint) error {
					if p == point {
						return crash
					}
					return nil
				}
			case "merged-transaction":
				// Every settlement of these events fails: merged, split
				// into batches, or one by one.
				s.gate.mu.Lock()
				for _, msgs := range batches {
					for _, m := range msgs {
						s.gate.poisoned[s.env.decode(t, m.Value).Key] = true
					}
				}
				s.gate.mu.Unlock()
			}
			var parts []*partition
			for p, msgs := range batches {
				parts = append(parts, s.handleAsync(context.Background(), msgs))
				queued(t, s.env.p.merger(), p+1)
			}
			close(s.claims.release)
			<-s.first //nolint:errcheck // partition 0's own batch meets the fault too, or not: either is an outcome below
			for p, pt := range parts {
				if err := <-pt.done; err == nil {
					t.Errorf("partition %d: the process died before its batch was done, yet it returned no error", p+1)
				}
			}
			if step == "after-acquire" {
				assert.Empty(t, s.gate.mergedSizes(), "the process died before the merged transaction")
			} else {
				assert.Equal(t, []int{8}, s.gate.mergedSizes(), "the four partitions' batches were one round")
			}

			// The process is gone. The sweeper of another instance finds
			// the orphans (ACQUIRED past OrphanAfter) and settles them.
			sweeper := &Sweeper{
				Claims:  idempotent.NewStore(s.env.db, idempotent.WithClock(func() time.Time { return time.Now().Add(time.Hour) })),
				Settler: s.env.svc, Metrics: s.env.p.Metrics, Logger: slog.New(slog.DiscardHandler), OrphanAfter: time.Minute,
			}
			_, err := sweeper.SweepOnce(context.Background())
			require.NoError(t, err)
			for _, msgs := range batches {
				for _, m := range msgs {
					assert.Equal(t, idempotent.StatusSettled, s.claimStatus(t, m))
				}
			}

			// The partitions' next owner gets the messages again: every
			// one a redelivery of a settled claim, nothing posted again.
			next := newPipelineEnvOn(t, s.env.db)
			next.p.MergeMax = 64
			var wg sync.WaitGroup
			for _, msgs := range batches {
				wg.Go(func() {
					assert.NoError(t, next.p.Handle(context.Background(), msgs, make([]MessageState, len(msgs))))
				})
			}
			wg.Wait()
			assert.Equal(t, 8, eventsCounted(t, next.reg, "redelivered"))
			assert.Equal(t, 0, eventsCounted(t, next.reg, "acquired"))
			var posted int
			require.NoError(t, s.env.db.NewRaw("SELECT COUNT(DISTINCT tenant_id, idempotent_key) FROM ss_ledger_entry").Scan(context.Background(), &posted))
			assert.Equal(t, ledgerRows(t, s.env.db), 2*posted, "two rows per posting, no posting twice")
			assert.GreaterOrEqual(t, posted, 8, "every payment of the round posted")
			var imbalance int64
			require.NoError(t, s.env.db.NewRaw("SELECT COALESCE(SUM(CASE direction WHEN 'DEBIT' THEN amount ELSE -amount END), 0) FROM ss_ledger_entry").
				Scan(context.Background(), &imbalance))
			assert.Zero(t, imbalance, "the ledger balances")
		})
	}
}

// TestHeldOrderRowHoldsUpOnlyItsPartition: a partition whose batch, alone
// in its round, must settle a refund on an order row another transaction
// holds waits for that row outside the merger's round: while it waits, an
// unrelated partition's new payment is claimed, settled and done. (With the
// round held through the settlement, the payment queued behind the held row
// until the lock wait ended.)
func TestHeldOrderRowHoldsUpOnlyItsPartition(t *testing.T) {
	env := newPipelineEnvOn(t, sqldbtest.MustMySQL(t))
	env.p.MergeMax = 64
	ctx := context.Background()
	held := channelstest.NewTrade(channels.Codes()[0], 7001)
	env.handle(t, channelstest.PaymentEnvelope(held, channelstest.Delivery{}))

	// Another transaction holds the trade's order row.
	tx, err := env.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var id int64
	require.NoError(t, tx.NewRaw("SELECT id FROM ss_channel_order WHERE tenant_id = ? AND channel_code = ? AND channel_trade_no = ? FOR UPDATE",
		held.TenantID, string(held.Channel), held.TradeNo).Scan(ctx, &id))

	refund := channelstest.RefundEnvelope(held, channelstest.Refund{No: "R-held-1", Amount: 100}, channelstest.Delivery{})
	waiting := make(chan error, 1)
	go func() {
		msgs := []kafka.Message{{Topic: "channel-events", Partition: 1, Offset: 0, Value: refund}}
		waiting <- env.p.Handle(ctx, msgs, make([]MessageState, 1))
	}()
	// Its claim is made and the round given back: what is left for it is
	// its settlement, which needs the held row.
	ev := env.decode(t, refund)
	require.Eventually(t, func() bool {
		m := env.p.merger()
		m.mu.Lock()
		free := !m.inFlight
		m.mu.Unlock()
		rec, err := env.claims.Get(ctx, ev.TenantID, ev.Key)
		return free && err == nil && rec.Status == idempotent.StatusAcquired
	}, 30*time.Second, time.Millisecond, "the refund's claim made and the merger's round given back")

	// An unrelated partition's new payment settles while the row is held.
	other := channelstest.NewTrade(channels.Codes()[0], 7002)
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	msgs := []kafka.Message{{Topic: "channel-events", Partition: 2, Offset: 0, Value: channelstest.PaymentEnvelope(other, channelstest.Delivery{})}}
	states := make([]MessageState, 1)
	require.NoError(t, env.p.Handle(octx, msgs, states), "the other partition did not wait for the held row")
	assert.True(t, states[0].done)
	select {
	case err := <-waiting:
		t.Fatalf("the refund finished while its order row was still held: %v", err)
	default:
	}

	// The row is let go: the refund settles.
	require.NoError(t, tx.Rollback())
	require.NoError(t, <-waiting)
	assert.Equal(t, 3, eventsCounted(t, env.reg, "acquired"), "the first payment, the other one and the refund")
}
