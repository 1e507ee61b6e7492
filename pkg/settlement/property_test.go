package settlement_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// The property test's knobs, read from the environment so CI and a
// developer chasing a failure run the same code:
//
//	PAYCB_PROPERTY_SEED   the run's seed (default: the clock); printed always
//	PAYCB_PROPERTY_CASES  cases in total, nine tenths on MariaDB, one on SQLite
//	                      (default 1000; 150 with -short)
//	PAYCB_PROPERTY_CASE   run only this case number (replaying a failure)
const (
	envSeed  = "PAYCB_PROPERTY_SEED"
	envCases = "PAYCB_PROPERTY_CASES"
	envCase  = "PAYCB_PROPERTY_CASE"
)

func envInt(tb testing.TB, name string, def int64) int64 {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(tb, err, "%s", name)
	return n
}

// propCase is one random trade and the messages that deliver it.
type propCase struct {
	index  int
	trade  channelstest.Trade
	events []propEvent // in the channel's own order: payment, refunds, over-refund
	// expected order row and ledger totals, worked out by hand.
	refunded     int64
	lastRefundAt *time.Time
}

// propEvent is one notification and the redeliveries of it.
type propEvent struct {
	name       string
	copies     [][]byte // 1–5 deliveries; same event, different bytes
	overRefund bool
	refund     bool
}

var propChannels = channels.Codes()

// newPropCase draws case i of the run seeded seed.
func newPropCase(seed int64, i int) propCase {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	ch := propChannels[i%len(propChannels)]
	tr := channelstest.NewTrade(ch, i)
	tr.TenantID = 0 // set per delivery run
	tr.Total = 1 + rng.Int64N(200_000)
	c := propCase{index: i, trade: tr}

	copies := func(build func(d channelstest.Delivery) []byte) [][]byte {
		n := 1 + rng.IntN(5)
		out := make([][]byte, n)
		for a := range out {
			out[a] = build(channelstest.Delivery{Attempt: a})
		}
		return out
	}
	pay := propEvent{name: "payment", copies: copies(func(d channelstest.Delivery) []byte { return channelstest.PaymentEnvelope(tr, d) })}
	if ch == channels.Alipay && rng.IntN(3) == 0 {
		// TRADE_FINISHED is the same payment, claimed under the same key.
		pay.copies = append(pay.copies, channelstest.AlipayFinished(tr, channelstest.Delivery{Attempt: 9}))
	}
	c.events = append(c.events, pay)

	// Partial refunds at distinct cumulative cut points below the total,
	// sometimes a final full refund.
	k := rng.IntN(5)
	if int64(k) > tr.Total-1 {
		k = int(tr.Total - 1)
	}
	cuts := map[int64]bool{}
	for len(cuts) < k {
		cuts[1+rng.Int64N(tr.Total-1)] = true
	}
	cum := make([]int64, 0, k+1)
	for v := range cuts {
		cum = append(cum, v)
	}
	slices.Sort(cum)
	full := rng.IntN(3) == 0
	if full {
		cum = append(cum, tr.Total)
	}
	sqbCancel := ch == channels.SQB && full && k == 0 && rng.IntN(2) == 0
	var prev int64
	for j, cu := range cum {
		no := fmt.Sprintf("RF-%d", j/2)
		if j%2 == 1 {
			no = fmt.Sprintf("rf-%d", j/2) // refund numbers are case-sensitive
		}
		r := channelstest.Refund{No: no, Amount: cu - prev, Cumulative: cu, At: tr.PaidAt.Add(time.Duration(j+1) * time.Hour)}
		prev = cu
		form := channelstest.SQBForm(rng.IntN(4))
		ev := propEvent{name: "refund " + no, refund: true}
		if sqbCancel {
			ev.name = "cancel"
			r.At = tr.PaidAt.Add(30 * time.Minute)
			ev.copies = copies(func(d channelstest.Delivery) []byte { return channelstest.SQBCancel(tr, d) })
		} else {
			ev.copies = copies(func(d channelstest.Delivery) []byte {
				d.SQB = form
				return channelstest.RefundEnvelope(tr, r, d)
			})
		}
		c.events = append(c.events, ev)
		at := r.At.UTC()
		c.lastRefundAt = &at
	}
	c.refunded = prev
	if ch == channels.Alipay && rng.IntN(8) == 0 {
		// Impossible from a real channel: a cumulative above the total.
		r := channelstest.Refund{No: "OVER", Cumulative: tr.Total + 1 + rng.Int64N(100), At: tr.PaidAt.Add(9 * time.Hour)}
		c.events = append(c.events, propEvent{
			name: "over-refund", refund: true, overRefund: true,
			copies: copies(func(d channelstest.Delivery) []byte { return channelstest.RefundEnvelope(tr, r, d) }),
		})
	}
	return c
}

// forTenant rewrites every message of c for tenant (the envelope's
// tenant_id), so one case runs under two tenants of one database.
func (c propCase) forTenant(tenant int64) propCase {
	out := c
	out.trade.TenantID = tenant
	out.events = make([]propEvent, len(c.events))
	for i, e := range c.events {
		e2 := e
		e2.copies = make([][]byte, len(e.copies))
		for j, b := range e.copies {
			e2.copies[j] = retenant(b, tenant)
		}
		out.events[i] = e2
	}
	return out
}

// retenant replaces the envelope's tenant_id; channelstest writes the
// default tenant 1001 first in the JSON.
func retenant(value []byte, tenant int64) []byte {
	const prefix = `{"tenant_id":1001,`
	if string(value[:len(prefix)]) != prefix {
		panic("unexpected envelope prefix: " + string(value[:40]))
	}
	return append([]byte(`{"tenant_id":`+strconv.FormatInt(tenant, 10)+`,`), value[len(prefix):]...)
}

func TestPropertyArrivalOrder(t *testing.T) {
	seed := envInt(t, envSeed, time.Now().UnixNano())
	def := int64(1000)
	if testing.Short() {
		def = 150
	}
	total := int(envInt(t, envCases, def))
	only := int(envInt(t, envCase, -1))
	t.Logf("property seed %d, %d cases (replay: %s=%d; one case: %s=N)", seed, total, envSeed, seed, envCase)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: rerun with %s=%d %s=%d", seed, envSeed, seed, envCases, total)
		}
	})

	// SQLite has one writer and an fsync per commit: it gets a tenth of the
	// cases, run one after another; MariaDB runs the rest from a pool of
	// goroutines, several trades at once, as partitions would.
	split := total - total/10
	ranges := map[string][2]int{"mysql": {0, split}, "sqlite": {split, total}}
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		dial, workers := "mysql", propWorkers
		if db.Dialect().Name() == dialect.SQLite {
			dial, workers = "sqlite", 1
		}
		lo, hi := ranges[dial][0], ranges[dial][1]
		h := newHarness(t, db)
		t.Run("cases", func(t *testing.T) {
			next := make(chan int)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for i := range next {
						c := newPropCase(seed, i)
						t.Run(fmt.Sprintf("%04d-%s", i, c.trade.Channel), func(t *testing.T) {
							t.Cleanup(func() {
								if t.Failed() {
									t.Logf("replay: %s=%d %s=%d", envSeed, seed, envCase, i)
								}
							})
							runPropCase(t, h, c, seed)
						})
					}
				})
			}
			for i := lo; i < hi; i++ {
				if only < 0 || i == only {
					next <- i
				}
			}
			close(next)
			wg.Wait()
		})
		rep := mustCheck(t, db)
		t.Logf("%s: %d ledger rows, %d orders, %d tenants; %d transient errors retried so far",
			dial, rep.Entries, rep.Orders, len(rep.Tenants), retried.Load())
	})
}

// propWorkers is how many cases run at once on MariaDB.
const propWorkers = 16

func runPropCase(t *testing.T, h *harness, c propCase, seed int64) { //nolint:thelper // one case's test body; failures should point into it
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(c.index)^0x5eed))
	shuffled := c.forTenant(int64(100_000 + 2*c.index))
	reference := c.forTenant(int64(100_001 + 2*c.index))

	// In the channel's order, each event once.
	for i, e := range reference.events {
		h.deliver(t, e.copies[0], int64(i))
	}

	// Every copy of every event, in a random order; now and then the
	// sweeper settles a claim again from the stored event.
	type msg struct {
		ev   propEvent
		body []byte
	}
	var msgs []msg
	for _, e := range shuffled.events {
		for _, b := range e.copies {
			msgs = append(msgs, msg{e, b})
		}
	}
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	// Odd cases go through the batch pipeline, 1–6 messages at a time.
	var dels []delivery
	for i := 0; i < len(msgs); {
		n := 1
		if c.index%2 == 1 {
			n = min(1+rng.IntN(6), len(msgs)-i)
		}
		bodies := make([][]byte, n)
		for j := range bodies {
			bodies[j] = msgs[i+j].body
		}
		if n == 1 && c.index%2 == 0 {
			dels = append(dels, h.deliver(t, bodies[0], int64(i)))
		} else {
			dels = append(dels, h.deliverBatch(t, bodies, int64(i))...)
		}
		i += n
	}
	for i, m := range msgs {
		d := dels[i]
		if d.kind == idempotent.Acquired {
			want := idempotent.OutcomePosted
			if m.ev.overRefund {
				want = idempotent.OutcomeOverRefund
			}
			if !m.ev.refund || !c.trade.Channel.Cumulative() || m.ev.overRefund {
				assert.Equal(t, want, d.result.Outcome, "%s", m.ev.name)
			} else {
				assert.Contains(t, []idempotent.Outcome{idempotent.OutcomePosted, idempotent.OutcomeNoMoney}, d.result.Outcome, "%s", m.ev.name)
			}
		}
		if rng.IntN(6) == 0 {
			res, err := h.svc.SettleStored(ctx, mustClaim(t, h, d.ev))
			require.NoError(t, err)
			assert.True(t, res.FenceLost, "a settled claim settles once")
		}
	}

	// The order rows and balances equal in-order delivery's and the
	// expected ones.
	tr := c.trade
	want := settlement.Order{
		Channel: tr.Channel, TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo,
		Amount: tr.Total, PaidAmount: tr.Total, RefundedAmount: c.refunded, Currency: "CNY",
		Status: settlement.DeriveStatus(tr.Total, tr.Total, c.refunded),
	}
	if tr.Channel.Cumulative() {
		want.MaxCumulativeRefund = c.refunded
	}
	paidAt := tr.PaidAt.UTC()
	want.PaidAt, want.LastRefundAt = &paidAt, c.lastRefundAt
	got := comparableOrders(t, h.db, shuffled.trade.TenantID)
	ref := comparableOrders(t, h.db, reference.trade.TenantID)
	require.Len(t, got, 1)
	assert.Equal(t, ref, got, "order row differs from in-order delivery")
	assert.Equal(t, []settlement.Order{want}, got, "order row differs from the expected one")

	wantBal := []settlement.Balance{
		{Channel: tr.Channel, TradeNo: tr.TradeNo, Account: settlement.ReceivableAccount(tr.Channel), Debit: tr.Total, Credit: c.refunded},
		{Channel: tr.Channel, TradeNo: tr.TradeNo, Account: settlement.AccountMerchantPayable, Debit: c.refunded, Credit: tr.Total},
	}
	slices.SortFunc(wantBal, func(a, b settlement.Balance) int { return compareStrings(a.Account, b.Account) })
	gotBal := comparableBalances(t, h.db, shuffled.trade.TenantID)
	assert.Equal(t, comparableBalances(t, h.db, reference.trade.TenantID), gotBal, "balances differ from in-order delivery")
	assert.Equal(t, wantBal, gotBal, "balances differ from the expected ones")

	// Every claim of the case is settled.
	n, err := h.db.NewSelect().Table("ss_channel_idempotent").
		Where("tenant_id IN (?)", bun.List([]int64{shuffled.trade.TenantID, reference.trade.TenantID})).
		Where("status <> ?", string(idempotent.StatusSettled)).Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "claims left ACQUIRED")
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// comparableOrders is the tenant's order rows without the fields that
// legitimately differ between runs (ids, tenant, row times, and the
// settled-event counter: on a cumulative-refund channel how many refunds
// move money depends on arrival order). It first holds the tenant's
// settled events to the contract (checkSettledEvents): one per claim
// settled POSTED, trade_seq gapless from 1, amounts summing to the ledger,
// the last one's order fields the order row's.
func comparableOrders(tb testing.TB, db bun.IDB, tenant int64) []settlement.Order {
	tb.Helper()
	checkSettledEvents(tb, db, tenant)
	orders, err := settlement.Orders(context.Background(), db, tenant)
	require.NoError(tb, err)
	for i := range orders {
		orders[i].ID, orders[i].TenantID, orders[i].SettledSeq = 0, 0, 0
		orders[i].CreatedAt, orders[i].UpdatedAt = time.Time{}, time.Time{}
	}
	return orders
}

func comparableBalances(tb testing.TB, db bun.IDB, tenant int64) []settlement.Balance {
	tb.Helper()
	bals, err := settlement.Balances(context.Background(), db, tenant)
	require.NoError(tb, err)
	for i := range bals {
		bals[i].TenantID = 0
	}
	return bals
}

// TestConcurrentArrival delivers every copy of every event of a trade from
// several goroutines at once: the locks, not the delivery order, must make
// the order row and the balances come out as in-order delivery's.
func TestConcurrentArrival(t *testing.T) {
	seed := envInt(t, envSeed, time.Now().UnixNano())
	t.Logf("seed %d", seed)
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		for i := range 12 {
			c := newPropCase(seed, 5000+i)
			t.Run(fmt.Sprintf("%04d-%s", c.index, c.trade.Channel), func(t *testing.T) {
				shuffled := c.forTenant(int64(200_000 + 2*i))
				reference := c.forTenant(int64(200_001 + 2*i))
				for j, e := range reference.events {
					h.deliver(t, e.copies[0], int64(j))
				}
				var bodies [][]byte
				for _, e := range shuffled.events {
					bodies = append(bodies, e.copies...)
					bodies = append(bodies, e.copies[0]) // a redelivery of the same message
				}
				errs := make([]error, len(bodies))
				var start, done sync.WaitGroup
				start.Add(1)
				for j, b := range bodies {
					done.Add(1)
					go func() {
						defer done.Done()
						start.Wait()
						_, errs[j] = h.tryDeliver(ctx, b, int64(j))
					}()
				}
				start.Done()
				done.Wait()
				for _, err := range errs {
					require.NoError(t, err)
				}
				assert.Equal(t, comparableOrders(t, db, reference.trade.TenantID), comparableOrders(t, db, shuffled.trade.TenantID))
				assert.Equal(t, comparableBalances(t, db, reference.trade.TenantID), comparableBalances(t, db, shuffled.trade.TenantID))
			})
		}
		mustCheck(t, db)
	})
}
