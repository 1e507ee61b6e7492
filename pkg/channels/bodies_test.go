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
