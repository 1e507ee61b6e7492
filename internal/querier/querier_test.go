package querier_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/internal/querybudget"
	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// The Work, Asker, Reader and Publisher here are in memory: these tests
// are of the loop's logic. The budget is the real store on MariaDB.

var created = time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// memWork is an in-memory Work: each registration with its next ask,
// lease and status, and every record written.
type memWork struct {
	mu      sync.Mutex
	regs    map[string]*memReg
	records map[string][]querier.Record
}

type memReg struct {
	item       querier.Item
	next       time.Time
	owner      string
	leaseUntil time.Time
	status     queryplan.Status
	stopped    bool
}

func newWork(items ...querier.Item) *memWork {
	w := &memWork{regs: map[string]*memReg{}, records: map[string][]querier.Record{}}
	p := queryplan.DefaultPolicy()
	for _, it := range items {
		w.regs[it.ID] = &memReg{item: it, next: p.First(it.Registration)}
	}
	return w
}

func (w *memWork) Lease(_ context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]querier.Item, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.regs))
	for id := range w.regs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []querier.Item
	for _, id := range ids {
		r := w.regs[id]
		if len(out) == limit || r.stopped || r.next.After(now) || now.Before(r.leaseUntil) {
			continue
		}
		r.owner, r.leaseUntil = owner, now.Add(lease)
		out = append(out, r.item)
	}
	return out, nil
}

func (w *memWork) Record(_ context.Context, owner string, it querier.Item, rec querier.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.regs[it.ID]
	if r.owner != owner {
		return nil
	}
	w.records[it.ID] = append(w.records[it.ID], rec)
	r.owner, r.leaseUntil = "", time.Time{}
	r.item.Registration.Retries = rec.Retries
	r.next, r.stopped = rec.Decision.Next, rec.Decision.Stop
	if rec.Decision.Status != "" {
		r.status = rec.Decision.Status
	}
	return nil
}

func (w *memWork) recordsOf(id string) []querier.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]querier.Record(nil), w.records[id]...)
}

// script answers each target with its scripted outcomes in turn (the last
// one repeating); an outcome "transport" is a transport error.
type script struct {
	mu      sync.Mutex
	answers map[string][]channels.QueryOutcome
	asked   map[string]int
}

func (s *script) Ask(_ context.Context, t channels.QueryTarget) (channels.QueryResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked == nil {
		s.asked = map[string]int{}
	}
	seq := s.answers[t.MerchantOrderNo]
	o := seq[min(s.asked[t.MerchantOrderNo], len(seq)-1)]
	s.asked[t.MerchantOrderNo]++
	if o == "transport" {
		return channels.QueryResponse{}, errors.New("dial tcp: connection refused")
	}
	return channels.QueryResponse{StatusCode: 200, Body: []byte(o)}, nil
}

func (s *script) count(order string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.asked[order] }

// bodyReader reads the outcome back from the body; "forged" is an
// unauthenticated answer.
type bodyReader struct{}

func (bodyReader) Read(_ channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	o := channels.QueryOutcome(resp.Body)
	if o == "forged" {
		return channels.QueryAnswer{}, &channels.Error{Kind: channels.KindUnauthenticated, Err: errors.New("signature of another key")}
	}
	ans := channels.QueryAnswer{Outcome: o, RawState: string(o)}
	if o == channels.QuerySettled {
		ans.Events = []channels.Event{{Channel: channels.WeChat, Type: eventkey.PaymentReceived}}
	}
	if o == "settled-unprovable" {
		ans.Outcome = channels.QuerySettled
	}
	return ans, nil
}

type memPublisher struct {
	mu        sync.Mutex
	published []string
	fail      error
	// hang makes Publish wait for its context to end, as a broker that
	// took the connection and never answers.
	hang bool
}

func (p *memPublisher) Publish(ctx context.Context, t channels.QueryTarget, _ time.Time, _ channels.QueryResponse, _ channels.QueryAnswer) error {
	p.mu.Lock()
	hang := p.hang
	p.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.published = append(p.published, t.MerchantOrderNo)
	return nil
}

func item(order string) querier.Item {
	return querier.Item{
		ID: order,
		Target: channels.QueryTarget{
			TenantID: 1001, Channel: channels.WeChat, Kind: channels.QueryPayment,
			MerchantID: "1900000100", MerchantOrderNo: order,
		},
		Registration: queryplan.Registration{Kind: channels.QueryPayment, CreatedAt: created, ExpiresAt: created.Add(2 * time.Hour)},
	}
}

type rig struct {
	q     *querier.Querier
	clock *clock
	work  *memWork
	ask   *script
	pub   *memPublisher
	reg   *prometheus.Registry
}

func newRig(t *testing.T, budget queryplan.Budget, answers map[string][]channels.QueryOutcome) *rig {
	t.Helper()
	store, err := querybudget.New(sqldbtest.MustMySQL(t), budget)
	require.NoError(t, err)
	var items []querier.Item
	for order := range answers {
		items = append(items, item(order))
	}
	r := &rig{clock: &clock{now: created}, work: newWork(items...), ask: &script{answers: answers}, pub: &memPublisher{}, reg: prometheus.NewRegistry()}
	m, err := metrics.NewQueryMetrics(r.reg)
	require.NoError(t, err)
	r.q, err = querier.New(querier.Config{Owner: "q1", Policy: queryplan.DefaultPolicy(), Lease: time.Minute, Batch: 100, Parallel: 4, Now: r.clock.Now},
		r.work, r.ask, bodyReader{}, r.pub, store, m, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return r
}

// at runs one round at created+d and returns how many were handled.
func (r *rig) at(t *testing.T, d time.Duration) int {
	t.Helper()
	r.clock.Set(created.Add(d))
	n, err := r.q.Round(context.Background())
	require.NoError(t, err)
	return n
}

func (r *rig) answered(channel, answer string) float64 {
	return counterValue(r.reg, channel, answer)
}

var generous = queryplan.Budget{PerSecond: 1000, Burst: 1000, Backoff: time.Minute, MaxBackoff: time.Hour}

// TestNotPaidThenPaidIsPublishedOnce: asked at the first wait (not paid
// yet), again at the next scheduled time (paid): the answer is published
// once, no status is set by the querier, and it looks again only after
// SettledRecheck.
func TestNotPaidThenPaidIsPublishedOnce(t *testing.T) {
	r := newRig(t, generous, map[string][]channels.QueryOutcome{"P1": {channels.QueryPending, channels.QuerySettled}})
	assert.Equal(t, 0, r.at(t, 59*time.Second), "nothing is due before the first wait")
	assert.Equal(t, 1, r.at(t, time.Minute))
	assert.Equal(t, 0, r.at(t, 2*time.Minute))
	assert.Equal(t, 1, r.at(t, 3*time.Minute))
	recs := r.work.recordsOf("P1")
	require.Len(t, recs, 2)
	assert.Equal(t, metrics.QueryAnswerNotYet, recs[0].Answer)
	assert.Equal(t, created.Add(3*time.Minute), recs[0].Decision.Next)
	assert.Equal(t, metrics.QueryAnswerPaid, recs[1].Answer)
	assert.True(t, recs[1].Published)
	assert.Empty(t, recs[1].Decision.Status)
	assert.Equal(t, created.Add(13*time.Minute), recs[1].Decision.Next)
	assert.Equal(t, []string{"P1"}, r.pub.published)
	assert.InDelta(t, 1.0, r.answered("WECHAT", "paid"), 0)
	assert.InDelta(t, 1.0, r.answered("WECHAT", "not_yet"), 0)
}

// TestNothingFinalIsPublishedOrGuessed: closed, not found past its time,
// a forged answer, a transport error and an uncertain answer publish
// nothing; each is recorded with what the plan says.
func TestNothingFinalIsPublishedOrGuessed(t *testing.T) {
	r := newRig(t, generous, map[string][]channels.QueryOutcome{
		"CLOSED": {channels.QueryClosed}, "FORGED": {"forged"}, "DOWN": {"transport"},
		"ODD": {channels.QueryUncertain}, "GONE": {channels.QueryNotFound},
	})
	r.at(t, time.Minute)
	assert.Empty(t, r.pub.published)
	last := func(id string) querier.Record {
		recs := r.work.recordsOf(id)
		require.NotEmpty(t, recs)
		return recs[len(recs)-1]
	}
	assert.Equal(t, queryplan.Closed, last("CLOSED").Decision.Status)
	assert.True(t, last("CLOSED").Decision.Stop)
	assert.Equal(t, metrics.QueryAnswerUnauthenticated, last("FORGED").Answer)
	assert.Equal(t, queryplan.Abnormal, last("FORGED").Decision.Status)
	assert.Equal(t, metrics.QueryAnswerError, last("DOWN").Answer)
	assert.Equal(t, 1, last("DOWN").Retries)
	assert.Equal(t, created.Add(time.Minute+5*time.Second), last("DOWN").Decision.Next)
	assert.Equal(t, metrics.QueryAnswerAmbiguous, last("ODD").Answer)
	assert.False(t, last("GONE").Decision.Stop, "a young order the channel does not know yet is asked again")
	r.at(t, 2*time.Hour+5*time.Minute)
	assert.Equal(t, queryplan.Expired, last("GONE").Decision.Status)
	assert.Equal(t, 2, last("DOWN").Retries, "retries count up while the transport fails")
	assert.Empty(t, r.pub.published)
}

// TestAFailedPublishKeepsTheLease: an answer that proves a payment but
// cannot be published is not recorded: the registration stays leased until
// the lease ends, then is asked again, and published then.
func TestAFailedPublishKeepsTheLease(t *testing.T) {
	r := newRig(t, generous, map[string][]channels.QueryOutcome{"P1": {channels.QuerySettled}})
	r.pub.fail = errors.New("broker: not enough replicas")
	assert.Equal(t, 1, r.at(t, time.Minute))
	assert.Empty(t, r.work.recordsOf("P1"))
	assert.Equal(t, 0, r.at(t, time.Minute+30*time.Second), "still leased")
	r.pub.fail = nil
	assert.Equal(t, 1, r.at(t, 2*time.Minute))
	assert.Equal(t, []string{"P1"}, r.pub.published)
	assert.Equal(t, 2, r.ask.count("P1"))
}

// TestASettledAnswerProvingNothingStopsAsking: an answer that says money
// moved but proves no event (an Alipay partial refund's) is not published,
// and asking stops with an alert: asking again would learn nothing new.
func TestASettledAnswerProvingNothingStopsAsking(t *testing.T) {
	r := newRig(t, generous, map[string][]channels.QueryOutcome{"R1": {"settled-unprovable"}})
	assert.Equal(t, 1, r.at(t, time.Minute))
	recs := r.work.recordsOf("R1")
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Decision.Stop)
	assert.True(t, recs[0].Decision.Alert)
	assert.False(t, recs[0].Published)
	assert.Empty(t, r.pub.published)
	assert.Equal(t, 0, r.at(t, time.Hour), "not asked again")
}

// TestAHungPublishEndsTheRound: a publish the broker never answers is cut
// at PublishTimeout: the round returns, the answer is not recorded (kept
// leased, asked again after the lease), and nothing counts as published.
func TestAHungPublishEndsTheRound(t *testing.T) {
	r := newRig(t, generous, map[string][]channels.QueryOutcome{"P1": {channels.QuerySettled}})
	q, err := querier.New(querier.Config{
		Owner: "q1", Policy: queryplan.DefaultPolicy(), Lease: time.Minute, Batch: 10, Parallel: 1,
		Now: r.clock.Now, PublishTimeout: 50 * time.Millisecond,
	}, r.work, r.ask, bodyReader{}, r.pub, mustBudget(t), mustMetrics(t), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	r.pub.hang = true
	r.clock.Set(created.Add(time.Minute))
	n, err := q.Round(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Empty(t, r.work.recordsOf("P1"), "not recorded: still leased")
	assert.Empty(t, r.pub.published)
}

func mustBudget(t *testing.T) *querybudget.Store {
	t.Helper()
	store, err := querybudget.New(sqldbtest.MustMySQL(t), generous)
	require.NoError(t, err)
	return store
}

func mustMetrics(t *testing.T) *metrics.QueryMetrics {
	t.Helper()
	m, err := metrics.NewQueryMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return m
}

// TestBudgetHoldsQueriesBack: with a burst of 2 and a token a day, three
// registrations of one merchant due at once: two are asked, the third is
// recorded unasked with the time its token comes; a rate-limit answer
// backs the merchant off for every registration.
func TestBudgetHoldsQueriesBack(t *testing.T) {
	r := newRig(t, queryplan.Budget{PerSecond: 1.0 / 86400, Burst: 2, Backoff: time.Minute, MaxBackoff: time.Hour},
		map[string][]channels.QueryOutcome{"A": {channels.QueryPending}, "B": {channels.QueryPending}, "C": {channels.QueryPending}})
	assert.Equal(t, 3, r.at(t, time.Minute))
	asked := 0
	for _, id := range []string{"A", "B", "C"} {
		recs := r.work.recordsOf(id)
		require.Len(t, recs, 1)
		if recs[0].Asked {
			asked++
			continue
		}
		assert.WithinDuration(t, time.Now().Add(24*time.Hour), recs[0].Decision.Next, time.Minute)
	}
	assert.Equal(t, 2, asked)

	r2 := newRig(t, generous, map[string][]channels.QueryOutcome{"T": {channels.QueryThrottled}, "U": {channels.QueryPending}})
	r2.q = mustSerial(t, r2)
	r2.at(t, time.Minute)
	recsT, recsU := r2.work.recordsOf("T"), r2.work.recordsOf("U")
	require.Len(t, recsT, 1)
	require.Len(t, recsU, 1)
	assert.Equal(t, metrics.QueryAnswerRateLimited, recsT[0].Answer)
	assert.False(t, recsU[0].Asked, "the merchant is backed off for every registration once rate-limited")
}

// mustSerial rebuilds r's querier with one query at a time, so that the
// order of the round is the lease's.
func mustSerial(t *testing.T, r *rig) *querier.Querier {
	t.Helper()
	store, err := querybudget.New(sqldbtest.MustMySQL(t), generous)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	m, err := metrics.NewQueryMetrics(reg)
	require.NoError(t, err)
	r.reg = reg
	q, err := querier.New(querier.Config{Owner: "q1", Policy: queryplan.DefaultPolicy(), Lease: time.Minute, Batch: 100, Parallel: 1, Now: r.clock.Now},
		r.work, r.ask, bodyReader{}, r.pub, store, m, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return q
}

// TestManyRegistrationsEachAskedOnceARound: 200 registrations, 8 at once:
// each is asked exactly once in the round that finds them due, and not
// again until its next time.
func TestManyRegistrationsEachAskedOnceARound(t *testing.T) {
	answers := map[string][]channels.QueryOutcome{}
	for i := range 200 {
		answers[fmt.Sprintf("P%03d", i)] = []channels.QueryOutcome{channels.QueryPending}
	}
	r := newRig(t, generous, answers)
	assert.Equal(t, 100, r.at(t, time.Minute), "a round leases at most Batch")
	assert.Equal(t, 100, r.at(t, time.Minute))
	assert.Equal(t, 0, r.at(t, time.Minute))
	for order := range answers {
		assert.Equal(t, 1, r.ask.count(order), order)
	}
	assert.InDelta(t, 200.0, r.answered("WECHAT", "not_yet"), 0)
}

func TestNewRefusesAConfigurationItCannotFollow(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for name, cfg := range map[string]querier.Config{
		"no owner":  {Policy: queryplan.DefaultPolicy(), Lease: time.Minute, Batch: 1, Parallel: 1},
		"no lease":  {Owner: "q", Policy: queryplan.DefaultPolicy(), Batch: 1, Parallel: 1},
		"no policy": {Owner: "q", Lease: time.Minute, Batch: 1, Parallel: 1},
	} {
		_, err := querier.New(cfg, nil, nil, nil, nil, nil, nil, log)
		assert.Error(t, err, name)
	}
}
