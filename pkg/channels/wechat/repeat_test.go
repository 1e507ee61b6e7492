package wechat_test

import (
	"strings"
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// TestWeChatRepeatedMemberIsMalformed: a notification or a decrypted
// resource that names a member twice, exactly or in another case, at any
// depth, is refused; encoding/json would read the last amount.total
// (999900 where the first said 2580) or the last currency.
func TestWeChatRepeatedMemberIsMalformed(t *testing.T) {
	body := wechatBody(wechat.TransactionSuccess, "transaction", wechat.Algorithm, vecTxCiphertext, vecTxNonce, vecTxAAD)
	mustDecode(t, envelope(channels.WeChat, body))
	refundBody := string(sealed(wechat.RefundSuccess, "refund", vecRfPlaintext))
	mustDecode(t, []byte(refundBody))
	tx := func(old, repl string) []byte {
		if !strings.Contains(vecTxPlaintext, old) {
			t.Fatalf("%s is not in the transaction", old)
		}
		return sealed(wechat.TransactionSuccess, "transaction", strings.Replace(vecTxPlaintext, old, repl, 1))
	}
	for _, tt := range []struct {
		name     string
		value    []byte
		repeated string
	}{
		{"event_type twice", envelope(channels.WeChat, channelstest.WithMembers(body, `"event_type":"REFUND.SUCCESS"`)), "event_type"},
		{"resource in another case", envelope(channels.WeChat, channelstest.WithMembers(body, `"Resource":{"nonce":"999900"}`)), "Resource"},
		{"nonce twice in resource", envelope(channels.WeChat, strings.Replace(body, `"nonce":`, `"NONCE":"999900","nonce":`, 1)), "nonce"},
		{"amount.total in upper case", tx(`"total":2580`, `"total":2580,"TOTAL":999900`), "TOTAL"},
		{"amount.total twice", tx(`"total":2580`, `"total":2580,"total":999900`), "total"},
		{"amount.total escaped", tx(`"total":2580`, `"total":2580,"t\u006ftal":999900`), "total"},
		{"amount twice", tx(`"amount":{`, `"amount":{"total":999900},"Amount":{`), "Amount"},
		{"currency USD then CNY", tx(`"currency":"CNY"`, `"currency":"USD","Currency":"CNY"`), "Currency"},
		{"mchid twice", tx(`"mchid":"1230000109"`, `"mchid":"1230000109","MchId":"999900"`), "MchId"},
		{"in payer", tx(`"openid":`, `"OpenID":"999900","openid":`), "openid"},
		{"refund amount.refund in another case", sealed(wechat.RefundSuccess, "refund",
			strings.Replace(vecRfPlaintext, `"refund":1000`, `"refund":1000,"Refund":999900`, 1)), "Refund"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			channelstest.RequireRepeatRefused(t, testDecoder(), tt.value, tt.repeated, "999900")
		})
	}
}

// TestWeChatResourceViewOfARepeatedMemberIsNil: dlq show has no one
// reading of a notification that names a member twice to show.
func TestWeChatResourceViewOfARepeatedMemberIsNil(t *testing.T) {
	spec, ok := channels.Lookup(channels.WeChat)
	if !ok {
		t.Fatal("WECHAT is not registered")
	}
	body := wechatBody(wechat.TransactionSuccess, "transaction", wechat.Algorithm, vecTxCiphertext, vecTxNonce, vecTxAAD)
	env, err := channels.ParseEnvelope(envelope(channels.WeChat, body))
	if err != nil {
		t.Fatal(err)
	}
	if spec.ViewResource(env, nil) == nil {
		t.Fatal("no view of a valid notification")
	}
	env.Body = strings.Replace(body, `"nonce":`, `"Nonce":"A1b2C3d4E5f7","nonce":`, 1)
	if v := spec.ViewResource(env, nil); v != nil {
		t.Fatalf("a view of a repeated nonce: %+v", v)
	}
}
