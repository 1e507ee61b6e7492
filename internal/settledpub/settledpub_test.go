package settledpub_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/internal/settledpub/settledpubtest"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/settled"
)

const tenant = 1001

// world is one test's outbox (a MariaDB database of its own) and
// settled-event topic (kfake, or a real cluster's uniquely named topic).
type world struct {
	db    *bun.DB
	k     *kafkaopstest.Kafka
	topic string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	k := kafkaopstest.Start(t, map[string]int32{"settled": 3})
	return &world{db: sqldbtest.MustMySQL(t), k: k, topic: k.Name("settled")}
}

func (w *world) writer(t *testing.T) settledpub.Writer {
	t.Helper()
	kw := settledpub.NewKafkaWriter(w.k.Brokers, w.topic, nil, nil, 0)
	t.Cleanup(func() { _ = kw.Close() })
	return kw
}

// insert writes the outbox row of trade tr's event seq (a payment for 1, a
// refund of 10 fen after), settled at at, and returns its ref.
func (w *world) insert(t *testing.T, tr string, seq int64, at time.Time) settledpub.Ref {
	t.Helper()
	key := "WECHAT:" + tr + ":PAYMENT_RECEIVED"
	e := settled.Event{
		EventType: settled.PaymentReceived, TenantID: tenant, Channel: "WECHAT", ChannelTradeNo: tr,
		MerchantOrderNo: "M" + tr, Amount: 1000, Currency: "CNY", OrderStatus: settled.OrderPaid, OrderAmount: 1000,
		TradeSeq: seq, OccurredAt: at.Add(-time.Second).Truncate(time.Second), SettledAt: at, Source: settled.SourceCallback,
	}
	if seq > 1 {
		e.EventType, e.RefundNo = settled.RefundSucceeded, fmt.Sprintf("R%d", seq)
		key = "WECHAT:" + tr + ":REFUND_SUCCEEDED:" + e.RefundNo
		e.Amount, e.RefundedAmount, e.OrderStatus = 10, 10*(seq-1), settled.OrderPartiallyRefunded
	}
	e.EventID = settled.EventID(tenant, key)
	value, err := settled.Encode(e)
	require.NoError(t, err)
	_, err = w.db.ExecContext(context.Background(), "INSERT INTO ss_settled_outbox (tenant_id, idempotent_key, channel_code, "+
		"channel_trade_no, trade_seq, event_type, source, value, settled_at) VALUES (?, ?, 'WECHAT', ?, ?, ?, 'callback', ?, ?)",
		tenant, key, tr, seq, e.EventType, value, at)
	require.NoError(t, err)
	return settledpub.Ref{TenantID: tenant, Channel: "WECHAT", TradeNo: tr, Key: key}
}

func (w *world) pending(t *testing.T) int64 {
	t.Helper()
	n, _, err := settledpub.Pending(context.Background(), w.db)
	require.NoError(t, err)
	return n
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// recordingWriter records the keys of each write.
type recordingWriter struct {
	settledpub.Writer
	writes [][]string
}

func (r *recordingWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = string(m.Key)
	}
	r.writes = append(r.writes, keys)
	return r.Writer.WriteMessages(ctx, msgs...)
}

// TestPublisherPublishesASettlementsRows: the rows the refs name, published
// at once with the contract's key, headers and the stored bytes, each
// trade's in trade_seq order and never two of one trade in one write, then
// marked published.
func TestPublisherPublishesASettlementsRows(t *testing.T) {
	w := newWorld(t)
	var refs []settledpub.Ref
	for i := range 20 {
		for seq := int64(1); seq <= 3; seq++ {
			refs = append(refs, w.insert(t, fmt.Sprintf("T%03d", i), seq, now()))
		}
	}
	rec := &recordingWriter{Writer: w.writer(t)}
	p := settledpub.NewPublisher(w.db, rec, nil, 0)
	n, err := p.Publish(context.Background(), refs)
	require.NoError(t, err)
	assert.Equal(t, 60, n)
	require.Len(t, rec.writes, 3, "one write per event of a trade")
	for _, keys := range rec.writes {
		seen := map[string]bool{}
		for _, k := range keys {
			assert.False(t, seen[k], "two events of %s in one write: a crash before its marking would repeat both, out of order", k)
			seen[k] = true
		}
	}
	assert.Zero(t, w.pending(t))
	pubs := settledpubtest.Read(t, w.db, w.k.Brokers, w.topic)
	require.Len(t, pubs, 60)
	settledpubtest.RequireOrdered(t, pubs)

	// Again: nothing left to publish.
	n, err = p.Publish(context.Background(), refs)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestPublisherKeepsTradeOrder: an event whose trade has an earlier event
// unpublished (not the publisher's) is left for the sweeper, which then
// publishes both in trade_seq order; a row older than the hot age is left to
// the sweeper too.
func TestPublisherKeepsTradeOrder(t *testing.T) {
	w := newWorld(t)
	kw := w.writer(t)
	w.insert(t, "A", 1, now()) // a crash left it unpublished
	later := w.insert(t, "A", 2, now())
	old := w.insert(t, "B", 1, now().Add(-settledpub.DefaultHotAge-time.Second))
	fresh := w.insert(t, "C", 1, now())
	p := settledpub.NewPublisher(w.db, kw, nil, 0)
	n, err := p.Publish(context.Background(), []settledpub.Ref{later, old, fresh})
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only C: A's 2 waits for A's 1, B is the sweeper's")
	assert.Equal(t, int64(3), w.pending(t))

	s := &settledpub.Sweeper{DB: w.db, Writer: kw, Grace: time.Nanosecond}
	claimed, published, err := s.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []int{3, 3}, []int{claimed, published})
	assert.Zero(t, w.pending(t))
	pubs := settledpubtest.Read(t, w.db, w.k.Brokers, w.topic)
	require.Len(t, pubs, 4)
	settledpubtest.RequireOrdered(t, pubs)
}

// TestBrokerRefusingTheTopic: while the broker refuses the settled-event
// topic, the publisher and the sweeper publish nothing and every row stays
// pending (the sweeper's leases released); once it accepts again, one
// sweep publishes them all, each trade in trade_seq order.
func TestBrokerRefusingTheTopic(t *testing.T) {
	w := newWorld(t)
	if w.k.Fake == nil {
		t.Fatal("this test refuses produce requests through kfake's control hook")
	}
	var refuse atomic.Bool
	refuse.Store(true)
	settledpubtest.Refuse(w.k.Fake, w.topic, &refuse)
	kw := w.writer(t)
	var refs []settledpub.Ref
	for i := range 5 {
		for seq := int64(1); seq <= 4; seq++ {
			refs = append(refs, w.insert(t, fmt.Sprintf("R%d", i), seq, now()))
		}
	}
	p := settledpub.NewPublisher(w.db, kw, nil, 0)
	n, err := p.Publish(context.Background(), refs)
	require.Error(t, err)
	assert.Zero(t, n)
	assert.Equal(t, int64(20), w.pending(t))

	s := &settledpub.Sweeper{DB: w.db, Writer: kw, Grace: time.Nanosecond}
	claimed, published, err := s.Sweep(context.Background())
	require.Error(t, err)
	assert.Equal(t, []int{20, 0}, []int{claimed, published})
	var leased int
	require.NoError(t, w.db.NewSelect().Table("ss_settled_outbox").ColumnExpr("COUNT(*)").
		Where("lease_owner IS NOT NULL").Scan(context.Background(), &leased))
	assert.Zero(t, leased, "a refused round frees its rows at once")
	assert.Empty(t, settledpubtest.Read(t, w.db, w.k.Brokers, w.topic))

	refuse.Store(false)
	claimed, published, err = s.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []int{20, 20}, []int{claimed, published})
	assert.Zero(t, w.pending(t))
	pubs := settledpubtest.Read(t, w.db, w.k.Brokers, w.topic)
	require.Len(t, pubs, 20)
	settledpubtest.RequireOrdered(t, pubs)
}

// TestConcurrentSweepers: many sweepers sweeping one outbox at once, in
// small rounds, publish every row exactly once (the lease: no row twice,
// no storm) and every trade in trade_seq order, though they contend for
// the same rows and trades.
func TestConcurrentSweepers(t *testing.T) {
	w := newWorld(t)
	kw := w.writer(t)
	const trades, seqs = 40, 5
	at := now().Add(-time.Minute)
	for seq := int64(1); seq <= seqs; seq++ {
		for i := range trades {
			w.insert(t, fmt.Sprintf("C%02d", i), seq, at.Add(time.Duration(seq)*time.Millisecond))
		}
	}
	var published atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		s := &settledpub.Sweeper{DB: w.db, Writer: kw, Grace: time.Nanosecond, Batch: 7}
		wg.Go(func() {
			for ctx.Err() == nil {
				_, n, err := s.Sweep(ctx)
				published.Add(int64(n))
				if err != nil {
					continue // a claim lost to another sweeper: the next round
				}
				if left, _, err := settledpub.Pending(ctx, w.db); err == nil && left == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "the sweepers did not drain the outbox")
	assert.Equal(t, int64(trades*seqs), published.Load())
	pubs := settledpubtest.Read(t, w.db, w.k.Brokers, w.topic)
	require.Len(t, pubs, trades*seqs, "each row once")
	settledpubtest.RequireOrdered(t, pubs)
}

// TestRepublish: the published events settled in the range, of the tenant
// and channel asked, are sent again with their stored bytes, each trade in
// trade_seq order, across pages; unpublished ones and others are not.
func TestRepublish(t *testing.T) {
	w := newWorld(t)
	kw := w.writer(t)
	base := now().Add(-time.Hour)
	for i := range 260 { // more than a page of 500 rows
		for seq := int64(1); seq <= 2; seq++ {
			w.insert(t, fmt.Sprintf("P%03d", i), seq, base.Add(time.Duration(i)*time.Millisecond))
		}
	}
	w.insert(t, "LATE", 1, base.Add(30*time.Minute)) // outside the range
	w.insert(t, "UNPUB", 1, base.Add(time.Second))   // inside, never published
	// Published long ago (the topic has since lost them), but UNPUB.
	_, err := w.db.ExecContext(context.Background(), "UPDATE ss_settled_outbox SET published = 1, published_at = settled_at WHERE channel_trade_no <> 'UNPUB'")
	require.NoError(t, err)

	sent, err := settledpub.Republish(context.Background(), w.db, kw, settledpub.RepublishRange{
		From: base, To: base.Add(10 * time.Minute), Tenant: tenant, Channel: "WECHAT",
	})
	require.NoError(t, err)
	assert.Equal(t, 520, sent)
	republished := settledpubtest.Read(t, w.db, w.k.Brokers, w.topic)
	require.Len(t, republished, 520)
	settledpubtest.RequireOrdered(t, republished)
	ids := map[string]bool{}
	for _, pub := range republished {
		ids[pub.Event.EventID] = true
	}
	assert.Len(t, ids, 520)
	assert.False(t, ids[settled.EventID(tenant, "WECHAT:UNPUB:PAYMENT_RECEIVED")])
	assert.False(t, ids[settled.EventID(tenant, "WECHAT:LATE:PAYMENT_RECEIVED")])
	assert.Equal(t, int64(1), w.pending(t), "the unpublished one stays the workers'")

	sent, err = settledpub.Republish(context.Background(), w.db, kw, settledpub.RepublishRange{
		From: base, To: base.Add(10 * time.Minute), Tenant: tenant + 1,
	})
	require.NoError(t, err)
	assert.Zero(t, sent, "another tenant has none")
}

// TestAPublishAllocatesForItsEventsOnly: publishing a few events to a topic
// of three partitions allocates kilobytes per event, not a batch sized for
// a million messages per partition (kafka-go allocates each batch at the
// writer's BatchSize), which cost a worker gigabytes of RSS.
func TestAPublishAllocatesForItsEventsOnly(t *testing.T) {
	w := newWorld(t)
	kw := w.writer(t)
	p := settledpub.NewPublisher(w.db, kw, nil, 0)
	publish := func(first int) {
		var refs []settledpub.Ref
		for i := range 6 {
			refs = append(refs, w.insert(t, fmt.Sprintf("A%d", first+i), 1, now()))
		}
		n, err := p.Publish(context.Background(), refs)
		require.NoError(t, err)
		require.Equal(t, 6, n)
	}
	publish(0) // the connections and the topic's metadata
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	publish(100)
	runtime.ReadMemStats(&after)
	// Everything this process allocated meanwhile counts (kfake runs in
	// it when no real cluster is named); a batch of 1<<20 messages alone
	// is some 160 MB.
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "bytes allocated by one publish of six events")
	assert.Len(t, settledpubtest.Read(t, w.db, w.k.Brokers, w.topic), 12)
}

// outboxReads counts the SELECTs that read the outbox.
type outboxReads struct{ n atomic.Int64 }

func (c *outboxReads) BeforeQuery(ctx context.Context, q *bun.QueryEvent) context.Context {
	if strings.HasPrefix(q.Query, "SELECT") && strings.Contains(q.Query, "ss_settled_outbox") {
		c.n.Add(1)
	}
	return ctx
}

func (*outboxReads) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestPublisherTriesAgainWhatAnotherWorkersEventHeld: a trade's refund
// settled by one worker while its payment, settled by another (a channel
// retry on another partition), is not yet on the topic waits for it; once
// the other worker publishes the payment, the first publishes the refund
// itself within moments, not the sweeper after its grace (none runs
// here), in trade_seq order.
func TestPublisherTriesAgainWhatAnotherWorkersEventHeld(t *testing.T) {
	w := newWorld(t)
	kw := w.writer(t)
	pay := w.insert(t, "H1", 1, now())
	refund := w.insert(t, "H1", 2, now())

	reads := &outboxReads{}
	second := settledpub.NewPublisher(w.db.WithQueryHook(reads), kw, nil, 0)
	n, err := second.Publish(context.Background(), []settledpub.Ref{refund})
	require.NoError(t, err)
	assert.Zero(t, n, "the refund waits for its trade's payment")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	before := reads.n.Load()
	second.Notify([]settledpub.Ref{refund})
	require.Eventually(t, func() bool { return reads.n.Load() > before }, 10*time.Second, time.Millisecond,
		"the running publisher looked at the refund, blocked")
	assert.Equal(t, int64(2), w.pending(t))

	first := settledpub.NewPublisher(w.db, kw, nil, 0)
	n, err = first.Publish(context.Background(), []settledpub.Ref{pay})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// Well within the hot age (a third of the sweeper's grace), after
	// which the refund would be left to a sweeper.
	require.Eventually(t, func() bool { return w.pending(t) == 0 }, settledpub.DefaultHotAge/2, 5*time.Millisecond,
		"the refund's own publisher publishes it once its payment is out")
	pubs := settledpubtest.Read(t, w.db, w.k.Brokers, w.topic)
	require.Len(t, pubs, 2)
	settledpubtest.RequireOrdered(t, pubs)
}
