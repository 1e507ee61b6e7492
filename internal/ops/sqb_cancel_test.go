package ops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/pkg/statements"
)

// sqbOrderLine is a Shouqianba query response line for tr in status.
func sqbOrderLine(tr channelstest.Trade, net int64, status string) statements.Line {
	return statements.Line{
		Kind: statements.KindOrder, TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo,
		Amount: tr.Total, SettledAmount: net, Status: status, Time: tr.PaidAt.Add(30 * time.Minute),
	}
}

// TestReconcileStatementSQBCancel: a CANCELED order says nothing about
// whether it was paid and nets the trade to zero, so reconcile never calls
// its payment missing_in_ledger, reports a trade whose postings do not net
// to zero, and --publish-missing never publishes a payment for it.
func TestReconcileStatementSQBCancel(t *testing.T) {
	w := newWorld(t)
	k := mustKafka(t, 1)
	sqb, d := channels.SQB, channelstest.Delivery{}
	const tenant = 81
	unpaid, paid, unreversed, refunded := trade(sqb, tenant, 1), trade(sqb, tenant, 2), trade(sqb, tenant, 3), trade(sqb, tenant, 4)
	w.post(channelstest.SQBCancel(unpaid, d)) // moved nothing
	w.post(channelstest.SQBPayment(paid, d))
	w.post(channelstest.SQBCancel(paid, d)) // reversed the payment
	w.post(channelstest.SQBPayment(unreversed, d))
	w.post(channelstest.SQBPayment(refunded, d))
	w.post(channelstest.SQBRefund(refunded, channelstest.Refund{No: "S-1", Cumulative: 1000, At: refunded.PaidAt.Add(time.Hour)}, d))
	w.importLines(tenant, sqb,
		sqbOrderLine(unpaid, 0, channels.SQBCanceled),
		sqbOrderLine(paid, 0, channels.SQBCanceled),
		sqbOrderLine(unreversed, 0, channels.SQBCanceled), // its cancel never reached the ledger
		sqbOrderLine(refunded, refunded.Total-1000, channels.SQBPartialRefunded),
	)
	rep, pub := publishDay(t, w, k, tenant, sqb)
	assert.Equal(t, []string{ops.StatementAmountMismatch + " " + unreversed.TradeNo + " "}, categories(rep),
		"the unpaid cancelled order is not missing_in_ledger; only the trade that does not net to zero is reported")
	if assert.Len(t, rep.Items, 1) {
		assert.Equal(t, unreversed.Total, *rep.Items[0].LedgerAmount)
		assert.Zero(t, *rep.Items[0].StatementAmount)
	}
	assert.Empty(t, pub.Published)

	// A report that still calls a CANCELED order's payment missing (made
	// before CANCELED was read this way) publishes nothing for it.
	old := rep
	old.Items = []ops.StatementItem{{
		Category: ops.StatementMissingInLedger, TradeNo: unpaid.TradeNo, StatementAmount: ptr(unpaid.Total), LineNo: 2,
		Key: "SQB:" + unpaid.TradeNo + ":PAYMENT_RECEIVED",
	}}
	pub, err := ops.PublishMissing(context.Background(), w.db, k, old, testSigning, time.Now())
	require.NoError(t, err)
	assert.Empty(t, pub.Published, "no payment is ever published for a CANCELED order")
	require.Len(t, pub.NeedsQuery, 1)
	assert.Contains(t, pub.NeedsQuery[0].Reason, "CANCELED")
	_, n := topicEvents(t, w, k)
	assert.Zero(t, n, "nothing reached the topic")
}

// TestReconcileSQBUnpaidCancel: settlement's reconcile does not report an
// order known only from an unpaid cancel as pending payment, however long
// it stays; an order known only from refunds still is.
func TestReconcileSQBUnpaidCancel(t *testing.T) {
	w := newWorld(t)
	sqb, d := channels.SQB, channelstest.Delivery{}
	const tenant = 82
	cancelled, refundedOnly := trade(sqb, tenant, 1), trade(sqb, tenant, 2)
	w.settle(channelstest.SQBCancel(cancelled, d))
	w.settle(channelstest.SQBRefund(refundedOnly, channelstest.Refund{No: "S-1", Cumulative: 500}, d))
	later := time.Now().Add(72 * time.Hour)
	rep, err := settlement.Reconcile(context.Background(), w.db, settlement.ReconcileOptions{
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
	w := newWorld(t)
	ctx := context.Background()
	tr := trade(channels.SQB, 83, 1)
	q := ops.TradeQuery{TenantID: tr.TenantID, Channel: channels.SQB, TradeNo: tr.TradeNo}
	w.settle(channelstest.SQBCancel(tr, channelstest.Delivery{}))
	h, err := ops.Trade(ctx, w.db, q)
	require.NoError(t, err)
	require.NotNil(t, h.Cancel)
	assert.True(t, h.Cancel.PendingPayment)
	assert.Zero(t, h.Cancel.Reversed)
	assert.Contains(t, h.Cancel.Effect, "moved nothing, pending a payment")
	assert.True(t, hasTimeline(h, "cancel", "pending a payment"), "%v", h.Timeline)

	w.settle(channelstest.SQBPayment(tr, channelstest.Delivery{}))
	h, err = ops.Trade(ctx, w.db, q)
	require.NoError(t, err)
	require.NotNil(t, h.Cancel)
	assert.False(t, h.Cancel.PendingPayment)
	assert.Equal(t, tr.Total, h.Cancel.Reversed)
	assert.Equal(t, "POSTED", h.Cancel.Outcome)
	assert.Contains(t, h.Cancel.Effect, "reversed 2580 fen")

	other := trade(channels.SQB, 83, 2)
	w.settle(channelstest.SQBPayment(other, channelstest.Delivery{}))
	h, err = ops.Trade(ctx, w.db, ops.TradeQuery{TenantID: other.TenantID, Channel: channels.SQB, TradeNo: other.TradeNo})
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

func ptr(v int64) *int64 { return &v }
