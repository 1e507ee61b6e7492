package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// TestRegistrationsEndToEnd: on kfake and MariaDB, through app.Main as
// production starts it, two payment registrations are consumed, one of
// them and its payment on different partitions; the paid one ends
// SUCCEEDED, the other stays open and shows in paycb_registrations_open.
func TestRegistrationsEndToEnd(t *testing.T) {
	h := newHarness(t, 2)
	r := h.start(func(m *app.Main) { m.RegistrationMetricsRefresh = 20 * time.Millisecond })
	paid := channelstest.NewTrade(channels.WeChat, 9101)
	open := channelstest.NewTrade(channels.WeChat, 9102)
	reg := func(tr channelstest.Trade) demo.Message {
		t.Helper()
		created := time.Now().UTC().Add(-time.Minute)
		v, err := channels.RegistrationEnvelope(tr.TenantID, tr.Channel, created, channels.RegistrationMessage{
			Kind: channels.RegistrationPayment, MerchantID: "1230000109", MerchantOrderNo: tr.MerchantOrderNo,
			Amount: tr.Total, Currency: "CNY", CreatedAt: created, ExpiresAt: created.Add(time.Hour),
		})
		require.NoError(t, err)
		return demo.Message{Key: []byte("WECHAT:" + tr.MerchantOrderNo), Value: v}
	}
	h.produce([]demo.Message{
		reg(paid),
		{Key: []byte("WECHAT:" + paid.TradeNo), Value: channelstest.PaymentEnvelope(paid, channelstest.Delivery{})},
		reg(open),
	})
	h.waitConsumed(time.Minute)
	status := func(tr channelstest.Trade) string {
		var s string
		require.NoError(t, h.db.NewSelect().Table("ss_payment_registration").Column("status").
			Where("merchant_order_no = ?", tr.MerchantOrderNo).Scan(context.Background(), &s))
		return s
	}
	assert.Equal(t, "SUCCEEDED", status(paid))
	assert.Equal(t, "REGISTERED", status(open))
	assert.Empty(t, h.deadLetters())
	require.Eventually(t, func() bool {
		return counted(t, r.main, "paycb_registrations_open", map[string]string{"channel": "WECHAT", "kind": "PAYMENT"}) == 1 &&
			counted(t, r.main, "paycb_registration_oldest_open_seconds", map[string]string{"channel": "WECHAT", "kind": "PAYMENT"}) > 0 &&
			counted(t, r.main, "paycb_registrations_open", map[string]string{"channel": "ALIPAY", "kind": "REFUND"}) == 0
	}, 10*time.Second, 10*time.Millisecond, "the open registration shows in the metrics")
}
