package settlement_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func request(tr channelstest.Trade, no string, amount int64) settlement.RefundRequest {
	return settlement.RefundRequest{TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: no, Amount: amount}
}

func registration(tb testing.TB, h *harness, tr channelstest.Trade, no string) settlement.Registration {
	tb.Helper()
	reg, err := h.svc.GetRegistration(context.Background(), tr.TenantID, tr.Channel, tr.TradeNo, no)
	require.NoError(tb, err)
	return reg
}

// applyStatus decodes a real WeChat REFUND.<status> notification and applies
// it, as the worker does with the ignored result.
func applyStatus(tb testing.TB, h *harness, tr channelstest.Trade, r channelstest.Refund, status string, attempt int) {
	tb.Helper()
	res, err := h.dec.Decode(channelstest.WeChatRefund(tr, r, status, channelstest.Delivery{Attempt: attempt}))
	require.NoError(tb, err)
	require.True(tb, res.Ignored)
	require.NoError(tb, h.svc.ApplyRefundStatus(context.Background(), res.Event.TenantID, res.Event.Channel,
		res.Event.TradeNo, res.Event.RefundNo, res.RefundStatus))
}

func TestRegisterRefund(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		paid := func(t *testing.T, ch channels.Channel, seq int) channelstest.Trade {
			t.Helper()
			tr := channelstest.NewTrade(ch, seq)
			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), int64(seq))
			return tr
		}

		t.Run("invalid requests are refused before the database", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.WeChat, 1)
			for name, r := range map[string]settlement.RefundRequest{
				"zero amount":      request(tr, "R1", 0),
				"negative amount":  request(tr, "R1", -5),
				"no refund number": request(tr, "", 5),
				"space in number":  request(tr, "R 1", 5),
				"unknown channel":  {TenantID: 1001, Channel: "PAYPAL", TradeNo: tr.TradeNo, RefundNo: "R1", Amount: 5},
				"no tenant":        {Channel: channels.WeChat, TradeNo: tr.TradeNo, RefundNo: "R1", Amount: 5},
				"cancel's number":  {TenantID: 1001, Channel: channels.SQB, TradeNo: "7893259247405832", RefundNo: sqb.CancelRefundNo, Amount: 5},
			} {
				t.Run(name, func(t *testing.T) {
					_, err := h.svc.RegisterRefund(ctx, r)
					require.ErrorIs(t, err, settlement.ErrInvalidRequest)
				})
			}
		})

		t.Run("a trade with no posted payment cannot be registered against", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.Alipay, 10)
			_, err := h.svc.RegisterRefund(ctx, request(tr, "R1", 100))
			require.ErrorIs(t, err, settlement.ErrNotPaid, "no order row")
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R0", 0, 100, 1), channelstest.Delivery{}), 10)
			_, err = h.svc.RegisterRefund(ctx, request(tr, "R1", 100))
			require.ErrorIs(t, err, settlement.ErrNotPaid, "known only from a refund")
		})

		t.Run("registering the same refund number again returns the registration", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 20)
			first, err := h.svc.RegisterRefund(ctx, request(tr, "RF-1", 500))
			require.NoError(t, err)
			assert.False(t, first.Existing)
			assert.Equal(t, settlement.RegistrationRegistered, first.Status)
			require.NotNil(t, first.Key)
			assert.Equal(t, "WECHAT:"+tr.TradeNo+":REFUND_SUCCEEDED:RF-1", *first.Key)

			again, err := h.svc.RegisterRefund(ctx, request(tr, "RF-1", 500))
			require.NoError(t, err)
			assert.True(t, again.Existing)
			assert.Equal(t, first.ID, again.ID)
			assert.Equal(t, int64(500), again.Amount)

			other, err := h.svc.RegisterRefund(ctx, request(tr, "rf-1", 500))
			require.NoError(t, err, "refund numbers are case-sensitive")
			assert.NotEqual(t, first.ID, other.ID)

			reused, err := h.svc.RegisterRefund(ctx, request(tr, "RF-1", 600))
			require.ErrorIs(t, err, settlement.ErrRefundNoReused)
			assert.Equal(t, first.ID, reused.ID, "the existing registration comes back with the error")
		})

		t.Run("a registration above the refundable remainder is refused", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 30) // 2580
			_, err := h.svc.RegisterRefund(ctx, request(tr, "R1", 2000))
			require.NoError(t, err)
			_, err = h.svc.RegisterRefund(ctx, request(tr, "R2", 581))
			require.ErrorIs(t, err, settlement.ErrExceedsRefundable, "open registrations count")
			_, err = h.svc.RegisterRefund(ctx, request(tr, "R2", 580))
			require.NoError(t, err)
			// The channel refunds R1: it moves from open to refunded; still nothing left.
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 2000, 0, 1), channelstest.Delivery{}), 31)
			_, err = h.svc.RegisterRefund(ctx, request(tr, "R3", 1))
			require.ErrorIs(t, err, settlement.ErrExceedsRefundable)
			// An unregistered refund counts too.
			tr2 := paid(t, channels.WeChat, 32)
			h.deliver(t, channelstest.RefundEnvelope(tr2, refundAt(tr2, "X", 2500, 0, 1), channelstest.Delivery{}), 33)
			_, err = h.svc.RegisterRefund(ctx, request(tr2, "R1", 81))
			require.ErrorIs(t, err, settlement.ErrExceedsRefundable)
			_, err = h.svc.RegisterRefund(ctx, request(tr2, "R1", 80))
			require.NoError(t, err)
		})

		t.Run("concurrent registrations: exactly the ones that fit succeed", func(t *testing.T) {
			tr := paid(t, channels.SQB, 40) // 2580: five of 500 fit, the sixth does not
			const n = 10
			errs := make([]error, n)
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range n {
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					errs[i] = retry(func() error {
						_, err := h.svc.RegisterRefund(ctx, request(tr, fmt.Sprintf("C%d", i), 500))
						return err
					})
				}()
			}
			start.Done()
			done.Wait()
			var ok, refused int
			for _, err := range errs {
				if err == nil {
					ok++
					continue
				}
				require.ErrorIs(t, err, settlement.ErrExceedsRefundable)
				refused++
			}
			assert.Equal(t, 5, ok)
			assert.Equal(t, 5, refused)
			var sum int64
			require.NoError(t, db.NewSelect().Table("ss_refund_request").ColumnExpr("COALESCE(SUM(amount), 0)").
				Where("channel_trade_no = ?", tr.TradeNo).Scan(ctx, &sum))
			assert.Equal(t, int64(2500), sum)
		})

		t.Run("a refund callback moves its registration to SUCCEEDED and cross-checks the amount", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 50)
			_, err := h.svc.RegisterRefund(ctx, request(tr, "RF-1", 1000))
			require.NoError(t, err)
			_, err = h.svc.RegisterRefund(ctx, request(tr, "RF-2", 300))
			require.NoError(t, err)
			amountBefore := metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "amount")

			d := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-1", 1000, 0, 1), channelstest.Delivery{}), 50)
			reg := registration(t, h, tr, "RF-1")
			assert.Equal(t, settlement.RegistrationSucceeded, reg.Status)
			require.NotNil(t, reg.Key)
			assert.Equal(t, string(d.ev.Key), *reg.Key)
			assert.InDelta(t, amountBefore, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "amount"), 0)

			d = h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-2", 400, 0, 2), channelstest.Delivery{}), 51)
			assert.Equal(t, int64(400), d.result.Amount, "the channel's amount is posted")
			assert.Equal(t, settlement.RegistrationSucceeded, registration(t, h, tr, "RF-2").Status)
			assert.InDelta(t, amountBefore+1, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "amount"), 0)

			// A redelivery changes nothing.
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-2", 400, 0, 2), channelstest.Delivery{Attempt: 1}), 52)
			assert.InDelta(t, amountBefore+1, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "amount"), 0)
		})

		t.Run("ABNORMAL and CLOSED update the registration conditionally", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 60)
			_, err := h.svc.RegisterRefund(ctx, request(tr, "RF-A", 2000))
			require.NoError(t, err)
			r := refundAt(tr, "RF-A", 2000, 0, 1)

			applyStatus(t, h, tr, r, "ABNORMAL", 0)
			assert.Equal(t, settlement.RegistrationAbnormal, registration(t, h, tr, "RF-A").Status)
			applyStatus(t, h, tr, r, "ABNORMAL", 1)
			assert.Equal(t, settlement.RegistrationAbnormal, registration(t, h, tr, "RF-A").Status)
			_, err = h.svc.RegisterRefund(ctx, request(tr, "RF-B", 581))
			require.ErrorIs(t, err, settlement.ErrExceedsRefundable, "an ABNORMAL refund may still succeed")

			applyStatus(t, h, tr, r, "CLOSED", 0)
			assert.Equal(t, settlement.RegistrationClosed, registration(t, h, tr, "RF-A").Status)
			applyStatus(t, h, tr, r, "ABNORMAL", 2)
			assert.Equal(t, settlement.RegistrationClosed, registration(t, h, tr, "RF-A").Status, "CLOSED is final")
			_, err = h.svc.RegisterRefund(ctx, request(tr, "RF-B", 2580))
			require.NoError(t, err, "a closed registration no longer holds the remainder")

			// A status for an unknown registration is a no-op.
			applyStatus(t, h, tr, refundAt(tr, "NOPE", 1, 0, 1), "CLOSED", 0)

			err = h.svc.ApplyRefundStatus(ctx, tr.TenantID, tr.Channel, tr.TradeNo, "RF-B", channels.RefundSuccess)
			require.ErrorIs(t, err, settlement.ErrInvalidRequest, "successes are settled, not applied")

			// A success for a CLOSED registration is posted (the channel
			// says the money moved) and flagged; the registration stays CLOSED.
			closedBefore := metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "closed")
			_, err = h.svc.RegisterRefund(ctx, request(channelstest.NewTrade(channels.WeChat, 61), "X", 1))
			require.ErrorIs(t, err, settlement.ErrNotPaid)
			tr3 := paid(t, channels.WeChat, 62)
			_, err = h.svc.RegisterRefund(ctx, request(tr3, "RF-C", 100))
			require.NoError(t, err)
			applyStatus(t, h, tr3, refundAt(tr3, "RF-C", 100, 0, 1), "CLOSED", 0)
			d := h.deliver(t, channelstest.RefundEnvelope(tr3, refundAt(tr3, "RF-C", 100, 0, 1), channelstest.Delivery{}), 63)
			assert.Equal(t, idempotent.OutcomePosted, d.result.Outcome)
			assert.Equal(t, settlement.RegistrationClosed, registration(t, h, tr3, "RF-C").Status)
			assert.InDelta(t, closedBefore+1, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "closed"), 0)
		})

		t.Run("an unregistered refund is posted and counted", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 70)
			before := metric(t, h, "paycb_refund_unregistered_total")
			d := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "WHO", 100, 0, 1), channelstest.Delivery{}), 70)
			assert.Equal(t, idempotent.OutcomePosted, d.result.Outcome)
			assert.InDelta(t, before+1, metric(t, h, "paycb_refund_unregistered_total"), 0)
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "WHO", 100, 0, 1), channelstest.Delivery{Attempt: 1}), 71)
			assert.InDelta(t, before+1, metric(t, h, "paycb_refund_unregistered_total"), 0, "a duplicate is not counted again")
			_, err := h.svc.GetRegistration(ctx, tr.TenantID, tr.Channel, tr.TradeNo, "WHO")
			require.ErrorIs(t, err, settlement.ErrRegistrationNotFound)
		})

		t.Run("cumulative channels cross-check the refunded total against the registrations", func(t *testing.T) {
			h.svc.SetRefundsPreregistered(true) // a total above the registrations counts only then
			defer h.svc.SetRefundsPreregistered(false)
			for i, ch := range cumulativeChannels() {
				tr := paid(t, ch, 80+i)
				for _, r := range []settlement.RefundRequest{request(tr, "RF-0", 300), request(tr, "RF-1", 200)} {
					_, err := h.svc.RegisterRefund(ctx, r)
					require.NoError(t, err)
				}
				before := metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "cumulative")
				// Out of order: the second refund's cumulative covers the first.
				h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-1", 0, 500, 2), channelstest.Delivery{}), 80)
				assert.Equal(t, settlement.RegistrationSucceeded, registration(t, h, tr, "RF-1").Status)
				assert.Equal(t, settlement.RegistrationRegistered, registration(t, h, tr, "RF-0").Status)
				d := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-0", 0, 300, 1), channelstest.Delivery{}), 81)
				assert.Equal(t, idempotent.OutcomeNoMoney, d.result.Outcome)
				assert.Equal(t, settlement.RegistrationSucceeded, registration(t, h, tr, "RF-0").Status, "its money was carried by RF-1")
				assert.InDelta(t, before, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "cumulative"), 0, ch)

				// A refund beyond every registration.
				h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-9", 0, 900, 3), channelstest.Delivery{}), 82)
				assert.InDelta(t, before+1, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "cumulative"), 0, ch)

				// Refunds not expected preregistered: an unregistered
				// refund beyond the registrations is no mismatch.
				h.svc.SetRefundsPreregistered(false)
				d = h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-10", 0, 1000, 4), channelstest.Delivery{}), 83)
				require.Equal(t, idempotent.OutcomePosted, d.result.Outcome, ch)
				assert.InDelta(t, before+1, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", "cumulative"), 0, ch)
				h.svc.SetRefundsPreregistered(true)
			}
			mustCheck(t, db)
		})
	})
}
