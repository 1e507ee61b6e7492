package channels_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/stretchr/testify/require"
)

// Callback bodies the decoder tests of this package share with the
// channel packages' own tests (pkg/channels/wechat, alipay, sqb), whose
// copies are the originals.

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

// sqbDocPayment is Shouqianba's documented example payment callback
// (docs/channels.md), verbatim.
const sqbDocPayment = `{"terminal_sn":"01939202039923029","sn":"7893259247405832","client_sn":"w145206259311176","client_tsn":"w145206259311176","trade_no":"4003262001201704187463804544","status":"SUCCESS","order_status":"PAID","payway":"3","sub_payway":"1","total_amount":"101","net_amount":"101","subject":"Apple iPhone 6s plus","finish_time":"1492506702864","channel_finish_time":"1492506702000","operator":"test","reflect":"","payment_list":[{"type":"BANKCARD_DEBIT","amount_total":"1"},{"type":"DISCOUNT_CHANNEL_MCH","amount_total":"100"}]}`

func readPublished(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(publishedDir(name), "testdata", "published", name))
	require.NoError(tb, err)
	return string(b)
}

// publishedDir is the channel package whose testdata holds the published
// sample name ("wechat/…").
func publishedDir(name string) string {
	dir, _, _ := strings.Cut(name, "/")
	return dir
}
