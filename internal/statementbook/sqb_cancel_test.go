package statementbook_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
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
	sq, d := channels.SQB, channelstest.Delivery{}
	const tenant = 81
	unpaid, paid, unreversed, refunded := trade(sq, tenant, 1), trade(sq, tenant, 2), trade(sq, tenant, 3), trade(sq, tenant, 4)
	w.post(channelstest.SQBCancel(unpaid, d)) // moved nothing
	w.post(channelstest.SQBPayment(paid, d))
	w.post(channelstest.SQBCancel(paid, d)) // reversed the payment
	w.post(channelstest.SQBPayment(unreversed, d))
	w.post(channelstest.SQBPayment(refunded, d))
	w.post(channelstest.SQBRefund(refunded, channelstest.Refund{No: "S-1", Cumulative: 1000, At: refunded.PaidAt.Add(time.Hour)}, d))
	w.importLines(tenant, sq,
		sqbOrderLine(unpaid, 0, sqb.Canceled),
		sqbOrderLine(paid, 0, sqb.Canceled),
		sqbOrderLine(unreversed, 0, sqb.Canceled), // its cancel never reached the ledger
		sqbOrderLine(refunded, refunded.Total-1000, sqb.PartialRefunded),
	)
	rep, pub := publishDay(t, w, k, tenant, sq)
	assert.Equal(t, []string{statementbook.StatementAmountMismatch + " " + unreversed.TradeNo + " "}, categories(rep),
		"the unpaid cancelled order is not missing_in_ledger; only the trade that does not net to zero is reported")
	if assert.Len(t, rep.Items, 1) {
		assert.Equal(t, unreversed.Total, *rep.Items[0].LedgerAmount)
		assert.Zero(t, *rep.Items[0].StatementAmount)
	}
	assert.Empty(t, pub.Published)

	// A report that still calls a CANCELED order's payment missing (made
	// before CANCELED was read this way) publishes nothing for it.
	old := rep
	old.Items = []statementbook.StatementItem{{
		Category: statementbook.StatementMissingInLedger, TradeNo: unpaid.TradeNo, StatementAmount: ptr(unpaid.Total), LineNo: 2,
		Key: "SQB:" + unpaid.TradeNo + ":PAYMENT_RECEIVED",
	}}
	pub, err := statementbook.PublishMissing(context.Background(), w.DB, input(k), old, testSigning, time.Now())
	require.NoError(t, err)
	assert.Empty(t, pub.Published, "no payment is ever published for a CANCELED order")
	require.Len(t, pub.NeedsQuery, 1)
	assert.Contains(t, pub.NeedsQuery[0].Reason, "CANCELED")
	_, n := topicEvents(t, w, k)
	assert.Zero(t, n, "nothing reached the topic")
}

func ptr(v int64) *int64 { return &v }
