package ops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestReconcileSQBUnpaidCancel: settlement's reconcile does not report an
// order known only from an unpaid cancel as pending payment, however long
// it stays; an order known only from refunds still is.
func TestReconcileSQBUnpaidCancel(t *testing.T) {
	w := ledgertest.New(t)
	sqb, d := channels.SQB, channelstest.Delivery{}
	const tenant = 82
	cancelled, refundedOnly := trade(sqb, tenant, 1), trade(sqb, tenant, 2)
	w.Settle(channelstest.SQBCancel(cancelled, d))
	w.Settle(channelstest.SQBRefund(refundedOnly, channelstest.Refund{No: "S-1", Cumulative: 500}, d))
	later := time.Now().Add(72 * time.Hour)
	rep, err := settlement.Reconcile(context.Background(), w.DB, settlement.ReconcileOptions{
		Checks: []string{settlement.CheckPendingPayment}, Now: func() time.Time { return later },
	})
	require.NoError(t, err)
	var trades []string
	for _, dsc := range rep.Discrepancies {
		if dsc.TenantID == tenant {
			trades = append(trades, dsc.TradeNo)
		}
	}
	assert.Equal(t, []string{refundedOnly.TradeNo}, trades)
}

// TestTradeShowsTheCancel: consumer trade shows a Shouqianba cancel and its
// effect, before and after a late payment.
func TestTradeShowsTheCancel(t *testing.T) {
	w := ledgertest.New(t)
	ctx := context.Background()
	tr := trade(channels.SQB, 83, 1)
	q := deadletters.TradeQuery{TenantID: tr.TenantID, Channel: channels.SQB, TradeNo: tr.TradeNo}
	w.Settle(channelstest.SQBCancel(tr, channelstest.Delivery{}))
	h, err := ops.Trade(ctx, w.DB, q)
	require.NoError(t, err)
	require.NotNil(t, h.Cancel)
	assert.True(t, h.Cancel.PendingPayment)
	assert.Zero(t, h.Cancel.Reversed)
	assert.Contains(t, h.Cancel.Effect, "moved nothing, pending a payment")
	assert.True(t, hasTimeline(h, "cancel", "pending a payment"), "%v", h.Timeline)

	w.Settle(channelstest.SQBPayment(tr, channelstest.Delivery{}))
	h, err = ops.Trade(ctx, w.DB, q)
	require.NoError(t, err)
	require.NotNil(t, h.Cancel)
	assert.False(t, h.Cancel.PendingPayment)
	assert.Equal(t, tr.Total, h.Cancel.Reversed)
	assert.Equal(t, "POSTED", h.Cancel.Outcome)
	assert.Contains(t, h.Cancel.Effect, "reversed 2580 fen")

	other := trade(channels.SQB, 83, 2)
	w.Settle(channelstest.SQBPayment(other, channelstest.Delivery{}))
	h, err = ops.Trade(ctx, w.DB, deadletters.TradeQuery{TenantID: other.TenantID, Channel: channels.SQB, TradeNo: other.TradeNo})
	require.NoError(t, err)
	assert.Nil(t, h.Cancel, "no cancel, none shown")
}

func hasTimeline(h ops.TradeHistory, what, substr string) bool {
	for _, e := range h.Timeline {
		if e.What == what && strings.Contains(e.Summary, substr) {
			return true
		}
	}
	return false
}

func trade(ch channels.Channel, tenant int64, seq int) channelstest.Trade {
	tr := channelstest.NewTrade(ch, seq)
	tr.TenantID = tenant
	return tr
}
