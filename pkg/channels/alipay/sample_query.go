package alipay

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"

	"github.com/paycallback/paycallback/pkg/channels/sample"
)

// The channel's realistic query answers, for tests, fake channel servers
// and the demo: the answers Alipay gives to a query about a sample trade,
// signed like Alipay's (docs/queries.md).

// sampleTradeQuery is the alipay_trade_query_response of a sample answer.
type sampleTradeQuery struct {
	Code           string `json:"code"`
	Msg            string `json:"msg"`
	BuyerLogonID   string `json:"buyer_logon_id"`
	BuyerPayAmount string `json:"buyer_pay_amount"`
	OutTradeNo     string `json:"out_trade_no"`
	ReceiptAmount  string `json:"receipt_amount"`
	SendPayDate    string `json:"send_pay_date,omitempty"`
	TotalAmount    string `json:"total_amount"`
	TradeNo        string `json:"trade_no"`
	TradeStatus    string `json:"trade_status"`
}

// sampleRefundQuery is the alipay_trade_fastpay_refund_query_response of
// a sample answer.
type sampleRefundQuery struct {
	Code         string `json:"code"`
	Msg          string `json:"msg"`
	GmtRefundPay string `json:"gmt_refund_pay"`
	OutRequestNo string `json:"out_request_no"`
	OutTradeNo   string `json:"out_trade_no"`
	RefundAmount string `json:"refund_amount"`
	RefundStatus string `json:"refund_status"`
	TotalAmount  string `json:"total_amount"`
	TradeNo      string `json:"trade_no"`
}

// SampleTradeQueryAnswer is Alipay's answer to alipay.trade.query about
// t in trade_status status, signed with key (Alipay's private key; nil
// leaves the answer unsigned). A paid status carries send_pay_date, t's
// payment time.
func SampleTradeQueryAnswer(t sample.Trade, status string, key *rsa.PrivateKey) ([]byte, error) {
	t = t.WithDefaults()
	resp := sampleTradeQuery{
		Code: codeOK, Msg: "Success",
		BuyerLogonID:   "138***" + sample.Digits(t.MerchantOrderNo, 4),
		BuyerPayAmount: Yuan(t.Total),
		OutTradeNo:     t.MerchantOrderNo,
		ReceiptAmount:  Yuan(t.Total),
		TotalAmount:    Yuan(t.Total),
		TradeNo:        t.TradeNo,
		TradeStatus:    status,
	}
	if status == TradeSuccess || status == TradeFinished {
		resp.SendPayDate = sampleTime(t.PaidAt)
	} else {
		resp.BuyerPayAmount, resp.ReceiptAmount = "0.00", "0.00"
	}
	return sampleAnswer(MethodTradeQuery, resp, key)
}

// SampleRefundQueryAnswer is Alipay's answer to
// alipay.trade.fastpay.refund.query about refund r of t (refund_amount
// r's own amount; REFUND_SUCCESS), signed with key (nil: unsigned).
func SampleRefundQueryAnswer(t sample.Trade, r sample.Refund, key *rsa.PrivateKey) ([]byte, error) {
	t = t.WithDefaults()
	r = r.WithDefaults(t)
	return sampleAnswer(MethodRefundQuery, sampleRefundQuery{
		Code: codeOK, Msg: "Success",
		GmtRefundPay: sampleTime(r.At),
		OutRequestNo: r.No,
		OutTradeNo:   t.MerchantOrderNo,
		RefundAmount: Yuan(r.Amount),
		RefundStatus: RefundSuccess,
		TotalAmount:  Yuan(t.Total),
		TradeNo:      t.TradeNo,
	}, key)
}

// SampleAnswer wraps the JSON object response as Alipay's answer to
// method, signed with key over its exact bytes (nil: unsigned). It fails
// only when key cannot sign.
func SampleAnswer(method string, response []byte, key *rsa.PrivateKey) ([]byte, error) {
	body := append([]byte(`{"`+responseMember(method)+`":`), response...)
	if key != nil {
		sig, err := SignRSA2(string(response), key)
		if err != nil {
			return nil, fmt.Errorf("sample alipay answer: %w", err)
		}
		body = append(body, `,"sign":"`+sig+`"`...)
	}
	return append(body, '}'), nil
}

func sampleAnswer(method string, resp any, key *rsa.PrivateKey) ([]byte, error) {
	raw, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("sample alipay answer: %w", err)
	}
	return SampleAnswer(method, raw, key)
}
