package wechat_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// The fake-key test vectors of docs/channels.md, verbatim.
const (
	vecKey = "0123456789abcdef0123456789abcdef"

	vecTxNonce      = "A1b2C3d4E5f6"
	vecTxAAD        = "transaction"
	vecTxCiphertext = "a516J17hhvMShaRjp4L+shqsghrpCpZbN4+uYIOGR7GCO9B6PRwEZA/u8NGfNemn4Noqw+XX8RuRrvhknmHTaNXA99cdrHPgxvjSl0uHu2fLxcdKRcqlAzHv9ogFvnuPpJuHx1dLfJG9bhPB3BgFD79rNjH73RwmQo3Xk9GEEIV8R6mINZsi4SkEE9jpsqlzSFoc0p99i1DjD2ATKsw+hDRDZwB89DzADMeMBeu1p+6eKRYnOgFYH41uk07rTgcCJcmLGR5XOLQOh6HobJfJUBNK2vORfvq3nEDYH+rseiwpvoDYS3sm/SG8WOzXuoZ+MVRIqfDcFQCKu9AS7fmJmqnqQocGJbSjU4t2MVq3+qX9979iJJmTzNn+poznSUsVj3QQXG6dIP1nOI6ySJrmcjt8RXbXrmthy4dG0QA3xbAxZnWLPWpFXOjGCXkhofkt41p0lUCJIUn1Kp5YOXUNLeEj+aBObsogjHB00DDiuduNzC8hqjYtPktfifmn3fku6kxf9npcnHk+nWTZkwAzOxThrCHCuwj0C4bUcWA0m3I5PHzbgAfcFgyAnoKasUS4Qd+3+7bux5Ox"
	vecTxPlaintext  = `{"mchid":"1230000109","appid":"wxd678efh567hg6787","out_trade_no":"POS20240601000123","transaction_id":"4200002211202406011234567890","trade_type":"MICROPAY","trade_state":"SUCCESS","trade_state_desc":"支付成功","bank_type":"OTHERS","attach":"","success_time":"2024-06-01T12:00:05+08:00","payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},"amount":{"total":2580,"payer_total":2580,"currency":"CNY","payer_currency":"CNY"}}`

	vecRfNonce      = "Z9y8X7w6V5u4"
	vecRfAAD        = "refund"
	vecRfCiphertext = "uR7YOAJ3VRZktijkn/H/6Ifc58AVdT2S80Ur78Y4y6uh98lNGRpTM0TMGMjx6Pq5mwbi544ekTHcKzdGAaizEYC/Zlk9HRGn9RPNoNxkmnRUSjASAoVz/pYOkbgEu/vSdoOg493rYUpM4qhc2nBvCPf3kaTw0D5WTFooJJgbRfAnCEh+29/O7nLj+Lmk1rQLjXEYXM1Xp19ZJ07vPqEfoFmBgVyrwjsv8GA8c0qeFkLO9CwWdzSqpTlDaw7a/rTqRGCV9zBzYXrsgmD+Au4+vZOiHHttTOUQ40NYs+59IE4ByG2j7RZVYxQZqGwhNg9TePTZHTmDajC/NrqZRLRZcQP7C7qXuEN5HW/zyR2jSgkAGMXcusWTXWEm22i5l1hLIzpctt+KjPN/uA2MFoO5jP0PD6kg+IsoS3hi2lBHY37P7s+aG0+dLIW43VS0R7o2/1NqLofVfNfUB+Sw4Jhyko2hhq4EJ86g+uzAUUDheWY+nMc3TlXt32It0lA2rcIAKuPUQbfYBLCH"
	vecRfPlaintext  = `{"mchid":"1230000109","transaction_id":"4200002211202406011234567890","out_trade_no":"POS20240601000123","refund_id":"50300909932024060112345678901","out_refund_no":"RF20240601000123-1","refund_status":"SUCCESS","success_time":"2024-06-01T15:30:12+08:00","user_received_account":"支付用户零钱","amount":{"total":2580,"refund":1000,"payer_total":2580,"payer_refund":1000}}`
)

// wechatBody is a v3 notification around a given resource.
func wechatBody(eventType, originalType, algorithm, ciphertext, nonce, aad string) string {
	b, err := json.Marshal(map[string]any{
		"id":            "EV-2018022511223320873",
		"create_time":   "2024-06-01T12:00:06+08:00",
		"resource_type": "encrypt-resource",
		"event_type":    eventType,
		"summary":       "支付成功",
		"resource": map[string]any{
			"original_type": originalType, "algorithm": algorithm, "ciphertext": ciphertext,
			"associated_data": aad, "nonce": nonce,
		},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sealed encrypts plaintext with the vector key and wraps it.
func sealed(eventType, originalType, plaintext string) []byte {
	nonce := "n0nce0000001"
	ct := channelstest.EncryptWeChat(vecKey, nonce, originalType, []byte(plaintext))
	return envelope(channels.WeChat, wechatBody(eventType, originalType, wechat.Algorithm, ct, nonce, originalType))
}

func TestWeChatDocVectors(t *testing.T) {
	t.Run("fixture encryption reproduces the vectors", func(t *testing.T) {
		require.Equal(t, vecTxCiphertext, channelstest.EncryptWeChat(vecKey, vecTxNonce, vecTxAAD, []byte(vecTxPlaintext)))
		require.Equal(t, vecRfCiphertext, channelstest.EncryptWeChat(vecKey, vecRfNonce, vecRfAAD, []byte(vecRfPlaintext)))
	})
	t.Run("transaction", func(t *testing.T) {
		res := mustDecode(t, envelope(channels.WeChat, wechatBody("TRANSACTION.SUCCESS", "transaction",
			"AEAD_AES_256_GCM", vecTxCiphertext, vecTxNonce, vecTxAAD)))
		require.False(t, res.Ignored)
		ev := res.Event
		require.Equal(t, eventkey.PaymentReceived, ev.Type)
		require.Equal(t, eventkey.Key("WECHAT:4200002211202406011234567890:PAYMENT_RECEIVED"), ev.Key)
		require.Equal(t, "4200002211202406011234567890", ev.TradeNo)
		require.Equal(t, "POS20240601000123", ev.MerchantOrderNo)
		require.Equal(t, int64(2580), ev.OrderTotal)
		require.Zero(t, ev.RefundAmount)
		require.Zero(t, ev.CumulativeRefunded)
		require.Equal(t, "CNY", ev.Currency)
		require.Equal(t, "SUCCESS", ev.RawStatus)
		require.Equal(t, time.Date(2024, 6, 1, 4, 0, 5, 0, time.UTC), ev.OccurredAt)
		require.Equal(t, int64(1001), ev.TenantID)
		require.Equal(t, channels.WeChat, ev.Channel)
		require.False(t, ev.Cumulative())
	})
	t.Run("partial refund", func(t *testing.T) {
		res := mustDecode(t, envelope(channels.WeChat, wechatBody("REFUND.SUCCESS", "refund",
			"AEAD_AES_256_GCM", vecRfCiphertext, vecRfNonce, vecRfAAD)))
		ev := res.Event
		require.Equal(t, eventkey.RefundSucceeded, ev.Type)
		require.Equal(t, eventkey.Key("WECHAT:4200002211202406011234567890:REFUND_SUCCEEDED:RF20240601000123-1"), ev.Key)
		require.Equal(t, "RF20240601000123-1", ev.RefundNo)
		require.Equal(t, int64(2580), ev.OrderTotal)
		require.Equal(t, int64(1000), ev.RefundAmount, "this refund's own amount")
		require.Zero(t, ev.CumulativeRefunded)
		require.Equal(t, channels.RefundSuccess, res.RefundStatus)
		require.Equal(t, time.Date(2024, 6, 1, 7, 30, 12, 0, time.UTC), ev.OccurredAt)
	})
	t.Run("empty associated data in the message is used as is", func(t *testing.T) {
		ct := channelstest.EncryptWeChat(vecKey, vecTxNonce, "", []byte(vecTxPlaintext))
		mustDecode(t, envelope(channels.WeChat, wechatBody("TRANSACTION.SUCCESS", "transaction", "AEAD_AES_256_GCM", ct, vecTxNonce, "")))
	})
}

func TestWeChatErrors(t *testing.T) {
	good := func(mut func(*[6]string)) []byte {
		f := [6]string{"TRANSACTION.SUCCESS", "transaction", "AEAD_AES_256_GCM", vecTxCiphertext, vecTxNonce, vecTxAAD}
		mut(&f)
		return envelope(channels.WeChat, wechatBody(f[0], f[1], f[2], f[3], f[4], f[5]))
	}
	tamper := []byte(vecTxCiphertext)
	tamper[10] ^= 1
	tests := []struct {
		name string
		mut  func(*[6]string)
		want channels.ErrorKind
	}{
		{"wrong associated data", func(f *[6]string) { f[5] = "refund" }, channels.KindDecryptFailed},
		{"tampered ciphertext", func(f *[6]string) { f[3] = string(tamper) }, channels.KindDecryptFailed},
		{"wrong nonce", func(f *[6]string) { f[4] = "A1b2C3d4E5f7" }, channels.KindDecryptFailed},
		{"short ciphertext", func(f *[6]string) { f[3] = "AAAA" }, channels.KindDecryptFailed},
		{"nonce not 12 bytes", func(f *[6]string) { f[4] = "A1b2" }, channels.KindMalformed},
		{"ciphertext not base64", func(f *[6]string) { f[3] = "!!!" }, channels.KindMalformed},
		{"no ciphertext", func(f *[6]string) { f[3] = "" }, channels.KindMalformed},
		{"other algorithm", func(f *[6]string) { f[2] = "AEAD_SM4_GCM" }, channels.KindUnsupported},
		{"no algorithm", func(f *[6]string) { f[2] = "" }, channels.KindMalformed},
		{"unknown event type", func(f *[6]string) { f[0] = "TRANSACTION.CLOSED" }, channels.KindUnsupported},
		{"no event type", func(f *[6]string) { f[0] = "" }, channels.KindMalformed},
		{"original_type does not fit event", func(f *[6]string) { f[1] = "refund" }, channels.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustFail(t, good(tt.mut), tt.want) })
	}

	t.Run("wrong key", func(t *testing.T) {
		d := channels.NewDecoder(channels.StaticKeys{Default: "fedcba9876543210fedcba9876543210"})
		_, err := d.Decode(good(func(*[6]string) {}))
		kind, _ := channels.KindOf(err)
		require.Equal(t, channels.KindDecryptFailed, kind)
		require.NotContains(t, err.Error(), "fedcba9876543210")
	})
	t.Run("missing key", func(t *testing.T) {
		d := channels.NewDecoder(channels.StaticKeys{Tenants: map[int64][]string{2002: {vecKey}}})
		res, err := d.Decode(good(func(*[6]string) {}))
		kind, _ := channels.KindOf(err)
		require.Equal(t, channels.KindNoKey, kind)
		require.Equal(t, int64(1001), res.Event.TenantID, "tenant kept for labels")
		require.Equal(t, channels.WeChat, res.Event.Channel)
	})
	t.Run("nil provider", func(t *testing.T) {
		_, err := channels.NewDecoder(nil).Decode(good(func(*[6]string) {}))
		kind, _ := channels.KindOf(err)
		require.Equal(t, channels.KindNoKey, kind)
	})
	t.Run("key of wrong length", func(t *testing.T) {
		_, err := channels.NewDecoder(channels.StaticKeys{Default: "short-key"}).Decode(good(func(*[6]string) {}))
		kind, _ := channels.KindOf(err)
		require.Equal(t, channels.KindNoKey, kind)
		require.NotContains(t, err.Error(), "short-key")
	})
	t.Run("tenant key wins over default", func(t *testing.T) {
		d := channels.NewDecoder(channels.StaticKeys{Default: "fedcba9876543210fedcba9876543210", Tenants: map[int64][]string{1001: {vecKey}}})
		_, err := d.Decode(good(func(*[6]string) {}))
		require.NoError(t, err)
	})
}

func TestWeChatPayloads(t *testing.T) {
	tx := func(edit func(m map[string]any)) string {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(vecTxPlaintext), &m))
		edit(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	amount := func(m map[string]any) map[string]any { return m["amount"].(map[string]any) }
	tests := []struct {
		name string
		body string
		want channels.ErrorKind // "" = decodes
	}{
		{"partner mode fields", tx(func(m map[string]any) {
			delete(m, "mchid")
			delete(m, "appid")
			m["sp_mchid"], m["sub_mchid"], m["sp_appid"], m["sub_appid"] = "1900000100", "1900000109", "wx8888888888888888", "wxd678efh567hg6999"
		}), ""},
		{"no currency means CNY", tx(func(m map[string]any) { delete(amount(m), "currency") }), ""},
		{"no success_time falls back to create_time", tx(func(m map[string]any) { delete(m, "success_time") }), ""},
		{"unknown fields tolerated", tx(func(m map[string]any) { m["promotion_detail"] = []any{map[string]any{"amount": 100}} }), ""},
		{"USD", tx(func(m map[string]any) { amount(m)["currency"] = "USD" }), channels.KindUnsupported},
		{"trade_state not SUCCESS", tx(func(m map[string]any) { m["trade_state"] = "NOTPAY" }), channels.KindUnsupported},
		{"negative total", tx(func(m map[string]any) { amount(m)["total"] = -1 }), channels.KindInvalidAmount},
		{"fractional total", tx(func(m map[string]any) { amount(m)["total"] = 25.8 }), channels.KindInvalidAmount},
		{"string total", tx(func(m map[string]any) { amount(m)["total"] = "2580" }), channels.KindInvalidAmount},
		{"zero total", tx(func(m map[string]any) { amount(m)["total"] = 0 }), channels.KindInvalidAmount},
		{"absurd total", tx(func(m map[string]any) { amount(m)["total"] = 1_000_000_000_001 }), channels.KindInvalidAmount},
		{"missing total", tx(func(m map[string]any) { delete(amount(m), "total") }), channels.KindInvalidAmount},
		{"missing transaction_id", tx(func(m map[string]any) { delete(m, "transaction_id") }), channels.KindMalformed},
		{"missing out_trade_no", tx(func(m map[string]any) { delete(m, "out_trade_no") }), channels.KindMalformed},
		{"trade no over 64 bytes", tx(func(m map[string]any) { m["transaction_id"] = strings.Repeat("4", 65) }), channels.KindMalformed},
		{"trade no with colon", tx(func(m map[string]any) { m["transaction_id"] = "4200:1" }), channels.KindMalformed},
		{"trade no with space", tx(func(m map[string]any) { m["transaction_id"] = "4200 1" }), channels.KindMalformed},
		{"bad success_time", tx(func(m map[string]any) { m["success_time"] = "2024-06-01 12:00:05" }), channels.KindMalformed},
		{"plaintext not JSON", "not json", channels.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := sealed("TRANSACTION.SUCCESS", "transaction", tt.body)
			if tt.want == "" {
				res := mustDecode(t, v)
				require.Equal(t, int64(2580), res.Event.OrderTotal)
				return
			}
			mustFail(t, v, tt.want)
		})
	}
}

func TestWeChatRefundStatuses(t *testing.T) {
	trade := channelstest.NewTrade(channels.WeChat, 7)
	refund := channelstest.Refund{No: "RF-7-1", Amount: 500}
	for _, tt := range []struct {
		status string
		want   channels.RefundStatus
	}{
		{"ABNORMAL", channels.RefundAbnormal},
		{"CLOSED", channels.RefundClosed},
	} {
		t.Run(tt.status+" is ignored but keeps the refund's identity", func(t *testing.T) {
			res := mustDecode(t, channelstest.WeChatRefund(trade, refund, tt.status, channelstest.Delivery{}))
			require.True(t, res.Ignored)
			require.Contains(t, res.IgnoreReason, tt.status)
			require.Equal(t, tt.want, res.RefundStatus)
			require.Equal(t, trade.TenantID, res.Event.TenantID)
			require.Equal(t, channels.WeChat, res.Event.Channel)
			require.Equal(t, trade.TradeNo, res.Event.TradeNo)
			require.Equal(t, "RF-7-1", res.Event.RefundNo)
			require.Equal(t, tt.status, res.Event.RawStatus)
		})
	}
	t.Run("ABNORMAL then SUCCESS: same refund key", func(t *testing.T) {
		ab := mustDecode(t, channelstest.WeChatRefund(trade, refund, "ABNORMAL", channelstest.Delivery{}))
		ok := mustDecode(t, channelstest.WeChatRefund(trade, refund, "SUCCESS", channelstest.Delivery{}))
		require.Equal(t, ab.Event.RefundNo, ok.Event.RefundNo)
		require.Equal(t, eventkey.Key("WECHAT:"+trade.TradeNo+":REFUND_SUCCEEDED:RF-7-1"), ok.Event.Key)
	})
	t.Run("ABNORMAL without refund number is malformed", func(t *testing.T) {
		mustFail(t, channelstest.WeChatRefund(trade, refund, "ABNORMAL", channelstest.Delivery{
			Edit: func(m map[string]any) { delete(m, "out_refund_no") },
		}), channels.KindMalformed)
	})
	t.Run("query API's status field", func(t *testing.T) {
		res := mustDecode(t, channelstest.WeChatRefund(trade, refund, "SUCCESS", channelstest.Delivery{
			Edit: func(m map[string]any) { m["status"] = m["refund_status"]; delete(m, "refund_status") },
		}))
		require.Equal(t, "SUCCESS", res.Event.RawStatus)
	})
	t.Run("status contradicting event type", func(t *testing.T) {
		mustFail(t, channelstest.WeChatRefund(trade, refund, "SUCCESS", channelstest.Delivery{
			Edit: func(m map[string]any) { m["refund_status"] = "PROCESSING" },
		}), channels.KindUnsupported)
	})
	t.Run("zero refund amount", func(t *testing.T) {
		mustFail(t, channelstest.WeChatRefund(trade, refund, "SUCCESS", channelstest.Delivery{
			Edit: func(m map[string]any) { m["amount"].(map[string]any)["refund"] = 0 },
		}), channels.KindInvalidAmount)
	})
	t.Run("refund above the total is settlement's business", func(t *testing.T) {
		res := mustDecode(t, channelstest.WeChatRefund(trade, channelstest.Refund{No: "RF-big", Amount: trade.Total + 1}, "SUCCESS", channelstest.Delivery{}))
		require.Equal(t, trade.Total+1, res.Event.RefundAmount)
	})
	t.Run("partner mode refund", func(t *testing.T) {
		mustDecode(t, channelstest.WeChatRefund(trade, refund, "SUCCESS", channelstest.Delivery{Partner: true}))
	})
}

func TestWeChatRefundNumbersAreCaseSensitive(t *testing.T) {
	trade := channelstest.NewTrade(channels.WeChat, 8)
	lower := mustDecode(t, channelstest.WeChatRefund(trade, channelstest.Refund{No: "rf-1", Amount: 100}, "SUCCESS", channelstest.Delivery{}))
	upper := mustDecode(t, channelstest.WeChatRefund(trade, channelstest.Refund{No: "RF-1", Amount: 100}, "SUCCESS", channelstest.Delivery{}))
	require.NotEqual(t, lower.Event.Key, upper.Event.Key)
	require.Equal(t, "rf-1", lower.Event.RefundNo)
	require.Equal(t, "RF-1", upper.Event.RefundNo)
}

func TestWeChatRedeliveryKeepsKeyAndFingerprint(t *testing.T) {
	trade := channelstest.NewTrade(channels.WeChat, 9)
	refund := channelstest.Refund{No: "RF-9-1", Amount: 800}
	for name, build := range map[string]func(channelstest.Delivery) []byte{
		"payment": func(d channelstest.Delivery) []byte { return channelstest.WeChatPayment(trade, d) },
		"refund":  func(d channelstest.Delivery) []byte { return channelstest.WeChatRefund(trade, refund, "SUCCESS", d) },
	} {
		t.Run(name, func(t *testing.T) {
			first := build(channelstest.Delivery{})
			again := build(channelstest.Delivery{Attempt: 3})
			explicit := build(channelstest.Delivery{ID: "another-envelope-id", Nonce: "QWERTYUIOPAS", Partner: true})
			require.NotEqual(t, first, again)
			a, b, c := mustDecode(t, first), mustDecode(t, again), mustDecode(t, explicit)
			require.Equal(t, a.Event.Key, b.Event.Key)
			require.Equal(t, a.Event.Fingerprint, b.Event.Fingerprint)
			require.Equal(t, a.Event.Fingerprint, c.Event.Fingerprint)
		})
	}
}
