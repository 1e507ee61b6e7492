package settlement_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func refundAt(tr channelstest.Trade, no string, amount, cumulative int64, hours int) channelstest.Refund {
	return channelstest.Refund{No: no, Amount: amount, Cumulative: cumulative, At: tr.PaidAt.Add(time.Duration(hours) * time.Hour)}
}

func TestSettle(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)

		t.Run("payment then WeChat refunds walk the order to REFUNDED", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.WeChat, 1)
			d := h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 1)
			require.Equal(t, idempotent.Acquired, d.kind)
			assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomePosted, Amount: 2580, SettledAt: d.result.SettledAt}, d.result)
			assert.False(t, d.result.SettledAt.IsZero())
			o := order(t, db, tr)
			assert.Equal(t, settlement.OrderPaid, o.Status)
			assert.Equal(t, int64(2580), o.PaidAmount)
			require.NotNil(t, o.PaidAt)
			assert.True(t, o.PaidAt.Equal(tr.PaidAt), "paid_at %v, want %v", o.PaidAt, tr.PaidAt)

			d = h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-1", 1000, 0, 1), channelstest.Delivery{}), 2)
			assert.Equal(t, idempotent.OutcomePosted, d.result.Outcome)
			assert.Equal(t, int64(1000), d.result.Amount)
			assert.Equal(t, settlement.OrderPartiallyRefunded, order(t, db, tr).Status)

			d = h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "rf-1", 1580, 0, 2), channelstest.Delivery{}), 3)
			assert.Equal(t, int64(1580), d.result.Amount, "refund numbers are case-sensitive: rf-1 is another refund")
			o = order(t, db, tr)
			assert.Equal(t, settlement.OrderRefunded, o.Status)
			assert.Equal(t, int64(2580), o.RefundedAmount)
			assert.Zero(t, o.MaxCumulativeRefund)
			require.NotNil(t, o.LastRefundAt)
			assert.True(t, o.LastRefundAt.Equal(tr.PaidAt.Add(2*time.Hour)))

			d = h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-3", 1, 0, 3), channelstest.Delivery{}), 4)
			assert.Equal(t, idempotent.OutcomeOverRefund, d.result.Outcome, "a refund beyond the total posts nothing")
			assert.Zero(t, d.result.Amount)
			assert.Equal(t, 0, ledgerRows(t, db, d.ev.Key))
			assert.Equal(t, int64(2580), order(t, db, tr).RefundedAmount)
			mustCheck(t, db)
		})

		t.Run("a refund before its payment leaves the order PENDING_PAYMENT until the payment", func(t *testing.T) {
			for i, ch := range channels.Codes() {
				tr := channelstest.NewTrade(ch, 100+i)
				d := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 500, 500, 1), channelstest.Delivery{}), 10)
				assert.Equal(t, idempotent.OutcomePosted, d.result.Outcome, ch)
				assert.Equal(t, int64(500), d.result.Amount, ch)
				o := order(t, db, tr)
				assert.Equal(t, settlement.OrderPendingPayment, o.Status, ch)
				assert.Equal(t, int64(2580), o.Amount, "the refund carries the order total")
				assert.Zero(t, o.PaidAmount)
				assert.Nil(t, o.PaidAt)

				h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 11)
				o = order(t, db, tr)
				assert.Equal(t, settlement.OrderPartiallyRefunded, o.Status, ch)
				assert.Equal(t, int64(2580), o.PaidAmount)
				assert.Equal(t, int64(500), o.RefundedAmount)
			}
			// A trade refunded in full before its payment arrives ends REFUNDED.
			tr := channelstest.NewTrade(channels.Alipay, 110)
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "ALL", 0, 2580, 1), channelstest.Delivery{}), 12)
			assert.Equal(t, settlement.OrderPendingPayment, order(t, db, tr).Status)
			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 13)
			assert.Equal(t, settlement.OrderRefunded, order(t, db, tr).Status)
			// And a refund before a payment on an order with no refund yet: PAID after.
			tr = channelstest.NewTrade(channels.WeChat, 111)
			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 14)
			assert.Equal(t, settlement.OrderPaid, order(t, db, tr).Status)
			mustCheck(t, db)
		})

		t.Run("a lower cumulative arriving late moves no money", func(t *testing.T) {
			for i, ch := range cumulativeChannels() {
				tr := channelstest.NewTrade(ch, 200+i)
				h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 20)
				second := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R2", 0, 900, 2), channelstest.Delivery{}), 21)
				assert.Equal(t, int64(900), second.result.Amount, "the first cumulative seen moves all of it")
				first := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 0, 300, 1), channelstest.Delivery{}), 22)
				assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomeNoMoney, SettledAt: first.result.SettledAt}, first.result)
				assert.Equal(t, 0, ledgerRows(t, db, first.ev.Key), "never a zero-amount row")
				third := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R3", 0, 1000, 3), channelstest.Delivery{}), 23)
				assert.Equal(t, int64(100), third.result.Amount, "the increase over the highest cumulative")
				o := order(t, db, tr)
				assert.Equal(t, int64(1000), o.RefundedAmount)
				assert.Equal(t, int64(1000), o.MaxCumulativeRefund)
				assert.True(t, o.LastRefundAt.Equal(tr.PaidAt.Add(3*time.Hour)))
				if ch == channels.SQB {
					continue // net_amount cannot go below zero: no over-refund to express
				}
				over := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R4", 0, 2581, 4), channelstest.Delivery{}), 24)
				assert.Equal(t, idempotent.OutcomeOverRefund, over.result.Outcome, "a cumulative above the total")
				rec, err := h.claims.Get(ctx, tr.TenantID, over.ev.Key)
				require.NoError(t, err)
				assert.Equal(t, idempotent.StatusSettled, rec.Status)
				assert.Equal(t, idempotent.OutcomeOverRefund, rec.Outcome)
			}
			mustCheck(t, db)
		})

		t.Run("settling a settled claim again loses the fence and writes nothing", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.SQB, 300)
			d := h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 30)
			res, err := h.svc.Settle(ctx, d.ev)
			require.NoError(t, err)
			assert.True(t, res.FenceLost)
			assert.Empty(t, res.Outcome)
			rec, err := h.claims.Get(ctx, tr.TenantID, d.ev.Key)
			require.NoError(t, err)
			res, err = h.svc.SettleStored(ctx, rec)
			require.NoError(t, err)
			assert.True(t, res.FenceLost)
			// A redelivery and a channel retry are duplicates, settled already.
			again := h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{Attempt: 2}), 31)
			assert.Equal(t, idempotent.Duplicate, again.kind)
			assert.Equal(t, 2, ledgerRows(t, db, d.ev.Key))
			assert.Equal(t, int64(2580), order(t, db, tr).PaidAmount)
		})

		t.Run("permanent errors", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.WeChat, 400)
			ev := h.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
			_, err := h.svc.Settle(ctx, ev)
			require.ErrorIs(t, err, idempotent.ErrNotFound, "no claim")

			h.acquire(t, ev, 40)
			other := ev
			other.OrderTotal = 1
			other.Fingerprint = channels.Fingerprint(other)
			_, err = h.svc.Settle(ctx, other)
			require.ErrorIs(t, err, settlement.ErrFingerprintMismatch)

			bad := ev
			bad.Fingerprint = "x"
			_, err = h.svc.Settle(ctx, bad)
			require.ErrorIs(t, err, settlement.ErrInvalidEvent)

			rec, err := h.claims.Get(ctx, tr.TenantID, ev.Key)
			require.NoError(t, err)
			purged := rec
			purged.Event = nil
			_, err = h.svc.SettleStored(ctx, purged)
			require.ErrorIs(t, err, settlement.ErrInvalidEvent)
			garbled := rec
			garbled.Event = []byte("{")
			_, err = h.svc.SettleStored(ctx, garbled)
			require.ErrorIs(t, err, settlement.ErrInvalidEvent)
			stranger := rec
			stranger.TenantID = 7
			_, err = h.svc.SettleStored(ctx, stranger)
			require.ErrorIs(t, err, settlement.ErrInvalidEvent)

			assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, ev).Status, "nothing settled the claim")
			_, err = settlement.GetOrder(ctx, db, tr.TenantID, tr.Channel, tr.TradeNo)
			require.ErrorIs(t, err, settlement.ErrOrderNotFound, "a rolled-back settle writes nothing")

			res, err := h.svc.SettleStored(ctx, rec)
			require.NoError(t, err)
			assert.Equal(t, idempotent.OutcomePosted, res.Outcome, "the stored event settles the claim")
		})

		t.Run("an order total that disagrees keeps the first and is counted", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.WeChat, 500)
			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 50)
			before := metric(t, h, "paycb_order_total_mismatch_total")
			odd := tr
			odd.Total = 9999
			d := h.deliver(t, channelstest.RefundEnvelope(odd, refundAt(tr, "R1", 100, 0, 1), channelstest.Delivery{}), 51)
			assert.Equal(t, int64(100), d.result.Amount)
			assert.InDelta(t, before+1, metric(t, h, "paycb_order_total_mismatch_total"), 0)
			assert.Equal(t, int64(2580), order(t, db, tr).Amount)
			mustCheck(t, db)
		})
	})
}

func mustClaim(tb testing.TB, h *harness, ev channels.Event) idempotent.Record {
	tb.Helper()
	rec, err := h.claims.Get(context.Background(), ev.TenantID, ev.Key)
	require.NoError(tb, err)
	return rec
}

// TestConcurrentSettles settles one claim from many goroutines at once:
// exactly one posts, every other loses the fence.
func TestConcurrentSettles(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		for i, ch := range channels.Codes() {
			tr := channelstest.NewTrade(ch, 600+i)
			pay := h.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
			ref := h.decode(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 700, 700, 1), channelstest.Delivery{}))
			for _, ev := range []channels.Event{ref, pay} {
				h.acquire(t, ev, 60)
				rec := mustClaim(t, h, ev)
				const n = 12
				results := make([]settlement.Result, n)
				errs := make([]error, n)
				var start, done sync.WaitGroup
				start.Add(1)
				for g := range n {
					done.Add(1)
					go func() {
						defer done.Done()
						start.Wait()
						errs[g] = retry(func() error {
							var err error
							if g%2 == 0 {
								results[g], err = h.svc.Settle(ctx, ev)
							} else {
								results[g], err = h.svc.SettleStored(ctx, rec)
							}
							return err
						})
					}()
				}
				start.Done()
				done.Wait()
				var posted, lost int
				for g := range n {
					require.NoError(t, errs[g])
					if results[g].FenceLost {
						lost++
					} else {
						posted++
						assert.Equal(t, idempotent.OutcomePosted, results[g].Outcome)
					}
				}
				assert.Equal(t, 1, posted, "%s: exactly one settler posts", ev.Key)
				assert.Equal(t, n-1, lost)
				assert.Equal(t, 2, ledgerRows(t, db, ev.Key))
			}
			o := order(t, db, tr)
			assert.Equal(t, int64(2580), o.PaidAmount)
			assert.Equal(t, int64(700), o.RefundedAmount)
			assert.Equal(t, settlement.OrderPartiallyRefunded, o.Status)
		}
		mustCheck(t, db)
	})
}

// TestLedgerBypass posts an event's ledger rows behind the claim's back, as
// a buggy path would, then settles the claim: the unique key refuses the
// second posting, the claim is settled POSTED once with no business writes,
// and the duplicate is counted.
func TestLedgerBypass(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		tr := channelstest.NewTrade(channels.WeChat, 700)
		h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 70)
		ev := h.decode(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 400, 0, 1), channelstest.Delivery{}))

		// The bypass: the refund's posting is written without claiming it.
		for _, side := range []struct{ account, dir string }{
			{settlement.AccountMerchantPayable, "DEBIT"}, {settlement.ReceivableAccount(channels.WeChat), "CREDIT"},
		} {
			_, err := db.NewRaw(`INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no,
				account, direction, amount, currency, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'CNY', ?)`,
				ev.TenantID, string(ev.Key), string(ev.Channel), ev.TradeNo, side.account, side.dir, ev.RefundAmount,
				time.Now().UTC()).Exec(ctx)
			require.NoError(t, err)
		}
		before := order(t, db, tr)

		h.acquire(t, ev, 71)
		res, err := h.svc.Settle(ctx, ev)
		require.NoError(t, err, "a ledger duplicate is settled, not retried")
		assert.Equal(t, idempotent.OutcomePosted, res.Outcome)
		assert.True(t, res.AlreadyPosted)
		assert.Zero(t, res.Amount)
		assert.InDelta(t, float64(1), metric(t, h, "paycb_ledger_duplicate_postings_total"), 0)
		rec := mustClaim(t, h, ev)
		assert.Equal(t, idempotent.StatusSettled, rec.Status)
		assert.Equal(t, idempotent.OutcomePosted, rec.Outcome)
		assert.Equal(t, 2, ledgerRows(t, db, ev.Key), "still one posting")
		after := order(t, db, tr)
		assert.Equal(t, before.RefundedAmount, after.RefundedAmount, "no business writes")
		assert.Equal(t, before.UpdatedAt, after.UpdatedAt)

		res, err = h.svc.Settle(ctx, ev)
		require.NoError(t, err)
		assert.True(t, res.FenceLost, "settled once; a second settle loses the fence")
		assert.InDelta(t, float64(1), metric(t, h, "paycb_ledger_duplicate_postings_total"), 0)

		// A payment claimed again on a paid order (its claim row lost by a
		// bug) is refused the same way, even before the unique key.
		pay := h.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		_, err = db.NewDelete().Table("ss_channel_idempotent").Where("idempotent_key = ?", string(pay.Key)).Exec(ctx)
		require.NoError(t, err)
		h.acquire(t, pay, 72)
		res, err = h.svc.Settle(ctx, pay)
		require.NoError(t, err)
		assert.True(t, res.AlreadyPosted)
		assert.Equal(t, int64(2580), order(t, db, tr).PaidAmount)
		assert.InDelta(t, float64(2), metric(t, h, "paycb_ledger_duplicate_postings_total"), 0)
	})
}

// cumulativeChannels are the registered channels whose refunds are
// reported cumulatively (channels.Spec.Refunds), in the registry's order.
func cumulativeChannels() []channels.Channel {
	var out []channels.Channel
	for _, spec := range channels.All() {
		if spec.Cumulative() {
			out = append(out, spec.Code)
		}
	}
	return out
}
