package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestMerchantlessSQBRefundWaitsForItsPayment: with a merchant binding, a
// Shouqianba refund answer forwarded without terminal_sn that reaches the
// partition before its trade's payment is held: the messages after it are
// handled, nothing of it is claimed and nothing is committed past it; once
// the payment arrives behind it, the refund settles, the partition
// commits to its end, and the trade ends as it would have in order, with
// no dead letter.
func TestMerchantlessSQBRefundWaitsForItsPayment(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "merchants")
	require.NoError(t, os.WriteFile(path, []byte("1001 SQB 01939202039923029\n"), 0o600))

	tr := channelstest.NewTrade(channels.SQB, 971)
	other := channelstest.NewTrade(channels.SQB, 972)
	refund := channelstest.SQBRefund(tr, channelstest.Refund{No: "R1", Cumulative: 1000}, channelstest.Delivery{
		SQB: channelstest.SQBAPIResponse, Edit: func(m map[string]any) { delete(m, "terminal_sn") },
	})
	dec := channels.NewDecoder(channelstest.Keys())
	res, err := dec.Decode(refund)
	require.NoError(t, err)
	require.Empty(t, res.MerchantID, "the forwarded answer names no merchant")
	refundKey := res.Event.Key

	w := h.start(func(m *app.Main) { m.Config.Worker.TenantMerchantsFile = path })
	h.produce([]demo.Message{
		{Key: []byte(tr.TradeNo), Value: refund},
		{Key: []byte(other.TradeNo), Value: channelstest.SQBPayment(other, channelstest.Delivery{})},
	})
	paid := func(trade channelstest.Trade) bool {
		ord, err := settlement.GetOrder(ctx, h.db, trade.TenantID, trade.Channel, trade.TradeNo)
		return err == nil && ord.PaidAmount == trade.Total
	}
	require.Eventually(t, func() bool { return paid(other) }, time.Minute, 10*time.Millisecond,
		"the message after the held refund is handled")
	store := idempotent.NewStore(h.db)
	_, err = store.Get(ctx, tr.TenantID, refundKey)
	require.ErrorIs(t, err, idempotent.ErrNotFound, "nothing of the held refund is claimed")
	assert.Less(t, h.committed()[0], int64(1), "nothing is committed past the held refund")

	h.produce([]demo.Message{{Key: []byte(tr.TradeNo), Value: channelstest.SQBPayment(tr, channelstest.Delivery{})}})
	h.waitConsumed(time.Minute)
	assert.Equal(t, int64(3), h.committed()[0])
	ord, err := settlement.GetOrder(ctx, h.db, tr.TenantID, tr.Channel, tr.TradeNo)
	require.NoError(t, err)
	assert.Equal(t, tr.Total, ord.PaidAmount)
	assert.Equal(t, int64(1000), ord.RefundedAmount)
	assert.Equal(t, settlement.OrderPartiallyRefunded, ord.Status)
	assert.Equal(t, "01939202039923029", ord.BoundMerchantID)
	assert.Empty(t, h.deadLetters(), "nothing dead-lettered")
	assert.InDelta(t, 3, counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "acquired"}), 0)
}
