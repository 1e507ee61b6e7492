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

// FuzzQueryAnswer reads any signed 200 body as the answer to a payment or
// a refund query: no panic, every failure a typed decoder error, and only
// a settled answer carries events, each valid (answerer.read checks it).
func FuzzQueryAnswer(f *testing.F) {
	for _, name := range []string{
		"a9_skit_payment_answer.json", "a9_skit_partner_payment_answer.json", "a10_notpay_answer.json",
		"a10_success_answer.json", "a10_notpay_6000_answer.json",
	} {
		f.Add(false, queryFile(f, name))
	}
	f.Add(true, queryFile(f, "a9_skit_refund_answer.json"))
	a := newAnswerer(f, "1900006XXX")
	f.Fuzz(func(t *testing.T, refund bool, body []byte) {
		target := paymentTarget(a.merchant, "")
		target.TradeNo = "4200000891202103228088184743"
		if refund {
			target = refundTarget(a.merchant, "sdk12345678920210326145039")
		}
		_, err := a.read(t, target, a.signed(t, 200, body))
		if err != nil {
			kind, ok := channels.KindOf(err)
			if !ok || !decodeKinds[kind] {
				t.Fatalf("error %v is not a typed decoder error", err)
			}
		}
	})
}
