package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestShouqianbaCancelBeforeItsPaymentThroughTheWorker: a CANCELED order
// nets its trade to zero whatever the order its callbacks arrive in.
// Through the worker, on one partition so that a cancel and its payment
// share batches as often as not: trades cancelled before their payment is
// reported (the payment then posts with its reversal), cancelled after it
// (the cancel reverses it), and cancelled without ever being paid (nothing
// posted), each message delivered twice. Every order ends with nothing owed
// to the merchant, merchant_payable never negative for the unpaid ones,
// and the invariant checker clean.
func TestShouqianbaCancelBeforeItsPaymentThroughTheWorker(t *testing.T) {
	const trades = 30
	h := newHarness(t, 1)
	s := demo.Stream{Paid: map[int64]int64{}, Refunded: map[int64]int64{}}
	type kind int
	const (
		cancelFirst kind = iota
		cancelAfter
		neverPaid
	)
	kinds := map[string]kind{}
	var all []channelstest.Trade
	for i := range trades {
		tr := channelstest.NewTrade(channels.SQB, 61_000+i)
		k := kind(i % 3)
		kinds[tr.TradeNo] = k
		all = append(all, tr)
		pay := channelstest.SQBPayment(tr, channelstest.Delivery{})
		cancel := channelstest.SQBCancel(tr, channelstest.Delivery{})
		var values [][]byte
		switch k {
		case cancelFirst:
			values = [][]byte{cancel, pay, cancel, pay}
		case cancelAfter:
			values = [][]byte{pay, cancel, pay, cancel}
		case neverPaid:
			values = [][]byte{cancel, cancel}
		}
		for _, v := range values {
			s.Messages = append(s.Messages, demo.Message{Key: []byte("SQB:" + tr.TradeNo), Value: v})
		}
		s.Trades++
		if k == neverPaid {
			s.Events++
			continue
		}
		s.Events += 2
		s.Paid[tr.TenantID] += tr.Total
		s.Refunded[tr.TenantID] += tr.Total
	}
	h.produce(s.Messages)
	h.start(nil)
	h.waitConsumed(2 * time.Minute)
	h.checkStream(s)

	ctx := context.Background()
	for _, tr := range all {
		o, err := settlement.GetOrder(ctx, h.db, tr.TenantID, tr.Channel, tr.TradeNo)
		require.NoError(t, err, tr.TradeNo)
		if kinds[tr.TradeNo] == neverPaid {
			assert.Equal(t, settlement.OrderPendingPayment, o.Status, tr.TradeNo)
			assert.Zero(t, o.RefundedAmount, "%s: no refund without a payment", tr.TradeNo)
			continue
		}
		assert.Equal(t, settlement.OrderRefunded, o.Status, tr.TradeNo)
		assert.Equal(t, tr.Total, o.PaidAmount, tr.TradeNo)
		assert.Equal(t, tr.Total, o.RefundedAmount, tr.TradeNo)
	}
	bals, err := settlement.Balances(ctx, h.db, all[0].TenantID)
	require.NoError(t, err)
	for _, b := range bals {
		if b.Account == settlement.AccountMerchantPayable {
			assert.Equal(t, b.Credit, b.Debit, "%s nets to zero", b.TradeNo)
			assert.NotEqual(t, neverPaid, kinds[b.TradeNo], "%s: an unpaid cancelled order posts nothing", b.TradeNo)
		}
	}
}
