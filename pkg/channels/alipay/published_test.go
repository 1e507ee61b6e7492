package alipay_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/stretchr/testify/require"
)

// The published samples under testdata/published are other people's
// callback bodies, API responses and decrypted WeChat resources, kept byte
// for byte as they were published; testdata/published/README.md names the
// source of each. WeChat resources are published in plaintext (their
// ciphertexts were made with keys nobody publishes), so the tests seal them
// with our own key (sealed, channelstest.EncryptWeChat); the published
// ciphertexts whose keys are published are decrypted as they are.

// Published AES-GCM test vectors with their keys.
const (
	// github.com/gunsluo/wechatpay-go client_test.go, mockNewClient.
	gunsluoAPIv3Key  = "AES256Key-32Characters1234567890"
	goPayscoreKey    = "testMchAPIv3Key0" // wechatpay-apiv3/wechatpay-go core/notify/notify_test.go: 16 bytes, AES-128
	goPayscorePlain  = `{"mchid":"1234567890","appid":"054aa7d7a2a54ab5898df65bd96f001c","create_time":"2020-06-30T12:12:00+08:00","out_contract_code":"21640bdbd08e473e828f3206a2741c6e"}`
	publishedTenant  = 1001
	publishedRefund  = "7752501201407033233368018"
	publishedWxTrade = "1217752501201407033233368018"
)

func readPublished(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "published", name))
	require.NoError(tb, err)
	return string(b)
}

// publishedWant is the canonical event (or the refusal) a published sample
// decodes to. Zero fields are asserted zero unless skipCumulative is set.
type publishedWant struct {
	kind     channels.ErrorKind // a refusal; nothing else is checked
	ignored  string             // part of the ignore reason
	typ      eventkey.EventType
	key      eventkey.Key
	tradeNo  string
	orderNo  string
	refundNo string
	total    int64
	refund   int64
	cum      int64
	raw      string
	at       time.Time
	// skipCumulative leaves CumulativeRefunded unasserted: Shouqianba
	// CANCELED, whose settlement is pkg/settlement's business.
	skipCumulative bool
}

func checkPublished(t *testing.T, res channels.Result, err error, w publishedWant) {
	t.Helper()
	if w.kind != "" {
		require.Error(t, err)
		kind, ok := channels.KindOf(err)
		require.True(t, ok, "untyped error %v", err)
		require.Equal(t, w.kind, kind, "error: %v", err)
		return
	}
	require.NoError(t, err)
	checkResult(t, res, nil)
	ev := res.Event
	require.Equal(t, int64(publishedTenant), ev.TenantID)
	if w.ignored != "" {
		require.True(t, res.Ignored, "want ignored, got %+v", ev)
		require.Contains(t, res.IgnoreReason, w.ignored)
		require.Equal(t, w.raw, ev.RawStatus)
		return
	}
	require.False(t, res.Ignored, res.IgnoreReason)
	require.Equal(t, w.typ, ev.Type)
	require.Equal(t, w.key, ev.Key)
	require.Equal(t, w.tradeNo, ev.TradeNo)
	require.Equal(t, w.orderNo, ev.MerchantOrderNo)
	require.Equal(t, w.refundNo, ev.RefundNo)
	require.Equal(t, w.total, ev.OrderTotal)
	require.Equal(t, w.refund, ev.RefundAmount)
	if !w.skipCumulative {
		require.Equal(t, w.cum, ev.CumulativeRefunded)
	}
	require.Equal(t, channels.CurrencyCNY, ev.Currency)
	require.Equal(t, w.raw, ev.RawStatus)
	require.Equal(t, w.at, ev.OccurredAt)
}

func TestPublishedAlipayNotifications(t *testing.T) {
	tests := []struct {
		file string
		want publishedWant
	}{
		{"nodejs-sdk_yuque_payment.form", publishedWant{
			typ: eventkey.PaymentReceived, key: "ALIPAY:2019081522001468450512505578:PAYMENT_RECEIVED",
			tradeNo: "2019081522001468450512505578", orderNo: "20190815155618536-564-57",
			total: 10, raw: "TRADE_SUCCESS", at: beijing("2019-08-15 15:56:24.000"),
		}},
		{"pay-web-server_sandbox_payment.form", publishedWant{
			typ: eventkey.PaymentReceived, key: "ALIPAY:962018042021001004610236969008:PAYMENT_RECEIVED",
			tradeNo: "962018042021001004610236969008", orderNo: "tradeprecreate15242084564057922493",
			total: 1, raw: "TRADE_SUCCESS", at: beijing("2018-04-20 15:25:41.000"),
		}},
		{"nodejs-sdk_verify_fail_payment.form", publishedWant{
			typ: eventkey.PaymentReceived, key: "ALIPAY:111111112019052322001426431037869358:PAYMENT_RECEIVED",
			tradeNo: "111111112019052322001426431037869358", orderNo: "tpxy23962362669658",
			total: 1, raw: "TRADE_SUCCESS", at: beijing("2019-05-23 14:17:13.000"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := readPublished(t, filepath.Join("alipay", tt.file))
			require.Equal(t, byte('\n'), body[len(body)-1])
			res, err := testDecoder().Decode(envelope(channels.Alipay, body[:len(body)-1]))
			checkPublished(t, res, err, tt.want)
		})
	}
}
