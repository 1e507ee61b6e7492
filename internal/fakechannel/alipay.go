package fakechannel

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sample"
)

// AlipayPath is the fake Alipay gateway's path: GatewayURL is URL plus it.
const AlipayPath = "/gateway.do"

// beijing is the zone Alipay's request timestamps are written in.
var beijing = time.FixedZone("CST", 8*3600)

// Alipay is a fake Alipay OpenAPI gateway (POST /gateway.do, methods
// alipay.trade.query and alipay.trade.fastpay.refund.query) for the test
// application AlipayAppID. A request must be signed RSA2 with
// Keys.Merchant over its sorted parameters and carry a timestamp within
// RequestWindow, else it is answered code 40002 (isv.invalid-signature,
// isv.invalid-app-id, …), as Alipay answers. Every answer is signed with
// Keys.Platform over the raw text of its …_response member.
type Alipay struct{ *fake }

// NewAlipay starts a fake Alipay gateway; Close stops it.
func NewAlipay(opts Options) (*Alipay, error) {
	a := &Alipay{}
	f, err := newFake(opts, a.handle)
	if err != nil {
		return nil, err
	}
	a.fake = f
	return a, nil
}

// MustAlipay starts a fake Alipay gateway that tb's cleanup stops.
func MustAlipay(tb TB, opts Options) *Alipay {
	tb.Helper()
	return mustFake(tb, func() (*Alipay, error) { return NewAlipay(opts) })
}

// GatewayURL is the gateway's URL (PAYCB_QUERY_ALIPAY_URL).
func (a *Alipay) GatewayURL() string { return a.URL() + AlipayPath }

// alipayBiz is the biz_content of the two query methods.
type alipayBiz struct {
	TradeNo      string `json:"trade_no"`
	OutTradeNo   string `json:"out_trade_no"`
	OutRequestNo string `json:"out_request_no"`
}

func (a *Alipay) handle(r *http.Request, body []byte, rec *Request) reply {
	params, err := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || r.URL.Path != AlipayPath || err != nil {
		return reply{status: http.StatusNotFound, body: []byte("not the gateway")}
	}
	method := params.Get("method")
	rec.Merchant = params.Get("app_id")
	if method != alipay.MethodTradeQuery && method != alipay.MethodRefundQuery {
		return a.answer(Step{}, "error_response", map[string]string{
			"code": "40002", "msg": "Invalid Arguments", "sub_code": "isv.invalid-method", "sub_msg": "不存在的方法名",
		})
	}
	if why, sub := a.checkRequest(params); why != "" {
		rec.SignatureError = why
		member := method
		if sub == "isv.invalid-app-id" {
			member = "error_response"
		}
		return a.answer(Step{}, member, map[string]string{"code": "40002", "msg": "Invalid Arguments", "sub_code": sub, "sub_msg": why})
	}
	rec.SignatureOK = true
	var biz alipayBiz
	if err := json.Unmarshal([]byte(params.Get("biz_content")), &biz); err != nil {
		return a.answer(Step{}, method, map[string]string{
			"code": "40004", "msg": "Business Failed", "sub_code": "ACQ.INVALID_PARAMETER", "sub_msg": "参数无效",
		})
	}
	rec.Asked = biz.TradeNo
	if rec.Asked == "" {
		rec.Asked = biz.OutTradeNo
	}
	notExist := map[string]string{"code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_NOT_EXIST", "sub_msg": "交易不存在"}
	if method == alipay.MethodTradeQuery {
		t, st, ok := a.takePayment(biz.TradeNo, biz.OutTradeNo)
		rec.Step = st
		if !ok {
			return a.answer(Step{}, method, notExist)
		}
		return a.payment(st, t)
	}
	rec.Asked = "refund:" + biz.OutRequestNo
	t, rf, st, ok := a.takeRefund(biz.TradeNo, biz.OutTradeNo, biz.OutRequestNo)
	rec.Step = st
	switch {
	case !ok && t.TradeNo == "":
		return a.answer(Step{}, method, notExist)
	case !ok:
		return a.answer(Step{}, method, noRefundData(t, biz.OutRequestNo))
	}
	return a.refund(st, t, rf)
}

// checkRequest checks a request as the gateway does; it returns why it is
// refused and the sub_code, or "" when it is accepted.
func (a *Alipay) checkRequest(params url.Values) (why, subCode string) {
	for _, k := range []string{"app_id", "method", "charset", "sign_type", "sign", "timestamp", "version", "biz_content"} {
		if len(params[k]) != 1 {
			return fmt.Sprintf("%s is missing or repeated", k), "isv.missing-signature"
		}
	}
	switch {
	case params.Get("app_id") != AlipayAppID:
		return "app_id " + params.Get("app_id") + " is unknown", "isv.invalid-app-id"
	case params.Get("sign_type") != "RSA2":
		return "sign_type is not RSA2", "isv.invalid-signature-type"
	case params.Get("charset") != "utf-8":
		return "charset is not utf-8", "isv.invalid-charset"
	}
	ts, err := time.ParseInLocation(alipay.TimeLayout, params.Get("timestamp"), beijing)
	if err != nil {
		return "timestamp is not yyyy-MM-dd HH:mm:ss", "isv.invalid-timestamp"
	}
	if d := a.now().Sub(ts).Abs(); d > RequestWindow {
		return fmt.Sprintf("timestamp is %s from the gateway's clock", d.Truncate(time.Second)), "isv.invalid-timestamp"
	}
	if err := alipay.VerifyRSA2([]byte(alipay.SignContent(params)), params.Get("sign"), &a.keys.Merchant.PublicKey); err != nil {
		return "验签出错, 建议检查签名字符串或签名私钥与应用公钥是否匹配", "isv.invalid-signature"
	}
	return "", ""
}

func (a *Alipay) payment(st Step, t sample.Trade) reply {
	if st.HTTPStatus != 0 {
		return bareStatus(st)
	}
	status := ""
	switch st.Answer {
	case Success, "":
		status = alipay.TradeSuccess
	case Pending:
		status = alipay.WaitBuyerPay
	case Closed, Uncertain:
		// An unpaid close and a full refund answer alike: the reader
		// cannot conclude (docs/queries.md).
		status = alipay.TradeClosed
	default:
		return a.errorAnswer(st, alipay.MethodTradeQuery)
	}
	if st.State != "" {
		status = st.State
	}
	body, err := alipay.SampleTradeQueryAnswer(t, status, a.signer(st))
	if err != nil {
		panic(fmt.Sprintf("fakechannel: %v", err)) // a generated key always signs
	}
	return reply{status: http.StatusOK, header: alipayHeader(), body: body, delay: st.Delay}
}

func (a *Alipay) refund(st Step, t sample.Trade, r sample.Refund) reply {
	if st.HTTPStatus != 0 {
		return bareStatus(st)
	}
	switch st.Answer {
	case Success, "":
		body, err := alipay.SampleRefundQueryAnswer(t, r, a.signer(st))
		if err != nil {
			panic(fmt.Sprintf("fakechannel: %v", err)) // a generated key always signs
		}
		return reply{status: http.StatusOK, header: alipayHeader(), body: body, delay: st.Delay}
	case Pending, Closed:
		// Not received yet, or failed: the answer carries no refund data.
		return a.answer(st, alipay.MethodRefundQuery, noRefundData(t, r.No))
	case Uncertain:
		// Refund data without refund_status: the old and new documents
		// disagree on what it means.
		m := noRefundData(t, r.No)
		m["refund_amount"] = alipay.Yuan(r.Amount)
		m["total_amount"] = alipay.Yuan(t.Total)
		return a.answer(st, alipay.MethodRefundQuery, m)
	}
	return a.errorAnswer(st, alipay.MethodRefundQuery)
}

// noRefundData is a refund query's answer that names the refund and
// carries no refund data.
func noRefundData(t sample.Trade, refundNo string) map[string]string {
	return map[string]string{
		"code": "10000", "msg": "Success",
		"out_request_no": refundNo, "out_trade_no": t.MerchantOrderNo, "trade_no": t.TradeNo,
	}
}

// errorAnswer is the answer of NotFound, RateLimited and SystemError.
func (a *Alipay) errorAnswer(st Step, method string) reply {
	var m map[string]string
	switch st.Answer {
	case NotFound:
		m = map[string]string{"code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_NOT_EXIST", "sub_msg": "交易不存在"}
	case RateLimited:
		m = map[string]string{"code": "40005", "msg": "Call Limited", "sub_msg": "调用频次超限"}
	case SystemError:
		m = map[string]string{"code": "20000", "msg": "Service Currently Unavailable", "sub_code": "isp.unknow-error", "sub_msg": "系统繁忙"}
	default:
		panic(fmt.Sprintf("fakechannel: unknown answer %q", st.Answer)) // a test's own mistake
	}
	return a.answer(st, method, m)
}

// answer is response as the member of method ("error_response" for the
// gateway's own errors), signed as st says.
func (a *Alipay) answer(st Step, method string, response map[string]string) reply {
	raw := sample.MustJSON(response)
	member := "error_response"
	if method != member {
		member = strings.ReplaceAll(method, ".", "_") + "_response"
	}
	body := []byte(`{"` + member + `":` + string(raw))
	if key := a.signer(st); key != nil {
		sig, err := alipay.SignRSA2(string(raw), key)
		if err != nil {
			panic(fmt.Sprintf("fakechannel: %v", err)) // a generated key always signs
		}
		body = append(body, `,"sign":"`+sig+`"`...)
	}
	body = append(body, '}')
	return reply{status: http.StatusOK, header: alipayHeader(), body: body, delay: st.Delay}
}

// signer is the key st's answer is signed with (nil: unsigned).
func (a *Alipay) signer(st Step) *rsa.PrivateKey {
	switch {
	case st.Unsigned:
		return nil
	case st.Forged:
		return a.keys.Other
	}
	return a.keys.Platform
}

func alipayHeader() http.Header {
	return http.Header{"Content-Type": {"text/html;charset=utf-8"}}
}
