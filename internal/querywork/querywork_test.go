package querywork_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/internal/querywork"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

var t0 = time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)

type env struct {
	db     *bun.DB
	svc    *settlement.Service
	claims *idempotent.Store
	now    time.Time
}

func newEnv(t *testing.T, db *bun.DB) *env {
	t.Helper()
	e := &env{db: db, now: t0}
	e.claims = idempotent.NewStore(db, idempotent.WithClock(func() time.Time { return e.now }))
	svc, err := settlement.New(db, e.claims, nil, nil)
	require.NoError(t, err)
	e.svc = svc
	return e
}

// register records a payment registration of tr at e.now (its
// registered_at is the worker's clock: e.now).
func (e *env) register(t *testing.T, tr channelstest.Trade) {
	t.Helper()
	_, err := e.svc.RegisterPayment(context.Background(), settlement.PaymentRequest{
		TenantID: tr.TenantID, Channel: tr.Channel, MerchantID: "1230000109", MerchantOrderNo: tr.MerchantOrderNo,
		Amount: tr.Total, Currency: "CNY", CreatedAt: e.now.Add(-time.Minute), ExpiresAt: e.now.Add(2 * time.Hour),
	})
	require.NoError(t, err)
}

// settle posts tr's payment through the claim, as the worker does.
func (e *env) settle(t *testing.T, tr channelstest.Trade) {
	t.Helper()
	ctx := context.Background()
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
	require.NoError(t, err)
	acq, err := e.claims.Acquire(ctx, idempotent.Claim{
		TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
		Fingerprint: res.Event.Fingerprint, Event: []byte("{}"), Source: idempotent.Source{Topic: "t", Offset: 1},
	})
	require.NoError(t, err)
	require.Equal(t, idempotent.Acquired, acq.Kind)
	_, err = e.svc.Settle(ctx, res.Event)
	require.NoError(t, err)
}

func (e *env) paymentStatus(t *testing.T, tr channelstest.Trade) settlement.RegistrationStatus {
	t.Helper()
	reg, err := e.svc.GetPaymentRegistration(context.Background(), tr.TenantID, tr.Channel, tr.MerchantOrderNo)
	require.NoError(t, err)
	return reg.Status
}

func (e *env) queryCount(t *testing.T, table string) int {
	t.Helper()
	var n []int
	require.NoError(t, e.db.NewSelect().Table(table).ColumnExpr("COALESCE(SUM(query_count), 0)").Scan(context.Background(), &n))
	return n[0]
}

func (e *env) logRows(t *testing.T) int {
	t.Helper()
	n, err := e.db.NewSelect().Table("ss_query_log").Count(context.Background())
	require.NoError(t, err)
	return int(n)
}

func policy() queryplan.Policy {
	p := queryplan.DefaultPolicy()
	p.FirstWait = time.Minute
	return p
}

// TestLeaseFollowsTheFirstWaitAndRecordMovesOn: a registration is due its
// first wait after it was recorded, leased to one querier until Record or
// the lease's end; a lease that ran out is leased again, and the querier
// that lost it changes nothing by recording; Record writes the log row,
// the next ask, the count and the status, and a stopped or closed
// registration is not leased again.
func TestLeaseFollowsTheFirstWaitAndRecordMovesOn(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		e := newEnv(t, db)
		tr := channelstest.NewTrade(channels.WeChat, 1)
		e.register(t, tr)
		store := querywork.New(db, policy(), e.svc)

		items, err := store.Lease(ctx, "a", t0.Add(59*time.Second), time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, items, "not due before its first wait")

		at := t0.Add(time.Minute)
		items, err = store.Lease(ctx, "a", at, time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, items, 1, "due at its first wait")
		stale := items[0]
		assert.Equal(t, channels.QueryTarget{
			TenantID: tr.TenantID, Channel: channels.WeChat, Kind: channels.QueryPayment,
			MerchantID: "1230000109", MerchantOrderNo: tr.MerchantOrderNo,
		}, stale.Target)
		assert.Equal(t, queryplan.Registration{Kind: channels.QueryPayment, CreatedAt: t0, ExpiresAt: t0.Add(2 * time.Hour)}, stale.Registration)

		items, err = store.Lease(ctx, "b", at.Add(59*time.Second), time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, items, "leased to a until its lease ends")

		at = at.Add(61 * time.Second)
		items, err = store.Lease(ctx, "b", at, time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, items, 1, "a lease that ran out is leased again")
		mine := items[0]

		asked := querier.Record{
			Asked: true, AskedAt: at, Answer: "not_yet", RawState: "NOTPAY", Detail: "not paid yet",
			Decision: queryplan.Decision{Next: at.Add(3 * time.Minute)},
		}
		require.ErrorIs(t, store.Record(ctx, "a", stale, asked), querywork.ErrLeaseLost)
		require.ErrorIs(t, store.Record(ctx, "b", stale, asked), querywork.ErrLeaseLost, "b's name with a's lease")
		assert.Zero(t, e.logRows(t), "the stale record wrote nothing")
		assert.Zero(t, e.queryCount(t, "ss_payment_registration"))

		require.NoError(t, store.Record(ctx, "b", mine, asked))
		require.ErrorIs(t, store.Record(ctx, "b", mine, asked), querywork.ErrLeaseLost, "recorded once: the lease is released")
		assert.Equal(t, 1, e.logRows(t))
		assert.Equal(t, 1, e.queryCount(t, "ss_payment_registration"))
		log, err := querywork.Log(ctx, db, tr.TenantID, tr.Channel, tr.MerchantOrderNo, "")
		require.NoError(t, err)
		require.Len(t, log, 1)
		assert.Equal(t, querywork.LogEntry{
			TenantID: tr.TenantID, Channel: "WECHAT", Kind: "PAYMENT", MerchantID: "1230000109", MerchantOrderNo: tr.MerchantOrderNo,
			AskedAt: at, Answer: "not_yet", RawState: "NOTPAY", Detail: "not paid yet", Querier: "b",
		}, log[0])

		items, err = store.Lease(ctx, "a", at.Add(3*time.Minute-time.Second), time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, items, "not due before its next ask")
		at = at.Add(3 * time.Minute)
		items, err = store.Lease(ctx, "a", at, time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, items, 1, "due at its next ask")

		// A transient failure counts a retry; then the budget says wait: no
		// query, no log row, the retries kept.
		require.NoError(t, store.Record(ctx, "a", items[0], querier.Record{
			Asked: true, AskedAt: at, Answer: "error", Retries: 1, Decision: queryplan.Decision{Next: at},
		}))
		items, err = store.Lease(ctx, "a", at, time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, items, 1)
		assert.Equal(t, 1, items[0].Registration.Retries)
		require.NoError(t, store.Record(ctx, "a", items[0], querier.Record{Retries: 1, Decision: queryplan.Decision{Next: at}}))
		assert.Equal(t, 2, e.logRows(t), "no log row for a query not sent")
		assert.Equal(t, 2, e.queryCount(t, "ss_payment_registration"))

		items, err = store.Lease(ctx, "a", at, time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.NoError(t, store.Record(ctx, "a", items[0], querier.Record{
			Asked: true, AskedAt: at, Answer: "closed", RawState: "CLOSED",
			Decision: queryplan.Decision{Stop: true, Status: queryplan.Closed},
		}))
		assert.Equal(t, settlement.RegistrationClosed, e.paymentStatus(t, tr))
		items, err = store.Lease(ctx, "a", at.Add(24*time.Hour), time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, items, "a closed registration is not asked about")

		// A stop with no status leaves the registration open and asks no
		// more.
		other := channelstest.NewTrade(channels.WeChat, 2)
		e.register(t, other)
		items, err = store.Lease(ctx, "a", at.Add(time.Hour), time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.NoError(t, store.Record(ctx, "a", items[0], querier.Record{
			Asked: true, AskedAt: at, Answer: "not_yet", Decision: queryplan.Decision{Stop: true, Alert: true},
		}))
		assert.Equal(t, settlement.RegistrationRegistered, e.paymentStatus(t, other))
		items, err = store.Lease(ctx, "a", at.Add(48*time.Hour), time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, items, "a stopped registration is not asked about")
	})
}

// TestASettledRegistrationIsNeverLeased: a registration whose payment
// settled is SUCCEEDED and not leased; one left open by a registration and
// a settlement committed at once (forced here) is settled by the backstop
// the store runs before it leases, and not leased either.
func TestASettledRegistrationIsNeverLeased(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		e := newEnv(t, db)
		store := querywork.New(db, policy(), e.svc)
		paid := channelstest.NewTrade(channels.Alipay, 1)
		e.register(t, paid)
		e.settle(t, paid)
		require.Equal(t, settlement.RegistrationSucceeded, e.paymentStatus(t, paid))
		items, err := store.Lease(ctx, "a", t0.Add(time.Hour), time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, items)

		_, err = db.NewUpdate().Table("ss_payment_registration").Set("status = ?", "REGISTERED").
			Where("merchant_order_no = ?", paid.MerchantOrderNo).Exec(ctx)
		require.NoError(t, err)
		items, err = store.Lease(ctx, "a", t0.Add(time.Hour), time.Minute, 10)
		require.NoError(t, err)
		assert.Empty(t, items, "the backstop settled it first")
		assert.Equal(t, settlement.RegistrationSucceeded, e.paymentStatus(t, paid))
	})
}

// TestRefundsAreLeasedForTheirTradesMerchant: a refund registration is
// asked about for the merchant its trade's payment was bound for; one
// whose trade has no bound merchant is not leased (it could not be asked).
// A refund closed by the channel is CLOSED.
func TestRefundsAreLeasedForTheirTradesMerchant(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		e := newEnv(t, db)
		store := querywork.New(db, policy(), e.svc)
		bound, unbound := channelstest.NewTrade(channels.WeChat, 1), channelstest.NewTrade(channels.WeChat, 2)
		for _, tr := range []channelstest.Trade{bound, unbound} {
			e.settle(t, tr)
			_, err := e.svc.RegisterRefund(ctx, settlement.RefundRequest{
				TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: "R-" + tr.TradeNo, Amount: 1,
			})
			require.NoError(t, err)
		}
		_, err := db.NewUpdate().Table("ss_channel_order").Set("bound_merchant_id = ?", "1230000109").
			Where("channel_trade_no = ?", bound.TradeNo).Exec(ctx)
		require.NoError(t, err)

		at := time.Now().UTC().Add(2 * time.Minute) // refunds are recorded on the service's clock
		items, err := store.Lease(ctx, "a", at, time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, items, 1)
		assert.Equal(t, channels.QueryTarget{
			TenantID: bound.TenantID, Channel: channels.WeChat, Kind: channels.QueryRefund, MerchantID: "1230000109",
			MerchantOrderNo: bound.MerchantOrderNo, TradeNo: bound.TradeNo, RefundNo: "R-" + bound.TradeNo,
		}, items[0].Target)
		assert.True(t, items[0].Registration.ExpiresAt.IsZero())
		require.NoError(t, store.Record(ctx, "a", items[0], querier.Record{
			Asked: true, AskedAt: at, Answer: "closed", Decision: queryplan.Decision{Stop: true, Status: queryplan.Closed},
		}))
		var status []string
		require.NoError(t, db.NewSelect().Table("ss_refund_request").Column("status").
			Where("channel_trade_no = ?", bound.TradeNo).Scan(ctx, &status))
		assert.Equal(t, []string{"CLOSED"}, status)
		assert.Equal(t, 1, e.queryCount(t, "ss_refund_request"))
	})
}

// TestTwoStoresNeverLeaseOneRegistrationTwice: two stores (two queriers'
// pools) leasing from many goroutines at once hand each registration to
// one of them only, and every registration to one.
func TestTwoStoresNeverLeaseOneRegistrationTwice(t *testing.T) {
	ctx := context.Background()
	db := sqldbtest.MustMySQL(t)
	e := newEnv(t, db)
	const n = 120
	for i := range n {
		e.register(t, channelstest.NewTrade([]channels.Channel{channels.WeChat, channels.Alipay, channels.SQB}[i%3], i+1))
	}
	stores := []*querywork.Store{querywork.New(db, policy(), e.svc), querywork.New(db, policy(), e.svc)}
	at := t0.Add(time.Hour)

	var (
		mu     sync.Mutex
		leased = map[string]string{} // merchant order no → owner
		twice  []string
		wg     sync.WaitGroup
	)
	for g := range 12 {
		owner := fmt.Sprintf("q%d", g)
		store := stores[g%2]
		wg.Go(func() {
			for empty := 0; empty < 3; {
				items, err := store.Lease(ctx, owner, at, time.Hour, 7)
				if err != nil {
					continue // a lock wait lost to another lease: the next round tries again
				}
				if len(items) == 0 {
					empty++
					continue
				}
				mu.Lock()
				for _, it := range items {
					if prev, ok := leased[it.Target.MerchantOrderNo]; ok {
						twice = append(twice, it.Target.MerchantOrderNo+" to "+prev+" and "+owner)
					}
					leased[it.Target.MerchantOrderNo] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Empty(t, twice, "leased twice within the lease")
	assert.Len(t, leased, n, "every registration leased")
	owners := map[string]bool{}
	for _, o := range leased {
		owners[o] = true
	}
	assert.Greater(t, len(owners), 1, "the leases were contended")
}

// TestPaymentsDoNotStarveRefunds: with more payments due than a lease
// takes, every lease still hands out the refunds due, and a lease of one
// alternates between the kinds; what one kind leaves, the other takes.
func TestPaymentsDoNotStarveRefunds(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		e := newEnv(t, db)
		store := querywork.New(db, policy(), e.svc)
		for i := range 3 {
			tr := channelstest.NewTrade(channels.WeChat, 100+i)
			e.settle(t, tr)
			_, err := e.svc.RegisterRefund(ctx, settlement.RefundRequest{
				TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: "R-" + tr.TradeNo, Amount: 1,
			})
			require.NoError(t, err)
			_, err = db.NewUpdate().Table("ss_channel_order").Set("bound_merchant_id = ?", "1230000109").
				Where("channel_trade_no = ?", tr.TradeNo).Exec(ctx)
			require.NoError(t, err)
		}
		for i := range 20 {
			e.register(t, channelstest.NewTrade(channels.WeChat, 200+i))
		}
		at := time.Now().UTC().Add(2 * time.Minute) // refunds are recorded on the service's clock
		kinds := func(items []querier.Item) map[channels.QueryKind]int {
			n := map[channels.QueryKind]int{}
			for _, it := range items {
				n[it.Target.Kind]++
			}
			return n
		}
		// A lease of one goes to each kind by turns.
		one, err := store.Lease(ctx, "a", at, time.Minute, 1)
		require.NoError(t, err)
		two, err := store.Lease(ctx, "a", at, time.Minute, 1)
		require.NoError(t, err)
		require.Len(t, one, 1)
		require.Len(t, two, 1)
		assert.NotEqual(t, one[0].Target.Kind, two[0].Target.Kind, "one lease of one each")
		// Four: two refunds (of the two left) and two payments.
		four, err := store.Lease(ctx, "a", at, time.Minute, 4)
		require.NoError(t, err)
		assert.Equal(t, map[channels.QueryKind]int{channels.QueryPayment: 2, channels.QueryRefund: 2}, kinds(four))
		// Ten: no refund left, so payments take the whole lease.
		ten, err := store.Lease(ctx, "a", at, time.Minute, 10)
		require.NoError(t, err)
		assert.Equal(t, map[channels.QueryKind]int{channels.QueryPayment: 10}, kinds(ten))
	})
}
