package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func TestHostileValuesAreDataOrRefusedAndTenantsNeverMix(t *testing.T) {
	h := newHarness(t, 3)
	ctx := context.Background()

	// SQL metacharacters in every identifier the database sees.
	sqlish := channelstest.NewTrade(channels.SQB, 1)
	sqlish.TradeNo = `78'";--\%_x`
	sqlish.MerchantOrderNo = `POS'); DELETE FROM ss_ledger_entry; --`
	sqlishAli := channelstest.NewTrade(channels.Alipay, 2)
	sqlishAli.TradeNo = `2024'OR'1'='1`
	sqlishAli.MerchantOrderNo = `\'\"\\%_`

	// The same trade number and refund numbers under two tenants.
	mine := channelstest.NewTrade(channels.WeChat, 3)
	theirs := mine
	theirs.TenantID = 1002
	theirs.Total = mine.Total * 2

	// Oversized values are refused, never truncated into someone else's key.
	longTrade := channelstest.NewTrade(channels.SQB, 4)
	longTrade.TradeNo = strings.Repeat("9", 65)
	hugeOrderNo := channelstest.NewTrade(channels.Alipay, 5)
	hugeOrderNo.MerchantOrderNo = strings.Repeat("M", 10_000)
	hugeBody := channelstest.Envelope(1001, channels.SQB, `{"sn":"`+strings.Repeat("x", 70_000)+`"}`, time.Now())

	msgs := []demo.Message{
		{Key: []byte("a"), Value: channelstest.SQBPayment(sqlish, channelstest.Delivery{})},
		{Key: []byte("a"), Value: channelstest.SQBRefund(sqlish, channelstest.Refund{No: `r'1;--`, Amount: 100, Cumulative: 100}, channelstest.Delivery{})},
		{Key: []byte("b"), Value: channelstest.AlipayPayment(sqlishAli, channelstest.Delivery{})},
		{Key: []byte("c"), Value: channelstest.WeChatPayment(mine, channelstest.Delivery{})},
		{Key: []byte("c"), Value: channelstest.WeChatRefund(mine, channelstest.Refund{No: "rf-1", Amount: 500}, "SUCCESS", channelstest.Delivery{})},
		{Key: []byte("d"), Value: channelstest.WeChatPayment(theirs, channelstest.Delivery{})},
		{Key: []byte("d"), Value: channelstest.WeChatRefund(theirs, channelstest.Refund{No: "rf-1", Amount: 700}, "SUCCESS", channelstest.Delivery{})},
		{Key: []byte("d"), Value: channelstest.WeChatRefund(theirs, channelstest.Refund{No: "RF-1", Amount: 300}, "SUCCESS", channelstest.Delivery{})},
		{Key: []byte("e"), Value: channelstest.SQBPayment(longTrade, channelstest.Delivery{})},
		{Key: []byte("f"), Value: channelstest.AlipayPayment(hugeOrderNo, channelstest.Delivery{})},
		{Key: []byte("g"), Value: hugeBody},
	}
	h.produce(msgs)
	h.start(nil)
	h.waitConsumed(time.Minute)

	rep, err := settlement.Reconcile(ctx, h.db, settlement.ReconcileOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Discrepancies)
	totals, err := settlement.Totals(ctx, h.db)
	require.NoError(t, err)

	// The metacharacters are stored as data.
	o, err := settlement.GetOrder(ctx, h.db, 1001, channels.SQB, sqlish.TradeNo)
	require.NoError(t, err)
	assert.Equal(t, sqlish.MerchantOrderNo, o.MerchantOrderNo)
	assert.Equal(t, int64(100), o.RefundedAmount)
	o, err = settlement.GetOrder(ctx, h.db, 1001, channels.Alipay, sqlishAli.TradeNo)
	require.NoError(t, err)
	assert.Equal(t, sqlishAli.MerchantOrderNo, o.MerchantOrderNo)
	n, err := h.db.NewSelect().Table("ss_ledger_entry").Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2*8), n, "eight postings, nothing deleted by anyone's order number")

	// Two tenants with one trade number: separate orders and balances;
	// refund numbers differing only in case are two refunds.
	a, err := settlement.GetOrder(ctx, h.db, 1001, channels.WeChat, mine.TradeNo)
	require.NoError(t, err)
	b, err := settlement.GetOrder(ctx, h.db, 1002, channels.WeChat, mine.TradeNo)
	require.NoError(t, err)
	assert.Equal(t, [3]int64{mine.Total, mine.Total, 500}, [3]int64{a.Amount, a.PaidAmount, a.RefundedAmount})
	assert.Equal(t, [3]int64{theirs.Total, theirs.Total, 1000}, [3]int64{b.Amount, b.PaidAmount, b.RefundedAmount})
	assert.Equal(t, mine.Total-500+sqlish.Total-100+sqlishAli.Total, totals.Tenants[1001].MerchantPayableNet)
	assert.Equal(t, theirs.Total-1000, totals.Tenants[1002].MerchantPayableNet)

	// The oversized ones were refused with a clear reason.
	kinds := map[string]int{}
	for _, dl := range h.deadLetters() {
		kinds[header(dl, deadletters.HeaderErrorKind)]++
		assert.NotEmpty(t, header(dl, deadletters.HeaderError))
	}
	assert.Equal(t, map[string]int{"malformed": 3}, kinds)
}
