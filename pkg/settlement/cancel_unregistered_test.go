package settlement_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestSQBCancelIsNotAnUnregisteredRefund: with refunds expected to be
// pre-registered, a Shouqianba cancel (refund number CANCEL), which no
// operator registers (it is the end of /upay/v2/cancel or a same-day
// revoke, not a refund request), is never refund_unregistered, neither in
// reconcile nor in settlement's count and log, whether it reversed a
// payment, reversed one that came after it, or moved nothing. A real
// refund of the same trade that was not registered is still reported, and
// a registered one is not.
func TestSQBCancelIsNotAnUnregisteredRefund(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		h.svc.SetRefundsPreregistered(true)
		const tenant = 410_001

		// Paid, then cancelled: the cancel reverses the payment.
		paidCancelled := newSQBOrder(tenant, 910_001, 1000)
		h.deliver(t, paidCancelled.paid(0), 1)
		require.Equal(t, idempotent.OutcomePosted, h.deliver(t, paidCancelled.cancel(0), 2).result.Outcome)

		// Cancelled, never paid: the cancel moves nothing.
		unpaid := newSQBOrder(tenant, 910_002, 2580)
		require.Equal(t, idempotent.OutcomeNoMoney, h.deliver(t, unpaid.cancel(0), 3).result.Outcome)

		// Cancelled, then the payment: reversed at once under the cancel's key.
		latePaid := newSQBOrder(tenant, 910_003, 500)
		h.deliver(t, latePaid.cancel(0), 4)
		h.deliver(t, latePaid.paid(0), 5)
		require.Equal(t, idempotent.OutcomePosted, claimOutcome(t, h, tenant, latePaid.cancelKey(t)))

		// Paid, a registered refund, an unregistered one, then the cancel
		// reverses the rest; an unregistered refund reported after the
		// cancel moves nothing and is reported too.
		mixed := newSQBOrder(tenant, 910_004, 1000)
		h.deliver(t, mixed.paid(0), 6)
		_, err := h.svc.RegisterRefund(ctx, settlement.RefundRequest{
			TenantID: tenant, Channel: channels.SQB, TradeNo: mixed.trade.TradeNo, RefundNo: "REG-1", Amount: 100,
		})
		require.NoError(t, err)
		require.Equal(t, idempotent.OutcomePosted, h.deliver(t, mixed.refund("REG-1", 100, 1, 0), 7).result.Outcome)
		require.Equal(t, idempotent.OutcomePosted, h.deliver(t, mixed.refund("WHO-1", 300, 2, 0), 8).result.Outcome)
		d := h.deliver(t, mixed.cancel(0), 9)
		require.Equal(t, idempotent.OutcomePosted, d.result.Outcome)
		require.Equal(t, int64(700), d.result.Amount)
		require.Equal(t, idempotent.OutcomeNoMoney, h.deliver(t, mixed.refund("WHO-2", 800, 5, 0), 10).result.Outcome)

		rep, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{
			Checks: []string{settlement.CheckRefundUnregistered}, RefundsPreregistered: true,
		})
		require.NoError(t, err)
		var found []string
		for _, disc := range rep.Discrepancies {
			if disc.TenantID == tenant {
				found = append(found, disc.TradeNo+"/"+disc.RefundNo)
			}
		}
		assert.Equal(t, []string{
			mixed.trade.TradeNo + "/WHO-1",
			mixed.trade.TradeNo + "/WHO-2",
		}, found, "only the real refunds without a registration; never a cancel")
		assert.InDelta(t, 2, metric(t, h, "paycb_refund_unregistered_total"), 0,
			"settlement counts the two unregistered refunds, not the four cancels")
	})
}
