package wechat_test

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
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
	// wechatpay-apiv3/wechatpay-java, core/src/test/.../cipher/AeadAesCipherTest.java
	// with the API_V3_KEY of core/src/test/.../model/TestConfig.java: the only
	// published vector under a 32-byte APIv3 key found.
	javaAPIv3Key   = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb"
	javaNonce      = "uluk4a9R25RW"
	javaAAD        = "associatedData"
	javaCiphertext = "ulwSiIajGClcvcOYvOQ7+l+0PAbzzwI="
	javaPlaintext  = "message"
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

func TestPublishedWeChatResources(t *testing.T) {
	paidAt := time.Date(2018, 6, 8, 2, 34, 56, 0, time.UTC) // 2018-06-08T10:34:56+08:00
	payment := publishedWant{
		typ: eventkey.PaymentReceived, key: "WECHAT:" + publishedWxTrade + ":PAYMENT_RECEIVED",
		tradeNo: publishedWxTrade, orderNo: publishedWxTrade, total: 100, raw: "SUCCESS", at: paidAt,
	}
	refund := publishedWant{
		typ: eventkey.RefundSucceeded, key: "WECHAT:1008450740201411110005820873:REFUND_SUCCEEDED:" + publishedRefund,
		tradeNo: "1008450740201411110005820873", orderNo: "20150806125346", refundNo: publishedRefund,
		total: 999, refund: 999, raw: "SUCCESS", at: paidAt,
	}
	tests := []struct {
		file      string
		eventType string
		want      publishedWant
	}{
		{"skit_transaction_resource.json", wechat.TransactionSuccess, payment},
		{"skit_partner_transaction_resource.json", wechat.TransactionSuccess, payment},
		{"skit_refund_resource.json", wechat.RefundSuccess, refund},
		{"skit_partner_refund_resource.json", wechat.RefundSuccess, refund},
		// Cross-border (WeChat Pay Global) resources: HKD, and the
		// transaction names its trade "id". Both are refused for their
		// currency, as every channel refuses a currency other than CNY.
		{"skit_global_transaction_resource.json", wechat.TransactionSuccess, publishedWant{kind: channels.KindUnsupported}},
		{"skit_global_refund_resource.json", wechat.RefundSuccess, publishedWant{kind: channels.KindUnsupported}},
		// API responses sealed as the resource of a notification: the
		// transaction query, the refund query (which calls the status
		// "status") and a refund request's answer, still PROCESSING.
		{"gunsluo_transaction_query_response.json", wechat.TransactionSuccess, publishedWant{
			typ: eventkey.PaymentReceived, key: "WECHAT:4200000914202101195554393855:PAYMENT_RECEIVED",
			tradeNo: "4200000914202101195554393855", orderNo: "S20210119074247105778399200",
			total: 1, raw: "SUCCESS", at: time.Date(2021, 1, 19, 7, 43, 1, 0, time.UTC),
		}},
		{"gunsluo_refund_query_response.json", wechat.RefundSuccess, publishedWant{
			typ: eventkey.RefundSucceeded, key: "WECHAT:" + publishedWxTrade + ":REFUND_SUCCEEDED:" + publishedWxTrade,
			tradeNo: publishedWxTrade, orderNo: publishedWxTrade, refundNo: publishedWxTrade,
			total: 100, refund: 100, raw: "SUCCESS", at: time.Date(2020, 12, 1, 8, 18, 12, 0, time.UTC),
		}},
		{"gunsluo_refund_create_response.json", wechat.RefundSuccess, publishedWant{kind: channels.KindUnsupported}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			original := "transaction"
			if tt.eventType != wechat.TransactionSuccess {
				original = "refund"
			}
			res, err := testDecoder().Decode(sealed(tt.eventType, original, readPublished(t, filepath.Join("wechat", tt.file))))
			checkPublished(t, res, err, tt.want)
		})
	}
}

// TestPublishedWeChatCrossBorderIsUnsupported: a cross-border transaction
// names its trade "id", not "transaction_id"; the currency is judged
// before the key is built, so it is unsupported, not malformed, on the
// one-pass path and on encoding/json's alike, whatever its status.
func TestPublishedWeChatCrossBorderIsUnsupported(t *testing.T) {
	global := readPublished(t, filepath.Join("wechat", "skit_global_transaction_resource.json"))
	globalRefund := readPublished(t, filepath.Join("wechat", "skit_global_refund_resource.json"))
	tests := []struct {
		name, eventType, original, plaintext string
	}{
		{"published, one-pass decoder", wechat.TransactionSuccess, "transaction", global},
		// A float anywhere sends the resource to encoding/json.
		{
			"constructed: encoding/json path", wechat.TransactionSuccess, "transaction",
			`{"id":"1008450740201411110005820873","out_trade_no":"20150806125346","trade_state":"SUCCESS","amount":{"total":528800,"currency":"HKD","exchange_rate":{"type":"SETTLEMENT_RATE","rate":8.0}}}`,
		},
		{
			"constructed: amount the decoder cannot read", wechat.TransactionSuccess, "transaction",
			`{"id":"1008450740201411110005820873","out_trade_no":"20150806125346","trade_state":"SUCCESS","amount":{"total":5288.00,"currency":"HKD"}}`,
		},
		{
			"constructed: not SUCCESS", wechat.TransactionSuccess, "transaction",
			`{"id":"1008450740201411110005820873","trade_state":"REFUND","amount":{"total":528800,"currency":"HKD"}}`,
		},
		{
			"constructed: refund ABNORMAL without numbers", wechat.RefundAbnormal, "refund",
			`{"refund_status":"ABNORMAL","amount":{"total":528800,"refund":528800,"currency":"HKD"}}`,
		},
		{"published refund", wechat.RefundSuccess, "refund", globalRefund},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testDecoder().Decode(sealed(tt.eventType, tt.original, tt.plaintext))
			require.Error(t, err)
			kind, _ := channels.KindOf(err)
			require.Equal(t, channels.KindUnsupported, kind, "error: %v", err)
			require.Contains(t, err.Error(), `currency "HKD"`)
		})
	}
	t.Run("the same resource in CNY is still malformed for want of transaction_id", func(t *testing.T) {
		mustFail(t, sealed(wechat.TransactionSuccess, "transaction",
			`{"id":"1008450740201411110005820873","out_trade_no":"20150806125346","trade_state":"SUCCESS","amount":{"total":528800,"currency":"CNY"}}`),
			channels.KindMalformed)
	})
}

// TestPublishedWeChatRealNotifications decodes the notifications of
// github.com/gunsluo/wechatpay-go's tests as they are: real v3
// notifications of one 0.01-yuan NATIVE payment and its refund, sealed
// under the SDK's published test key, and the SDK's own tampered copy.
func TestPublishedWeChatRealNotifications(t *testing.T) {
	d := channels.NewDecoder(channels.StaticKeys{Default: gunsluoAPIv3Key})
	tests := []struct {
		file string
		want publishedWant
	}{
		{"gunsluo_transaction_notification.json", publishedWant{
			typ: eventkey.PaymentReceived, key: "WECHAT:4200000925202101284997714292:PAYMENT_RECEIVED",
			tradeNo: "4200000925202101284997714292", orderNo: "S20210128170702357723",
			total: 1, raw: "SUCCESS", at: time.Date(2021, 1, 28, 9, 7, 11, 0, time.UTC),
		}},
		{"gunsluo_refund_notification.json", publishedWant{
			typ: eventkey.RefundSucceeded, key: "WECHAT:4200000925202101284997714292:REFUND_SUCCEEDED:S20210201151309277501",
			tradeNo: "4200000925202101284997714292", orderNo: "S20210128170702357723", refundNo: "S20210201151309277501",
			total: 1, refund: 1, raw: "SUCCESS", at: time.Date(2021, 2, 1, 7, 13, 13, 0, time.UTC),
		}},
		{"gunsluo_transaction_notification_tampered.json", publishedWant{kind: channels.KindDecryptFailed}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			value := envelope(channels.WeChat, readPublished(t, filepath.Join("wechat", tt.file)))
			res, err := d.Decode(value)
			checkPublished(t, res, err, tt.want)
			if tt.want.kind == "" {
				require.Equal(t, channels.KeyUse{Position: 1, Keys: 1}, res.APIv3Key)
			}
			// Under any other key it does not open.
			_, err = testDecoder().Decode(value)
			kind, _ := channels.KindOf(err)
			require.Equal(t, channels.KindDecryptFailed, kind, "error: %v", err)
		})
	}
}

func TestPublishedWeChatNotifications(t *testing.T) {
	t.Run("wechatpay-java AES-256-GCM vector", func(t *testing.T) {
		// Our encryption helper reproduces the SDK's ciphertext, so the
		// fixtures sealed with it are what WeChat Pay sends.
		require.Equal(t, javaCiphertext, channelstest.EncryptWeChat(javaAPIv3Key, javaNonce, javaAAD, []byte(javaPlaintext)))
		// Wrapped in a v3 notification (our wrapping), it decrypts with the
		// published key; its plaintext is no transaction.
		body := wechatBody(wechat.TransactionSuccess, "transaction", wechat.Algorithm, javaCiphertext, javaNonce, javaAAD)
		d := channels.NewDecoder(channels.StaticKeys{Default: javaAPIv3Key})
		res, err := d.Decode(envelope(channels.WeChat, body))
		kind, _ := channels.KindOf(err)
		require.Equal(t, channels.KindMalformed, kind, "error: %v", err)
		require.Equal(t, channels.KeyUse{Position: 1, Keys: 1}, res.APIv3Key, "the published key opened it")
		_, err = testDecoder().Decode(envelope(channels.WeChat, body))
		kind, _ = channels.KindOf(err)
		require.Equal(t, channels.KindDecryptFailed, kind, "error: %v", err)
	})
	t.Run("wechatpay-go payscore notification", func(t *testing.T) {
		body := readPublished(t, filepath.Join("wechat", "wechatpay-go_payscore_notification.json"))
		// The published ciphertext opens with the published 16-byte key as
		// AES-128-GCM: nonce and associated data are the raw bytes of the
		// message's strings, the tag is appended, as the decoder reads them.
		ct, err := base64.StdEncoding.DecodeString("YDS3lKPaC4Y52Gf3uhft5qUBlIa8b428AWTtTauHQfQrRw+X1WpiuHIDy0vo1Vd6VEq67aVyqPdDYMkRVSDaZL3iZttevRMOoPKMifozg6XPWjIZumks/GpT48lI4NizyeaqLBokNebthah3o1H76qSlO9NkDjp9bzmKLEYYH9TEklFUpsvPqOTOcgSLgh21YJXYR7dEBXFgRLiNIKRgO5JdXh1hccRUAlyVWxE54PXpnQ==")
		require.NoError(t, err)
		block, err := aes.NewCipher([]byte(goPayscoreKey))
		require.NoError(t, err)
		gcm, err := cipher.NewGCM(block)
		require.NoError(t, err)
		plain, err := gcm.Open(nil, []byte("Kj7QIyUiYx1q"), ct, []byte("payscore"))
		require.NoError(t, err)
		require.JSONEq(t, goPayscorePlain, string(plain))
		// The decoder refuses the event type before it needs a key: an
		// APIv3 key is 32 bytes, so this test key could not serve anyway.
		for _, d := range []*channels.Decoder{testDecoder(), channels.NewDecoder(channels.StaticKeys{Default: goPayscoreKey})} {
			res, err := d.Decode(envelope(channels.WeChat, body))
			checkPublished(t, res, err, publishedWant{kind: channels.KindUnsupported})
		}
	})
	t.Run("wechatpay-java resource without an envelope", func(t *testing.T) {
		mustFail(t, envelope(channels.WeChat, readPublished(t, filepath.Join("wechat", "wechatpay-java_notification.json"))), channels.KindMalformed)
	})
}
