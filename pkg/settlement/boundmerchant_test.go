package settlement_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// TestPaymentRecordsItsBoundMerchant: the merchant the worker's check
// passed a payment for (Event.BoundMerchant) is recorded on the order row
// when the payment settles, alone or in the set-based batch, and a refund
// settled before or after it changes nothing of it; TradeMerchant reads
// it, with whether a payment is posted.
func TestPaymentRecordsItsBoundMerchant(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		const terminal = "01939202039923029"
		claim := func(t *testing.T, value []byte, bound string, offset int64) channels.Event {
			t.Helper()
			ev := h.decode(t, value)
			ev.BoundMerchant = bound
			require.Equal(t, idempotent.Acquired, h.acquire(t, ev, offset).Kind)
			return ev
		}

		alone := newSQBOrder(420_001, 920_001, 1000)
		early := claim(t, alone.refund("R1", 300, 1, 0), "", 1) // a refund before its payment names none
		_, err := h.svc.Settle(ctx, early)
		require.NoError(t, err)
		m, paid, err := h.svc.TradeMerchant(ctx, alone.trade.TenantID, channels.SQB, alone.trade.TradeNo)
		require.NoError(t, err)
		assert.Empty(t, m)
		assert.False(t, paid)
		_, err = h.svc.Settle(ctx, claim(t, alone.paid(0), terminal, 2))
		require.NoError(t, err)
		_, err = h.svc.Settle(ctx, claim(t, alone.refund("R2", 500, 2, 0), "", 3))
		require.NoError(t, err)
		m, paid, err = h.svc.TradeMerchant(ctx, alone.trade.TenantID, channels.SQB, alone.trade.TradeNo)
		require.NoError(t, err)
		assert.Equal(t, terminal, m)
		assert.True(t, paid)
		assert.Equal(t, int64(500), order(t, db, alone.trade).RefundedAmount)

		// The set-based path: nine payments, one of them checked.
		batched := newSQBOrder(420_002, 920_002, 2580)
		evs := []channels.Event{claim(t, batched.paid(0), terminal, 10)}
		for i := range 8 {
			tr := channelstest.NewTrade(channels.WeChat, 920_100+i)
			tr.TenantID = 420_002
			evs = append(evs, claim(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), "", int64(11+i)))
		}
		res, err := h.svc.SettleBatch(ctx, evs)
		require.NoError(t, err)
		for _, r := range res {
			require.Equal(t, idempotent.OutcomePosted, r.Outcome)
		}
		assert.Equal(t, terminal, order(t, db, batched.trade).BoundMerchantID)
		other := channelstest.NewTrade(channels.WeChat, 920_100)
		other.TenantID = 420_002
		assert.Empty(t, order(t, db, other).BoundMerchantID, "unchecked: nothing recorded")

		m, paid, err = h.svc.TradeMerchant(ctx, 420_003, channels.SQB, "7890000000000001")
		require.NoError(t, err)
		assert.Empty(t, m, "no order row")
		assert.False(t, paid)
		mustCheck(t, db)
	})
}
