package wechat

import (
	"time"

	"github.com/paycallback/paycallback/pkg/channels/sample"
)

// Realistic query answers for the sample trades, for tests and fake
// channel servers; like sample.go, production code.

// SampleMerchantID is the direct-mode mchid of the sample callbacks and
// answers.
const SampleMerchantID = "1230000109"

// SamplePaymentAnswer is the 200 body of a payment query for t (direct
// mode) in trade_state state. A paid state (SUCCESS, REFUND) carries what
// the TRANSACTION.SUCCESS callback carries; the others carry what WeChat
// answers for an unpaid order: no transaction_id, no success_time,
// amount{payer_currency, total}.
func SamplePaymentAnswer(t sample.Trade, state string) []byte {
	t = t.WithDefaults()
	payload := map[string]any{
		"appid":            "wxd678efh567hg6787",
		"mchid":            SampleMerchantID,
		"out_trade_no":     t.MerchantOrderNo,
		"trade_state":      state,
		"trade_state_desc": sampleStateDesc[state],
		"promotion_detail": []any{},
	}
	switch state {
	case "SUCCESS", "REFUND":
		payload["transaction_id"] = t.TradeNo
		payload["trade_type"] = "JSAPI"
		payload["bank_type"] = "OTHERS"
		payload["attach"] = ""
		payload["success_time"] = sampleTime(t.PaidAt)
		payload["payer"] = map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
		payload["amount"] = map[string]any{"total": t.Total, "payer_total": t.Total, "currency": "CNY", "payer_currency": "CNY"}
	default:
		payload["scene_info"] = map[string]any{"device_id": ""}
		payload["amount"] = map[string]any{"total": t.Total, "payer_currency": "CNY"}
	}
	return sample.MustJSON(payload)
}

// sampleStateDesc is WeChat's trade_state_desc of each state.
var sampleStateDesc = map[string]string{
	"SUCCESS": "支付成功", "REFUND": "转入退款", "NOTPAY": "订单未支付", "CLOSED": "已关闭",
	"REVOKED": "已撤销", "USERPAYING": "用户支付中", "PAYERROR": "支付失败", "ACCEPT": "已接收，等待扣款",
}

// SampleRefundAnswer is the 200 body of a refund query for refund r of t
// with status (SUCCESS, PROCESSING, ABNORMAL or CLOSED), as the REFUND.*
// callback's resource has it but with the query's "status" member;
// success_time only on SUCCESS.
func SampleRefundAnswer(t sample.Trade, r sample.Refund, status string) []byte {
	t = t.WithDefaults()
	r = r.WithDefaults(t)
	payload := map[string]any{
		"refund_id":             "503009099320240601" + sample.Digits(t.TradeNo+r.No, 11),
		"out_refund_no":         r.No,
		"transaction_id":        t.TradeNo,
		"out_trade_no":          t.MerchantOrderNo,
		"channel":               "ORIGINAL",
		"user_received_account": "支付用户零钱",
		"create_time":           sampleTime(r.At.Add(-3 * time.Second)),
		"status":                status,
		"funds_account":         "UNSETTLED",
		"promotion_detail":      []any{},
		"amount": map[string]any{
			"total": t.Total, "refund": r.Amount, "payer_total": t.Total, "payer_refund": r.Amount,
			"settlement_total": t.Total, "settlement_refund": r.Amount, "discount_refund": 0, "currency": "CNY",
		},
	}
	if status == "SUCCESS" {
		payload["success_time"] = sampleTime(r.At)
	}
	return sample.MustJSON(payload)
}
