package alipay_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// The real notifications of docs/channels.md (personal fields replaced), with
// the usual surrounding fields.
var (
	alipayRealPayment = form(
		"notify_type=trade_status_sync", "app_id=2021000000000000", "charset=utf-8", "version=1.0",
		"sign_type=RSA2", "sign=verified-upstream",
		"trade_status=TRADE_SUCCESS", "trade_no=2023052922001439741421353853",
		"out_trade_no=1112764262913892352", "total_amount=0.01", "receipt_amount=0.01",
		"gmt_payment=2023-05-29 15:28:53", "notify_id=2023052901222152854039741417207358",
		"notify_time=2023-05-29 15:28:54")
	alipayRealPartialRefund = form(
		"notify_type=trade_status_sync", "trade_status=TRADE_SUCCESS",
		"trade_no=2023052922001439741422051004", "out_trade_no=1112794784530231296",
		"out_biz_no=1112794784530231296", "total_amount=0.03", "refund_fee=0.01",
		"gmt_refund=2023-05-29 17:31:05.287")
	alipayRealFullRefund = form(
		"notify_type=trade_status_sync", "trade_status=TRADE_CLOSED",
		"trade_no=2023052922001439741421353853", "out_trade_no=1112764262913892352",
		"out_biz_no=1112764262913892352", "total_amount=0.01", "refund_fee=0.01",
		"gmt_refund=2023-05-29 15:39:22.138", "gmt_close=2023-05-29 15:39:22")
)

// form URL-encodes k=v pairs in order.
func form(pairs ...string) string {
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		parts[i] = url.QueryEscape(k) + "=" + url.QueryEscape(v)
	}
	return strings.Join(parts, "&")
}

// edit replaces (or with "-" removes) fields of a form body.
func edit(body string, pairs ...string) string {
	v, err := url.ParseQuery(body)
	if err != nil {
		panic(err)
	}
	for _, p := range pairs {
		k, val, _ := strings.Cut(p, "=")
		if val == "-" {
			v.Del(k)
		} else {
			v.Set(k, val)
		}
	}
	return v.Encode()
}

func TestAlipayRealNotifications(t *testing.T) {
	t.Run("payment", func(t *testing.T) {
		ev := mustDecode(t, envelope(channels.Alipay, alipayRealPayment)).Event
		require.Equal(t, eventkey.PaymentReceived, ev.Type)
		require.Equal(t, eventkey.Key("ALIPAY:2023052922001439741421353853:PAYMENT_RECEIVED"), ev.Key)
		require.Equal(t, "1112764262913892352", ev.MerchantOrderNo)
		require.Equal(t, int64(1), ev.OrderTotal)
		require.Equal(t, "TRADE_SUCCESS", ev.RawStatus)
		require.Equal(t, beijing("2023-05-29 15:28:53.000"), ev.OccurredAt)
		require.Equal(t, time.Date(2023, 5, 29, 7, 28, 53, 0, time.UTC), ev.OccurredAt)
		require.True(t, ev.Cumulative())
	})
	t.Run("partial refund", func(t *testing.T) {
		res := mustDecode(t, envelope(channels.Alipay, alipayRealPartialRefund))
		ev := res.Event
		require.Equal(t, eventkey.RefundSucceeded, ev.Type)
		require.Equal(t, eventkey.Key("ALIPAY:2023052922001439741422051004:REFUND_SUCCEEDED:1112794784530231296"), ev.Key)
		require.Equal(t, int64(3), ev.OrderTotal)
		require.Equal(t, int64(1), ev.CumulativeRefunded)
		require.Zero(t, ev.RefundAmount)
		require.Equal(t, channels.RefundSuccess, res.RefundStatus)
		require.Equal(t, time.Date(2023, 5, 29, 9, 31, 5, 287e6, time.UTC), ev.OccurredAt, "gmt_refund keeps its milliseconds")
	})
	t.Run("full refund", func(t *testing.T) {
		ev := mustDecode(t, envelope(channels.Alipay, alipayRealFullRefund)).Event
		require.Equal(t, eventkey.RefundSucceeded, ev.Type)
		require.Equal(t, eventkey.Key("ALIPAY:2023052922001439741421353853:REFUND_SUCCEEDED:1112764262913892352"), ev.Key)
		require.Equal(t, int64(1), ev.OrderTotal)
		require.Equal(t, int64(1), ev.CumulativeRefunded)
		require.Equal(t, "TRADE_CLOSED", ev.RawStatus)
		require.Equal(t, time.Date(2023, 5, 29, 7, 39, 22, 138e6, time.UTC), ev.OccurredAt)
	})
}

func TestAlipayMapping(t *testing.T) {
	pay := alipayRealPayment
	tests := []struct {
		name    string
		body    string
		want    channels.ErrorKind // "" = decodes
		ignored bool
		typ     eventkey.EventType
	}{
		{"payment carrying refund_fee=0.00 is a payment", edit(pay, "refund_fee=0.00"), "", false, eventkey.PaymentReceived},
		{"gmt_refund with refund_fee=0.00 is not a refund", edit(pay, "refund_fee=0.00", "gmt_refund=2023-05-29 15:30:00.000"), "", false, eventkey.PaymentReceived},
		{"TRADE_FINISHED is the payment", edit(pay, "trade_status=TRADE_FINISHED"), "", false, eventkey.PaymentReceived},
		{"unpaid TRADE_CLOSED is ignored", edit(pay, "trade_status=TRADE_CLOSED", "gmt_payment=-", "gmt_close=2023-05-29 16:00:00"), "", true, ""},
		{"unpaid TRADE_CLOSED with refund_fee=0.00 is ignored", edit(pay, "trade_status=TRADE_CLOSED", "refund_fee=0.00"), "", true, ""},
		{"WAIT_BUYER_PAY is ignored", edit(pay, "trade_status=WAIT_BUYER_PAY", "total_amount=garbage"), "", true, ""},
		{"unknown fields tolerated", pay + "&brand_new_field=1&fund_bill_list=" + url.QueryEscape(`[{"amount":"0.01","fundChannel":"ALIPAYACCOUNT"}]`), "", false, eventkey.PaymentReceived},
		{"plus-encoded spaces in times", strings.ReplaceAll(pay, "%20", "+"), "", false, eventkey.PaymentReceived},
		{"refund without out_biz_no uses trade_no", edit(alipayRealPartialRefund, "out_biz_no=-"), "", false, eventkey.RefundSucceeded},
		{"no gmt_payment falls back to gmt_create", edit(pay, "gmt_payment=-", "gmt_create=2023-05-29 15:28:40"), "", false, eventkey.PaymentReceived},
		{"unknown trade_status", edit(pay, "trade_status=TRADE_PENDING"), channels.KindUnsupported, false, ""},
		{"no trade_status", edit(pay, "trade_status=-"), channels.KindMalformed, false, ""},
		{"other notify_type", edit(pay, "notify_type=fund_auth_freeze"), channels.KindUnsupported, false, ""},
		{"foreign trans_currency", edit(pay, "trans_currency=USD"), channels.KindUnsupported, false, ""},
		{"refund_fee > 0 without gmt_refund", edit(pay, "refund_fee=0.01"), channels.KindUnsupported, false, ""},
		{"closed with refund_fee > 0 without gmt_refund", edit(alipayRealFullRefund, "gmt_refund=-"), channels.KindUnsupported, false, ""},
		{"float-style total", edit(pay, "total_amount=1e3"), channels.KindInvalidAmount, false, ""},
		{"three decimals", edit(pay, "total_amount=1.005"), channels.KindInvalidAmount, false, ""},
		{"negative", edit(pay, "total_amount=-1"), channels.KindInvalidAmount, false, ""},
		{"empty total", edit(pay, "total_amount="), channels.KindInvalidAmount, false, ""},
		{"missing total", edit(pay, "total_amount=-"), channels.KindInvalidAmount, false, ""},
		{"zero total", edit(pay, "total_amount=0.00"), channels.KindInvalidAmount, false, ""},
		{"comma decimal", edit(pay, "total_amount=1,00"), channels.KindInvalidAmount, false, ""},
		{"absurd total", edit(pay, "total_amount=10000000000.01"), channels.KindInvalidAmount, false, ""},
		{"garbage refund_fee", edit(alipayRealPartialRefund, "refund_fee=abc"), channels.KindInvalidAmount, false, ""},
		{"duplicated total_amount", pay + "&total_amount=100.00", channels.KindMalformed, false, ""},
		{"bad escape", pay + "&x=%zz", channels.KindMalformed, false, ""},
		{"no trade_no", edit(pay, "trade_no=-"), channels.KindMalformed, false, ""},
		{"no out_trade_no", edit(pay, "out_trade_no=-"), channels.KindMalformed, false, ""},
		{"out_biz_no over 64 bytes", edit(alipayRealPartialRefund, "out_biz_no="+strings.Repeat("9", 65)), channels.KindMalformed, false, ""},
		{"time with zone", edit(pay, "gmt_payment=2023-05-29T15:28:53+08:00"), channels.KindMalformed, false, ""},
		{"time before 2000", edit(pay, "gmt_payment=0000-01-01 00:00:00"), channels.KindMalformed, false, ""},
		{"time after 2100", edit(pay, "gmt_payment=2100-01-01 08:00:00"), channels.KindMalformed, false, ""},
		{"no time at all", edit(pay, "gmt_payment=-", "notify_time=-"), channels.KindMalformed, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := envelope(channels.Alipay, tt.body)
			if tt.want != "" {
				mustFail(t, v, tt.want)
				return
			}
			res := mustDecode(t, v)
			require.Equal(t, tt.ignored, res.Ignored, res.IgnoreReason)
			require.Equal(t, tt.typ, res.Event.Type)
		})
	}
}

func TestAlipayFinishedIsTheSamePayment(t *testing.T) {
	trade := channelstest.NewTrade(channels.Alipay, 11)
	success := mustDecode(t, channelstest.AlipayPayment(trade, channelstest.Delivery{})).Event
	finished := mustDecode(t, channelstest.AlipayFinished(trade, channelstest.Delivery{})).Event
	require.Equal(t, success.Key, finished.Key)
	require.Equal(t, success.Fingerprint, finished.Fingerprint)
	require.Equal(t, "TRADE_FINISHED", finished.RawStatus)
}

func TestAlipayRedeliveryKeepsFingerprint(t *testing.T) {
	trade := channelstest.NewTrade(channels.Alipay, 12)
	first := channelstest.AlipayRefund(trade, channelstest.Refund{No: "R1", Cumulative: 500}, channelstest.Delivery{})
	retry := channelstest.AlipayRefund(trade, channelstest.Refund{No: "R1", Cumulative: 500}, channelstest.Delivery{
		Attempt: 2, NotifyTime: time.Date(2024, 6, 1, 14, 10, 0, 0, channelstest.Beijing),
	})
	require.NotEqual(t, first, retry)
	a, b := mustDecode(t, first).Event, mustDecode(t, retry).Event
	require.Equal(t, a.Key, b.Key)
	require.Equal(t, a.Fingerprint, b.Fingerprint)
}

func TestAlipayRefunds(t *testing.T) {
	trade := channelstest.NewTrade(channels.Alipay, 13) // total 2580
	r1 := mustDecode(t, channelstest.AlipayRefund(trade, channelstest.Refund{No: "R1", Cumulative: 1000}, channelstest.Delivery{}))
	r2 := mustDecode(t, channelstest.AlipayRefund(trade, channelstest.Refund{No: "R2", Cumulative: 2580}, channelstest.Delivery{}))
	require.Equal(t, "TRADE_SUCCESS", r1.Event.RawStatus)
	require.Equal(t, "TRADE_CLOSED", r2.Event.RawStatus)
	require.Equal(t, int64(1000), r1.Event.CumulativeRefunded)
	require.Equal(t, int64(2580), r2.Event.CumulativeRefunded, "the cumulative, not the delta")
	require.NotEqual(t, r1.Event.Key, r2.Event.Key)

	lower := mustDecode(t, channelstest.AlipayRefund(trade, channelstest.Refund{No: "r1", Cumulative: 1000}, channelstest.Delivery{}))
	require.NotEqual(t, r1.Event.Key, lower.Event.Key, "refund numbers are case-sensitive")
}

func TestAlipayUnpaidCloseAndWait(t *testing.T) {
	trade := channelstest.NewTrade(channels.Alipay, 14)
	res := mustDecode(t, channelstest.AlipayUnpaidClose(trade, channelstest.Delivery{}))
	require.True(t, res.Ignored)
	require.Equal(t, trade.TradeNo, res.Event.TradeNo)
	res = mustDecode(t, channelstest.AlipayWaitBuyerPay(trade, channelstest.Delivery{}))
	require.True(t, res.Ignored)
}
