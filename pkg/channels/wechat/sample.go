package wechat

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/statements"
)

// The channel's realistic callbacks, for tests, the demo and simulations
// (package sample describes trades, refunds and deliveries). Like sample,
// this is production code: it never imports testing.

// SampleBodies are the channel's builders as package sample knows them;
// package allchannels registers them.
func SampleBodies() sample.Bodies {
	return sample.Bodies{
		TradeNo: func(seq int) string { return fmt.Sprintf("42000022112024060%012d", seq) },
		Payment: SamplePayment,
		Refund: func(t sample.Trade, r sample.Refund, d sample.Delivery) []byte {
			return SampleRefund(t, r, "SUCCESS", d)
		},
		StatementLines: func(evs []channels.Event) ([]statements.Line, error) { return SampleStatementLines(evs), nil },
		Statement: func(lines []statements.Line) ([]byte, error) {
			f, err := SampleBill(lines, SampleBillOptions{})
			return f.Data, err
		},
	}
}

// SamplePayment is a TRANSACTION.SUCCESS notification for t.
func SamplePayment(t sample.Trade, d sample.Delivery) []byte {
	t = t.WithDefaults()
	payload := map[string]any{
		"out_trade_no":     t.MerchantOrderNo,
		"transaction_id":   t.TradeNo,
		"trade_type":       "JSAPI",
		"trade_state":      "SUCCESS",
		"trade_state_desc": "支付成功",
		"bank_type":        "OTHERS",
		"attach":           "",
		"success_time":     sampleTime(t.PaidAt),
		"amount": map[string]any{
			"total": t.Total, "payer_total": t.Total, "currency": "CNY", "payer_currency": "CNY",
		},
	}
	if d.Partner {
		payload["sp_mchid"], payload["sub_mchid"] = "1900000100", "1900000109"
		payload["sp_appid"], payload["sub_appid"] = "wx8888888888888888", "wxd678efh567hg6999"
		payload["payer"] = map[string]any{"sp_openid": "oUpF8uN95-Ptaags6E_roPHg7AG0"}
	} else {
		payload["mchid"], payload["appid"] = SampleMerchantID, "wxd678efh567hg6787"
		payload["payer"] = map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
	}
	return sampleEnvelope(t, TransactionSuccess, "transaction", "支付成功", t.PaidAt, payload, t.TradeNo, d)
}

// SampleRefund is a REFUND.<status> notification (status SUCCESS, ABNORMAL
// or CLOSED) for refund r of t; success_time is only written on SUCCESS.
func SampleRefund(t sample.Trade, r sample.Refund, status string, d sample.Delivery) []byte {
	t = t.WithDefaults()
	r = r.WithDefaults(t)
	payload := map[string]any{
		"out_trade_no":          t.MerchantOrderNo,
		"transaction_id":        t.TradeNo,
		"refund_id":             "503009099320240601" + sample.Digits(t.TradeNo+r.No, 11),
		"out_refund_no":         r.No,
		"refund_status":         status,
		"user_received_account": "支付用户零钱",
		"amount": map[string]any{
			"total": t.Total, "refund": r.Amount, "payer_total": t.Total, "payer_refund": r.Amount,
		},
	}
	if status == "SUCCESS" {
		payload["success_time"] = sampleTime(r.At)
	}
	if d.Partner {
		payload["sp_mchid"], payload["sub_mchid"] = "1900000100", "1900000109"
	} else {
		payload["mchid"] = SampleMerchantID
	}
	return sampleEnvelope(t, "REFUND."+status, "refund", "退款"+status, r.At, payload, t.TradeNo+"/"+r.No+"/"+status, d)
}

// SampleBody builds a v3 notification body (plaintext outer JSON) around an
// encrypted resource. Fields left empty in d get the defaults derived from
// seed and d.Attempt.
func SampleBody(eventType, originalType, summary string, createTime time.Time, plaintext []byte, seed string, d sample.Delivery) string {
	key := d.APIv3Key
	if key == "" {
		key = sample.APIv3Key
	}
	nonce := d.Nonce
	if nonce == "" {
		nonce = sample.Digest(seed, d.Attempt, "nonce")[:12]
	}
	id := d.ID
	if id == "" {
		h := sample.Digest(seed, d.Attempt, "id")
		id = h[:8] + "-" + h[8:12] + "-5" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
	}
	body := map[string]any{
		"id":            id,
		"create_time":   sampleTime(createTime.Add(sample.AttemptDelay(d.Attempt, 15*time.Second))),
		"resource_type": ResourceType,
		"event_type":    eventType,
		"summary":       summary,
		"resource": map[string]any{
			"original_type":   originalType,
			"algorithm":       Algorithm,
			"ciphertext":      Encrypt(key, nonce, originalType, plaintext),
			"associated_data": originalType,
			"nonce":           nonce,
		},
	}
	return string(sample.MustJSON(body))
}

// Encrypt seals plaintext the way WeChat Pay does: AES-256-GCM with
// the 32-byte APIv3 key as raw bytes, the 12-byte nonce and associated data
// as raw bytes, and returns base64(ciphertext || tag).
func Encrypt(key, nonce, associatedData string, plaintext []byte) string {
	block, err := aes.NewCipher([]byte(key))
	if err != nil {
		panic("sample: apiv3 key: " + err.Error())
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	if len(nonce) != gcm.NonceSize() {
		panic("sample: wechat nonce must be 12 bytes")
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(associatedData)))
}

func sampleEnvelope(t sample.Trade, eventType, originalType, summary string, at time.Time, payload map[string]any, seed string, d sample.Delivery) []byte {
	if d.Edit != nil {
		d.Edit(payload)
	}
	notify := d.NotifyAt(at)
	body := SampleBody(eventType, originalType, summary, at.Add(time.Second), sample.MustJSON(payload), seed, d)
	return sample.Envelope(t.TenantID, Code, body, d.ReceivedAtFor(notify))
}

func sampleTime(t time.Time) string { return t.In(sample.Beijing).Format(time.RFC3339) }
