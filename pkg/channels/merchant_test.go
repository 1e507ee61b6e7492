package channels_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// TestMerchantID checks that every decode names the merchant its callback
// names, in the binding file's terms, on the fast and the slow path, for
// money events and ignored ones alike, and that statement events are told
// apart instead.
func TestMerchantID(t *testing.T) {
	wx := channelstest.NewTrade(channels.WeChat, 1)
	alipay := channelstest.NewTrade(channels.Alipay, 2)
	sqb := channelstest.NewTrade(channels.SQB, 3)
	partner := channelstest.Delivery{Partner: true}
	// A key that matches a known one only case-insensitively sends the body
	// from the one-pass decoder to encoding/json, which maps it onto the
	// field.
	slowSQB := channelstest.Delivery{Edit: func(m map[string]any) {
		m["TERMINAL_SN"] = m["terminal_sn"]
		delete(m, "terminal_sn")
	}}
	statementEvent, err := channels.NewStatementEvent(channels.Event{
		TenantID: sqb.TenantID, Channel: channels.SQB, Type: eventkey.PaymentReceived, TradeNo: sqb.TradeNo,
		MerchantOrderNo: sqb.MerchantOrderNo, OrderTotal: sqb.Total, OccurredAt: sqb.PaidAt, ReceivedAt: sqb.PaidAt, RawStatus: "PAID",
	})
	require.NoError(t, err)
	statement, err := channels.StatementEnvelope(statementEvent, sqb.PaidAt)
	require.NoError(t, err)
	noSeller := channelstest.AlipayPayment(alipay, channelstest.Delivery{Edit: func(m map[string]any) { delete(m, "seller_id") }})

	tests := []struct {
		name     string
		value    []byte
		merchant string
		ignored  bool
	}{
		{"wechat direct payment: mchid", channelstest.PaymentEnvelope(wx, channelstest.Delivery{}), "1230000109", false},
		{"wechat partner payment: sub_mchid, not sp_mchid", channelstest.PaymentEnvelope(wx, partner), "1900000109", false},
		{"wechat direct refund", channelstest.RefundEnvelope(wx, channelstest.Refund{No: "RF-1", Amount: 100}, channelstest.Delivery{}), "1230000109", false},
		{"wechat partner refund", channelstest.RefundEnvelope(wx, channelstest.Refund{No: "RF-1", Amount: 100}, partner), "1900000109", false},
		{"alipay payment: seller_id", channelstest.PaymentEnvelope(alipay, channelstest.Delivery{}), "2088101117955611", false},
		{"alipay refund", channelstest.RefundEnvelope(alipay, channelstest.Refund{No: "RF-1", Amount: 100}, channelstest.Delivery{}), "2088101117955611", false},
		{"alipay without seller_id names none", noSeller, "", false},
		{"sqb payment: terminal_sn", channelstest.PaymentEnvelope(sqb, channelstest.Delivery{}), "01939202039923029", false},
		{"sqb payment, slow path", channelstest.PaymentEnvelope(sqb, slowSQB), "01939202039923029", false},
		{"sqb forwarded API response: biz_response.data.terminal_sn", channelstest.RefundEnvelope(sqb, channelstest.Refund{No: "RF-1", Amount: 100}, channelstest.Delivery{SQB: channelstest.SQBAPIResponse}), "01939202039923029", false},
		{"sqb ignored status still names its terminal", channelstest.PaymentEnvelope(sqb, channelstest.Delivery{Edit: func(m map[string]any) { m["order_status"] = "CREATED" }}), "01939202039923029", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustDecode(t, tt.value)
			assert.Equal(t, tt.ignored, res.Ignored)
			assert.Equal(t, tt.merchant, res.MerchantID)
			assert.False(t, res.FromStatement)
		})
	}
	t.Run("statement event", func(t *testing.T) {
		res := mustDecode(t, statement)
		assert.True(t, res.FromStatement)
		assert.Empty(t, res.MerchantID)
	})
	t.Run("payload files", func(t *testing.T) {
		for file, want := range map[string]string{
			"wechat_transaction_success.json": "1230000109",
			"alipay_payment.form":             "2088101117955611",
			"sqb_payment.json":                "01939202039923029",
			"sqb_refund_api_response.json":    "01939202039923029",
			"wechat_refund_success.json":      "1230000109",
			"alipay_unpaid_close.form":        "2088101117955611",
			"sqb_partial_refund.json":         "01939202039923029",
			"alipay_partial_refund.form":      "2088101117955611",
		} {
			b, err := os.ReadFile(filepath.Join(strings.Split(file, "_")[0], "testdata", "payloads", file))
			require.NoError(t, err)
			ch := map[string]channels.Channel{"wechat": channels.WeChat, "alipay": channels.Alipay, "sqb": channels.SQB}[strings.Split(file, "_")[0]]
			res := mustDecode(t, envelope(ch, strings.TrimSpace(string(b))))
			assert.Equal(t, want, res.MerchantID, file)
		}
	})
	t.Run("published samples", func(t *testing.T) {
		for _, tt := range []struct {
			name, merchant string
			value          []byte
		}{
			{"wechat direct transaction: mchid", "1230000109", sealed(wechat.TransactionSuccess, "transaction", readPublished(t, "wechat/skit_transaction_resource.json"))},
			{"wechat partner transaction: sub_mchid, not sp_mchid", "1900000109", sealed(wechat.TransactionSuccess, "transaction", readPublished(t, "wechat/skit_partner_transaction_resource.json"))},
			{"wechat partner refund: sub_mchid", "1900000109", sealed(wechat.RefundSuccess, "refund", readPublished(t, "wechat/skit_partner_refund_resource.json"))},
			{"alipay: seller_id", "2088531891668739", envelope(channels.Alipay, strings.TrimSuffix(readPublished(t, "alipay/nodejs-sdk_yuque_payment.form"), "\n"))},
			// Shouqianba's published API answers carry no terminal_sn (the
			// terminal is in the request's Authorization header): forwarded
			// as they are, they name no merchant.
			{"sqb refund API answer: none", "", envelope(channels.SQB, readPublished(t, "sqb/core_refund_success_response.json"))},
		} {
			t.Run(tt.name, func(t *testing.T) {
				res, err := testDecoder().Decode(tt.value)
				require.NoError(t, err)
				assert.Equal(t, tt.merchant, res.MerchantID)
			})
		}
	})
	t.Run("seller_id twice is refused", func(t *testing.T) {
		mustFail(t, channelstest.Envelope(1001, channels.Alipay, alipayRealPayment+"&seller_id=2088000000000000&seller_id=2088000000000001", alipay.PaidAt), channels.KindMalformed)
	})
}
