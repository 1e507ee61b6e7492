package settlement_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestDecide: the exported decision moves an order through a payment,
// cumulative refunds (one that moves nothing, one over the total) and a
// second payment, as Settle does on the locked row.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := now.Add(-time.Hour)
	ord := settlement.Order{
		TenantID: 1001, Channel: channels.Alipay, TradeNo: "T1", Amount: 1000, Currency: "CNY",
		Status: settlement.OrderPendingPayment,
	}
	ev := func(typ idempotent.EventType, cumulative int64) channels.Event {
		return channels.Event{
			TenantID: 1001, Channel: channels.Alipay, Type: typ, TradeNo: "T1", OrderTotal: 1000,
			CumulativeRefunded: cumulative, Currency: "CNY", OccurredAt: at,
		}
	}
	steps := []struct {
		name    string
		ev      channels.Event
		outcome idempotent.Outcome
		amount  int64
		write   bool
		status  settlement.OrderStatus
	}{
		{"payment", ev(idempotent.PaymentReceived, 0), idempotent.OutcomePosted, 1000, true, settlement.OrderPaid},
		{"cumulative refund", ev(idempotent.RefundSucceeded, 300), idempotent.OutcomePosted, 300, true, settlement.OrderPartiallyRefunded},
		{"a lower cumulative moves nothing", ev(idempotent.RefundSucceeded, 200), idempotent.OutcomeNoMoney, 0, true, settlement.OrderPartiallyRefunded},
		{"over the total", ev(idempotent.RefundSucceeded, 1001), idempotent.OutcomeOverRefund, 0, false, settlement.OrderPartiallyRefunded},
		{"the rest", ev(idempotent.RefundSucceeded, 1000), idempotent.OutcomePosted, 700, true, settlement.OrderRefunded},
	}
	for _, st := range steps {
		d, err := settlement.Decide(ord, st.ev, now)
		require.NoError(t, err, st.name)
		assert.Equal(t, st.outcome, d.Outcome, st.name)
		assert.Equal(t, st.amount, d.Amount, st.name)
		assert.Equal(t, st.write, d.Write, st.name)
		assert.Zero(t, d.Reversal, st.name)
		if d.Write {
			ord = d.Order
		}
		assert.Equal(t, st.status, ord.Status, st.name)
	}
	assert.Equal(t, int64(1000), ord.RefundedAmount)
	_, err := settlement.Decide(ord, ev(idempotent.PaymentReceived, 0), now)
	require.Error(t, err, "a second payment on a paid order")
	_, err = settlement.Decide(ord, ev("CHARGEBACK", 0), now)
	require.ErrorIs(t, err, settlement.ErrInvalidEvent)
}
