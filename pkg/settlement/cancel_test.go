package settlement_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// A Shouqianba CANCELED order nets its trade to zero: it reverses the
// payment posted for the trade, posts nothing when none is, and a payment
// settled after it is reversed in the same transaction, under the cancel's
// key. These tests deliver a trade's PAID, refunds and CANCELED in every
// kind of order, through a batch of one (Settle) and through the set-based
// batch (SettleBatch of createOrdersFrom events or more, padded with other
// trades), with redeliveries and with claims left ACQUIRED for the sweeper.

// batchMode is how a test hands messages to settlement.
type batchMode struct {
	name string
	set  bool // SettleBatch with filler events up to the set-based path
}

var batchModes = []batchMode{{name: "one"}, {name: "set", set: true}}

// fillerSeq numbers the filler trades: unique within the test binary.
var fillerSeq atomic.Int64

// fillerTenant holds the filler trades, apart from every case's tenants.
const fillerTenant = 9_000_001

// send delivers values through mode: one message at a time, or as one
// batch with eight fresh payments of other trades, so the batch takes
// SettleBatch's set-based path (createOrders).
func (m batchMode) send(t *testing.T, h *harness, values [][]byte, offset int64) []delivery {
	t.Helper()
	if !m.set {
		out := make([]delivery, len(values))
		for i, v := range values {
			out[i] = h.deliver(t, v, offset+int64(i))
		}
		return out
	}
	batch := slices.Clone(values)
	for range 8 {
		tr := channelstest.NewTrade(channels.WeChat, 700_000+int(fillerSeq.Add(1)))
		batch = append(batch, retenant(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), fillerTenant))
	}
	return h.deliverBatch(t, batch, offset)[:len(values)]
}

// sqbOrder is one Shouqianba trade's events.
type sqbOrder struct {
	trade channelstest.Trade
}

func newSQBOrder(tenant int64, seq int, total int64) sqbOrder {
	tr := channelstest.NewTrade(channels.SQB, seq)
	tr.TenantID, tr.Total = tenant, total
	return sqbOrder{tr}
}

func (o sqbOrder) paid(attempt int) []byte {
	return channelstest.SQBPayment(o.trade, channelstest.Delivery{Attempt: attempt})
}

func (o sqbOrder) cancel(attempt int) []byte {
	return channelstest.SQBCancel(o.trade, channelstest.Delivery{Attempt: attempt})
}

// refund is the refund numbered no taking the refunded total to cum, an
// hour after the payment per step: later than the cancel's time.
func (o sqbOrder) refund(no string, cum int64, step, attempt int) []byte {
	r := channelstest.Refund{No: no, Cumulative: cum, At: o.trade.PaidAt.Add(time.Duration(step) * time.Hour)}
	return channelstest.SQBRefund(o.trade, r, channelstest.Delivery{Attempt: attempt, SQB: channelstest.SQBRequestNo})
}

func (o sqbOrder) cancelKey(t *testing.T) idempotent.Key {
	t.Helper()
	k, err := sqb.CancelKey(o.trade.TradeNo)
	require.NoError(t, err)
	return k
}

// claimOutcome is the settled outcome of the trade's claim key.
func claimOutcome(t *testing.T, h *harness, tenant int64, key idempotent.Key) idempotent.Outcome {
	t.Helper()
	rec, err := h.claims.Get(context.Background(), tenant, key)
	require.NoError(t, err)
	require.Equal(t, idempotent.StatusSettled, rec.Status, "%s", key)
	return rec.Outcome
}

// netPayable is the merchant_payable credit minus debit of the trade.
func netPayable(t *testing.T, h *harness, tr channelstest.Trade) int64 {
	t.Helper()
	var net int64
	for _, b := range comparableBalances(t, h.db, tr.TenantID) {
		if b.TradeNo == tr.TradeNo && b.Account == settlement.AccountMerchantPayable {
			net += b.Credit - b.Debit
		}
	}
	return net
}

// keyAmount is what the ledger holds under key: the merchant_payable
// debit of a refund key (0 when nothing is posted).
func keyAmount(t *testing.T, h *harness, tenant int64, key idempotent.Key) int64 {
	t.Helper()
	var sum int64
	err := h.db.NewSelect().Table("ss_ledger_entry").ColumnExpr("COALESCE(SUM(amount), 0)").
		Where("tenant_id = ?", tenant).Where("idempotent_key = ?", string(key)).
		Where("account = ?", settlement.AccountMerchantPayable).Where("direction = ?", string(settlement.Debit)).
		Scan(context.Background(), &sum)
	require.NoError(t, err)
	return sum
}

func TestSQBCancelScenarios(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		h := newHarness(t, db)
		seq := 0
		next := func(mode batchMode, total int64) sqbOrder {
			seq++
			tenant := int64(300_000 + seq)
			if mode.set {
				tenant += 10_000
			}
			return newSQBOrder(tenant, 800_000+seq, total)
		}
		for _, mode := range batchModes {
			t.Run(mode.name, func(t *testing.T) {
				t.Run("paid then cancel reverses what is left", func(t *testing.T) {
					o := next(mode, 1000)
					mode.send(t, h, [][]byte{o.paid(0)}, 0)
					mode.send(t, h, [][]byte{o.refund("R1", 300, 1, 0)}, 10)
					d := mode.send(t, h, [][]byte{o.cancel(0)}, 20)
					assert.Equal(t, idempotent.OutcomePosted, d[0].result.Outcome)
					assert.Equal(t, int64(700), d[0].result.Amount, "paid 1000 minus refunded 300")
					assert.Equal(t, int64(700), keyAmount(t, h, o.trade.TenantID, o.cancelKey(t)))
					assert.Zero(t, netPayable(t, h, o.trade))
					got := order(t, db, o.trade)
					assert.Equal(t, settlement.OrderRefunded, got.Status)
					assert.Equal(t, int64(1000), got.RefundedAmount)
					// A refund reported after the cancel, with a later time,
					// does not un-cancel the trade.
					d = mode.send(t, h, [][]byte{o.refund("R2", 600, 5, 0)}, 30)
					assert.Equal(t, idempotent.OutcomeNoMoney, d[0].result.Outcome)
					assert.Zero(t, netPayable(t, h, o.trade))
				})
				t.Run("cancel of an unpaid order posts nothing", func(t *testing.T) {
					o := next(mode, 2580)
					d := mode.send(t, h, [][]byte{o.cancel(0), o.cancel(1)}, 0)
					assert.Equal(t, idempotent.Acquired, d[0].kind)
					assert.Equal(t, idempotent.OutcomeNoMoney, d[0].result.Outcome)
					assert.Equal(t, idempotent.Duplicate, d[1].kind)
					assert.Zero(t, ledgerRows(t, db, o.cancelKey(t)), "no refund without a payment")
					assert.Empty(t, comparableBalances(t, db, o.trade.TenantID), "merchant_payable never goes negative")
					got := order(t, db, o.trade)
					assert.Equal(t, settlement.OrderPendingPayment, got.Status)
					assert.Zero(t, got.PaidAmount)
					assert.Zero(t, got.RefundedAmount)
					assert.Equal(t, idempotent.OutcomeNoMoney, claimOutcome(t, h, o.trade.TenantID, o.cancelKey(t)))
				})
				t.Run("cancel then a late payment posts both", func(t *testing.T) {
					o := next(mode, 2580)
					mode.send(t, h, [][]byte{o.cancel(0)}, 0)
					require.Empty(t, comparableBalances(t, db, o.trade.TenantID), "nothing posted before the payment")
					d := mode.send(t, h, [][]byte{o.paid(0), o.paid(1), o.cancel(2)}, 10)
					assert.Equal(t, idempotent.OutcomePosted, d[0].result.Outcome)
					assert.Equal(t, int64(2580), d[0].result.Amount)
					assert.Equal(t, idempotent.Duplicate, d[1].kind)
					assert.Equal(t, idempotent.Duplicate, d[2].kind)
					assert.Equal(t, int64(2580), keyAmount(t, h, o.trade.TenantID, o.cancelKey(t)), "the reversal under the cancel's key")
					assert.Equal(t, idempotent.OutcomePosted, claimOutcome(t, h, o.trade.TenantID, o.cancelKey(t)), "the cancel's claim records that it moved money")
					assert.Zero(t, netPayable(t, h, o.trade))
					got := order(t, db, o.trade)
					assert.Equal(t, settlement.OrderRefunded, got.Status)
					assert.Equal(t, int64(2580), got.PaidAmount)
					assert.Equal(t, int64(2580), got.RefundedAmount)
					assert.Equal(t, int64(2580), got.MaxCumulativeRefund)
				})
				t.Run("cancel and payment in one batch", func(t *testing.T) {
					o := next(mode, 990)
					d := mode.send(t, h, [][]byte{o.cancel(0), o.paid(0), o.cancel(1)}, 0)
					assert.Equal(t, idempotent.OutcomeNoMoney, d[0].result.Outcome, "as settled one after the other")
					assert.Equal(t, idempotent.OutcomePosted, d[1].result.Outcome)
					assert.Equal(t, int64(990), keyAmount(t, h, o.trade.TenantID, o.cancelKey(t)))
					assert.Equal(t, idempotent.OutcomePosted, claimOutcome(t, h, o.trade.TenantID, o.cancelKey(t)))
					assert.Zero(t, netPayable(t, h, o.trade))
				})
				t.Run("cancel, a refund, then the payment", func(t *testing.T) {
					o := next(mode, 1000)
					mode.send(t, h, [][]byte{o.cancel(0)}, 0)
					mode.send(t, h, [][]byte{o.refund("R1", 400, 2, 0)}, 10)
					mode.send(t, h, [][]byte{o.paid(0)}, 20)
					assert.Equal(t, int64(600), keyAmount(t, h, o.trade.TenantID, o.cancelKey(t)), "paid 1000 minus refunded 400")
					assert.Zero(t, netPayable(t, h, o.trade))
				})
				t.Run("orphaned claims settled by the sweeper", func(t *testing.T) {
					ctx := context.Background()
					// The cancel claimed, its worker gone; the payment settles,
					// then the sweeper settles the cancel.
					o := next(mode, 1500)
					orphan := h.decode(t, o.cancel(0))
					require.Equal(t, idempotent.Acquired, h.acquire(t, orphan, 0).Kind)
					mode.send(t, h, [][]byte{o.paid(0)}, 10)
					assert.Equal(t, int64(1500), netPayable(t, h, o.trade), "payment only, the cancel not settled yet")
					res, err := h.svc.SettleStored(ctx, mustClaim(t, h, orphan))
					require.NoError(t, err)
					assert.Equal(t, idempotent.OutcomePosted, res.Outcome)
					assert.Zero(t, netPayable(t, h, o.trade))

					// The payment claimed and orphaned; the cancel settles
					// (nothing to reverse), then the sweeper settles the
					// payment with its reversal.
					o = next(mode, 1500)
					orphan = h.decode(t, o.paid(0))
					require.Equal(t, idempotent.Acquired, h.acquire(t, orphan, 0).Kind)
					d := mode.send(t, h, [][]byte{o.cancel(0)}, 10)
					assert.Equal(t, idempotent.OutcomeNoMoney, d[0].result.Outcome)
					res, err = h.svc.SettleStored(ctx, mustClaim(t, h, orphan))
					require.NoError(t, err)
					assert.Equal(t, idempotent.OutcomePosted, res.Outcome)
					assert.Equal(t, int64(1500), keyAmount(t, h, o.trade.TenantID, o.cancelKey(t)))
					assert.Equal(t, idempotent.OutcomePosted, claimOutcome(t, h, o.trade.TenantID, o.cancelKey(t)))
					assert.Zero(t, netPayable(t, h, o.trade))
					res, err = h.svc.SettleStored(ctx, mustClaim(t, h, orphan))
					require.NoError(t, err)
					assert.True(t, res.FenceLost, "settled once")
				})
			})
		}
		t.Run("a reversal already in the ledger is not the payment's", func(t *testing.T) {
			// A bug that posted under the cancel's key without its claim:
			// the payment must not be settled as already posted.
			ctx := context.Background()
			o := next(batchMode{name: "one"}, 700)
			h.deliver(t, o.cancel(0), 0)
			for _, side := range [][2]string{
				{settlement.AccountMerchantPayable, string(settlement.Debit)},
				{settlement.ReceivableAccount(channels.SQB), string(settlement.Credit)},
			} {
				_, err := db.NewRaw("INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, "+
					"account, direction, amount, currency, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
					o.trade.TenantID, string(o.cancelKey(t)), "SQB", o.trade.TradeNo, side[0], side[1], 700, "CNY",
					time.Now().UTC()).Exec(ctx)
				require.NoError(t, err)
			}
			ev := h.decode(t, o.paid(0))
			require.Equal(t, idempotent.Acquired, h.acquire(t, ev, 1).Kind)
			_, err := h.svc.Settle(ctx, ev)
			require.Error(t, err)
			require.NotErrorIs(t, err, idempotent.ErrDuplicateKey, "not a duplicate of the payment")
			assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, ev).Status, "the payment stays to be settled")
			assert.Zero(t, ledgerRows(t, db, ev.Key), "nothing posted")
			// Undo the bug's rows so the database checks clean.
			_, err = db.NewDelete().Table("ss_ledger_entry").Where("tenant_id = ?", o.trade.TenantID).Exec(ctx)
			require.NoError(t, err)
			res, err := h.svc.Settle(ctx, ev)
			require.NoError(t, err)
			assert.Equal(t, int64(700), res.Amount)
			assert.Zero(t, netPayable(t, h, o.trade))
		})
		mustCheck(t, db)
	})
}

// TestSQBCancelAndPaymentConcurrently delivers a trade's cancel and its
// payment, each twice, and another trade's cancel twice, from goroutines
// at once: whichever commits first, the order row's lock and the cancel's
// claim make the first trade net to zero with one payment and one
// reversal, and the unpaid one post nothing.
func TestSQBCancelAndPaymentConcurrently(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		for i := range 10 {
			o := newSQBOrder(int64(500_000+i), 950_000+i, 1234)
			unpaid := newSQBOrder(int64(500_000+i), 960_000+i, 4321) // cancelled, never paid
			bodies := [][]byte{o.cancel(0), o.paid(0), o.cancel(1), o.paid(1), unpaid.cancel(0), unpaid.cancel(1)}
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
			assert.Zero(t, netPayable(t, h, o.trade), "trade %d", i)
			assert.Equal(t, int64(1234), keyAmount(t, h, o.trade.TenantID, o.cancelKey(t)), "trade %d: one reversal", i)
			assert.Equal(t, idempotent.OutcomePosted, claimOutcome(t, h, o.trade.TenantID, o.cancelKey(t)), "trade %d", i)
			got := order(t, db, o.trade)
			assert.Equal(t, [2]int64{1234, 1234}, [2]int64{got.PaidAmount, got.RefundedAmount}, "trade %d", i)
			assert.Zero(t, ledgerRows(t, db, unpaid.cancelKey(t)), "trade %d: an unpaid cancel posts nothing", i)
		}
		mustCheck(t, db)
	})
}

// sqbPropCase is one random Shouqianba order: paid or not, refunds (only
// when paid), cancelled or not.
type sqbPropCase struct {
	index        int
	trade        channelstest.Trade
	paid         bool
	cancelled    bool
	refunded     int64 // the refunds' highest cumulative
	lastRefundAt *time.Time
	events       []propEvent // in the channel's order: payment, refunds, cancel
}

func newSQBPropCase(seed int64, i int) sqbPropCase {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)^0xca9ce1))
	tr := channelstest.NewTrade(channels.SQB, 900_000+i)
	tr.TenantID = 0
	tr.Total = 2 + rng.Int64N(100_000)
	c := sqbPropCase{index: i, trade: tr, paid: rng.IntN(5) != 0, cancelled: rng.IntN(3) != 0}
	if !c.paid {
		c.cancelled = true // an unpaid order's only money event is its cancel
	}
	copies := func(build func(d channelstest.Delivery) []byte) [][]byte {
		out := make([][]byte, 1+rng.IntN(4))
		for a := range out {
			out[a] = build(channelstest.Delivery{Attempt: a})
		}
		return out
	}
	if c.paid {
		c.events = append(c.events, propEvent{name: "payment", copies: copies(func(d channelstest.Delivery) []byte {
			return channelstest.SQBPayment(tr, d)
		})})
		cuts := map[int64]bool{}
		for n := rng.IntN(4); len(cuts) < n && int64(len(cuts)) < tr.Total-1; {
			cuts[1+rng.Int64N(tr.Total-1)] = true
		}
		var cum []int64
		for v := range cuts {
			cum = append(cum, v)
		}
		slices.Sort(cum)
		if rng.IntN(4) == 0 {
			cum = append(cum, tr.Total)
		}
		for j, cu := range cum {
			r := channelstest.Refund{No: fmt.Sprintf("RF-%d", j), Cumulative: cu, At: tr.PaidAt.Add(time.Duration(j+1) * time.Hour)}
			form := channelstest.SQBForm(rng.IntN(4))
			c.events = append(c.events, propEvent{name: "refund " + r.No, refund: true, copies: copies(func(d channelstest.Delivery) []byte {
				d.SQB = form
				return channelstest.SQBRefund(tr, r, d)
			})})
			at := r.At.UTC()
			c.lastRefundAt = &at
			c.refunded = cu
		}
	}
	if c.cancelled {
		c.events = append(c.events, propEvent{name: "cancel", refund: true, copies: copies(func(d channelstest.Delivery) []byte {
			return channelstest.SQBCancel(tr, d)
		})})
		if at := tr.PaidAt.Add(30 * time.Minute).UTC(); c.lastRefundAt == nil || at.After(*c.lastRefundAt) {
			c.lastRefundAt = &at
		}
	}
	return c
}

// TestPropertySQBCancel: whatever order a Shouqianba trade's PAID, refunds
// and CANCELED arrive in, with redeliveries, claims orphaned and settled
// later by the sweeper, through batches of one or the set-based batch, the
// order row and balances are those of in-order delivery and of the trade's
// final state: CANCELED nets it to zero, otherwise paid − refunded.
func TestPropertySQBCancel(t *testing.T) {
	seed := envInt(t, envSeed, time.Now().UnixNano())
	total := int(envInt(t, envCases, 120))
	only := int(envInt(t, envCase, -1))
	t.Logf("property seed %d, %d cases (replay: %s=%d; one case: %s=N)", seed, total, envSeed, seed, envCase)
	split := total - total/5
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		lo, hi := 0, split
		if db.Dialect().Name() == dialect.SQLite {
			lo, hi = split, total
		}
		h := newHarness(t, db)
		for i := lo; i < hi; i++ {
			if only >= 0 && i != only {
				continue
			}
			c := newSQBPropCase(seed, i)
			t.Run(fmt.Sprintf("%04d-paid=%t-cancelled=%t", i, c.paid, c.cancelled), func(t *testing.T) {
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("replay: %s=%d %s=%d", envSeed, seed, envCase, i)
					}
				})
				runSQBPropCase(t, h, c, seed)
			})
		}
		mustCheck(t, db)
	})
}

func runSQBPropCase(t *testing.T, h *harness, c sqbPropCase, seed int64) { //nolint:thelper // one case's test body
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(c.index)^0x0c4ce1))
	tenant, refTenant := int64(400_000+2*c.index), int64(400_001+2*c.index)
	forTenant := func(b []byte, tn int64) []byte { return retenant(b, tn) }

	// In the channel's order, each event once.
	for i, e := range c.events {
		h.deliver(t, forTenant(e.copies[0], refTenant), int64(i))
	}

	var msgs [][]byte
	for _, e := range c.events {
		for _, b := range e.copies {
			msgs = append(msgs, forTenant(b, tenant))
		}
	}
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	mode := batchModes[c.index%2]
	var orphans []channels.Event
	for i := 0; i < len(msgs); {
		if rng.IntN(5) == 0 {
			// A worker that claimed and died before settling.
			ev := h.decode(t, msgs[i])
			if h.acquire(t, ev, int64(i)).Kind == idempotent.Acquired {
				orphans = append(orphans, ev)
			}
			i++
			continue
		}
		n := 1
		if mode.set {
			n = min(1+rng.IntN(4), len(msgs)-i)
		}
		mode.send(t, h, msgs[i:i+n], int64(i))
		i += n
		if len(orphans) > 0 && rng.IntN(3) == 0 {
			// The sweeper settles one orphan.
			_, err := h.svc.SettleStored(ctx, mustClaim(t, h, orphans[0])) // FenceLost when a redelivery settled it
			require.NoError(t, err)
			orphans = orphans[1:]
		}
	}
	for _, ev := range orphans {
		rec := mustClaim(t, h, ev)
		if rec.Status == idempotent.StatusAcquired {
			_, err := h.svc.SettleStored(ctx, rec)
			require.NoError(t, err)
		}
	}

	tr := c.trade
	want := settlement.Order{
		Channel: tr.Channel, TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo,
		Amount: tr.Total, Currency: "CNY", LastRefundAt: c.lastRefundAt,
	}
	var wantBal []settlement.Balance
	if c.paid {
		paidAt := tr.PaidAt.UTC()
		want.PaidAmount, want.PaidAt = tr.Total, &paidAt
		want.RefundedAmount, want.MaxCumulativeRefund = c.refunded, c.refunded
		if c.cancelled {
			want.RefundedAmount, want.MaxCumulativeRefund = tr.Total, tr.Total
		}
		wantBal = []settlement.Balance{
			{Channel: tr.Channel, TradeNo: tr.TradeNo, Account: settlement.ReceivableAccount(tr.Channel), Debit: tr.Total, Credit: want.RefundedAmount},
			{Channel: tr.Channel, TradeNo: tr.TradeNo, Account: settlement.AccountMerchantPayable, Debit: want.RefundedAmount, Credit: tr.Total},
		}
		slices.SortFunc(wantBal, func(a, b settlement.Balance) int { return compareStrings(a.Account, b.Account) })
	}
	want.Status = settlement.DeriveStatus(want.Amount, want.PaidAmount, want.RefundedAmount)
	got := comparableOrders(t, h.db, tenant)
	require.Len(t, got, 1)
	assert.Equal(t, comparableOrders(t, h.db, refTenant), got, "order row differs from in-order delivery")
	assert.Equal(t, []settlement.Order{want}, got, "order row differs from the final state's")
	gotBal := comparableBalances(t, h.db, tenant)
	if len(wantBal) == 0 {
		assert.Empty(t, gotBal, "an unpaid cancelled order posts nothing")
	} else {
		assert.Equal(t, wantBal, gotBal, "balances differ from the final state's")
	}
	assert.Equal(t, comparableBalances(t, h.db, refTenant), gotBal, "balances differ from in-order delivery")

	if c.cancelled {
		key, err := sqb.CancelKey(tr.TradeNo)
		require.NoError(t, err)
		wantOutcome := idempotent.OutcomeNoMoney
		if keyAmount(t, h, tenant, key) > 0 {
			wantOutcome = idempotent.OutcomePosted
		}
		assert.Equal(t, wantOutcome, claimOutcome(t, h, tenant, key), "the cancel's claim says whether it moved money")
	}
	n, err := h.db.NewSelect().Table("ss_channel_idempotent").
		Where("tenant_id IN (?)", bun.List([]int64{tenant, refTenant})).
		Where("status <> ?", string(idempotent.StatusSettled)).Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "claims left ACQUIRED")
}
