package wechat_test

import (
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// The fuzz targets check, for any input: no panic, every failure is a
// typed decoder error, and every money event validates with a parseable key
// and non-negative amounts (checkResult). Seeds live in testdata/fuzz.

func FuzzWeChat(f *testing.F) {
	f.Add("TRANSACTION.SUCCESS", []byte(vecTxPlaintext))
	f.Add("REFUND.SUCCESS", []byte(vecRfPlaintext))
	f.Add("REFUND.ABNORMAL", []byte(`{"transaction_id":"4200","out_trade_no":"P1","out_refund_no":"rf","refund_status":"ABNORMAL"}`))
	d := testDecoder()
	f.Fuzz(func(t *testing.T, eventType string, plaintext []byte) {
		original := "transaction"
		if len(eventType) >= 7 && eventType[:7] == "REFUND." {
			original = "refund"
		}
		ct := channelstest.EncryptWeChat(vecKey, vecTxNonce, original, plaintext)
		res, err := d.Decode(envelope(channels.WeChat, wechatBody(eventType, original, wechat.Algorithm, ct, vecTxNonce, original)))
		checkResult(t, res, err)
	})
}
