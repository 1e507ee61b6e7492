package sqb_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
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

func TestPublishedSQBResponses(t *testing.T) {
	ms := func(v int64) time.Time { return time.UnixMilli(v).UTC() }
	tests := []struct {
		file string
		want publishedWant
	}{
		// The documentation's PAY_SUCCESS example has a trailing comma: not
		// JSON, so nothing can be read from it.
		{"core_pay_success_response.json", publishedWant{kind: channels.KindMalformed}},
		{"core_pay_in_progress_response.json", publishedWant{ignored: "CREATED", raw: "CREATED"}},
		{"core_precreate_success_response.json", publishedWant{ignored: "CREATED", raw: "CREATED"}},
		{"core_pay_fail_response.json", publishedWant{ignored: "PAY_CANCELED", raw: "PAY_CANCELED"}},
		// A full refund that names no refund number: the number falls back
		// to the cumulative amount.
		{"core_refund_success_response.json", publishedWant{
			typ: eventkey.RefundSucceeded, key: "SQB:7894259244067218:REFUND_SUCCEEDED:1",
			tradeNo: "7894259244067218", orderNo: "12345677767776", refundNo: "1",
			total: 1, cum: 1, raw: "REFUNDED", at: ms(1449563206776),
		}},
		// CANCELED settlement semantics are tested in pkg/settlement.
		// /upay/v2/cancel (自动撤单) answer: whether the order had been paid
		// is not in the message.
		{"core_cancel_success_response.json", publishedWant{
			typ: eventkey.RefundSucceeded, key: "SQB:7894259244064831:REFUND_SUCCEEDED:CANCEL",
			tradeNo: "7894259244064831", orderNo: "22345677767776", refundNo: sqb.CancelRefundNo,
			total: 1, raw: "CANCELED", at: ms(1450090828489), skipCumulative: true,
		}},
		// CANCELED settlement semantics are tested in pkg/settlement.
		// /upay/v2/query answer for a cancelled order.
		{"core_query_canceled_response.json", publishedWant{
			typ: eventkey.RefundSucceeded, key: "SQB:7894259244096963:REFUND_SUCCEEDED:CANCEL",
			tradeNo: "7894259244096963", orderNo: "1234567", refundNo: sqb.CancelRefundNo,
			total: 1, raw: "CANCELED", at: ms(1449563206776), skipCumulative: true,
		}},
		// Failed operations carry no order data: nothing to settle.
		{"core_cancel_error_response.json", publishedWant{kind: channels.KindMalformed}},
		{"core_refund_fail_response.json", publishedWant{kind: channels.KindMalformed}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res, err := testDecoder().Decode(envelope(channels.SQB, readPublished(t, filepath.Join("sqb", tt.file))))
			checkPublished(t, res, err, tt.want)
		})
	}
}
