package fakechannel

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// RequestWindow is how far a fake allows a request's timestamp to be from
// its clock (WeChat's own tolerance is UNCONFIRMED; its answers' window is
// the same 300 s).
const RequestWindow = 5 * time.Minute

// staleBy is how far back a Stale answer is dated: outside
// wechat.AnswerWindow.
const staleBy = 10 * time.Minute

// WeChat is a fake WeChat Pay API v3 (GET /v3/pay/transactions/id/…,
// /v3/pay/transactions/out-trade-no/…, /v3/refund/domestic/refunds/…) for
// the test merchant WeChatMerchantID. A request must carry a valid
// WECHATPAY2-SHA256-RSA2048 Authorization signed with Keys.Merchant under
// WeChatSerialNo and a timestamp within RequestWindow, else it is answered
// 401 SIGN_ERROR. Answers, error answers too, are signed with
// Keys.Platform under WeChatPlatformKeyID.
type WeChat struct {
	*fake
	// merchants are the mchids accepted besides WeChatMerchantID.
	merchants map[string]bool
}

// NewWeChat starts a fake WeChat Pay; Close stops it.
func NewWeChat(opts Options) (*WeChat, error) {
	w := &WeChat{merchants: map[string]bool{}}
	for _, m := range opts.WeChatMerchants {
		w.merchants[m] = true
	}
	f, err := newFake(opts, w.handle)
	if err != nil {
		return nil, err
	}
	w.fake = f
	return w, nil
}

// MustWeChat starts a fake WeChat Pay that tb's cleanup stops.
func MustWeChat(tb TB, opts Options) *WeChat {
	tb.Helper()
	return mustFake(tb, func() (*WeChat, error) { return NewWeChat(opts) })
}

func (w *WeChat) handle(r *http.Request, body []byte, rec *Request) reply {
	if err := w.checkAuthorization(r, body, rec); err != nil {
		rec.SignatureError = err.Error()
		return w.errorReply(Step{}, http.StatusUnauthorized, "SIGN_ERROR", "签名错误: "+err.Error())
	}
	rec.SignatureOK = true
	if r.Method != http.MethodGet {
		return w.errorReply(Step{}, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "only GET is faked")
	}
	path := r.URL.Path
	if no, ok := strings.CutPrefix(path, "/v3/refund/domestic/refunds/"); ok && !strings.Contains(no, "/") {
		rec.Asked = "refund:" + no
		return w.refund(no, rec)
	}
	var tradeNo, orderNo string
	if no, ok := strings.CutPrefix(path, "/v3/pay/transactions/id/"); ok && !strings.Contains(no, "/") {
		tradeNo = no
	} else if no, ok := strings.CutPrefix(path, "/v3/pay/transactions/out-trade-no/"); ok && !strings.Contains(no, "/") {
		orderNo = no
	} else {
		return w.errorReply(Step{}, http.StatusNotFound, "NOT_FOUND", "no such API")
	}
	rec.Asked = tradeNo + orderNo
	if mchid := r.URL.Query().Get("mchid"); mchid != rec.Merchant {
		return w.errorReply(Step{}, http.StatusBadRequest, "PARAM_ERROR", "mchid 与请求的商户号不一致")
	}
	t, st, ok := w.takePayment(tradeNo, orderNo)
	rec.Step = st
	if !ok {
		return w.errorReply(Step{}, http.StatusNotFound, wechat.OrderNotExist, "订单不存在")
	}
	return w.answer(st, false, func(state string) []byte {
		return asMerchant(withTradeType(wechat.SamplePaymentAnswer(t, state), st.TradeType), rec.Merchant)
	})
}

// withTradeType sets a payment answer's trade_type to tradeType when both
// are there (only a paid answer names one).
func withTradeType(answer []byte, tradeType string) []byte {
	if tradeType == "" {
		return answer
	}
	var a map[string]any
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		panic(fmt.Sprintf("fakechannel: sample answer does not decode: %v", err))
	}
	if _, ok := a["trade_type"]; !ok {
		return answer
	}
	a["trade_type"] = tradeType
	return sample.MustJSON(a)
}

// asMerchant is a sample answer body naming merchant instead of
// WeChatMerchantID.
func asMerchant(body []byte, merchant string) []byte {
	if merchant == WeChatMerchantID {
		return body
	}
	return bytes.Replace(body, []byte(`"mchid":"`+WeChatMerchantID+`"`), []byte(`"mchid":"`+merchant+`"`), 1)
}

func (w *WeChat) refund(no string, rec *Request) reply {
	t, r, st, ok := w.takeRefund("", "", no)
	rec.Step = st
	if !ok {
		return w.errorReply(Step{}, http.StatusNotFound, wechat.ResourceNotExists, "退款单不存在")
	}
	return w.answer(st, true, func(state string) []byte { return wechat.SampleRefundAnswer(t, r, state) })
}

// answer is step st's reply, body built by build from the state.
func (w *WeChat) answer(st Step, refund bool, build func(state string) []byte) reply {
	if st.HTTPStatus != 0 {
		return bareStatus(st)
	}
	state := ""
	switch st.Answer {
	case Success, "":
		state = "SUCCESS"
	case Pending:
		state = pick(refund, "PROCESSING", "NOTPAY")
	case Closed:
		state = "CLOSED"
	case Uncertain:
		state = pick(refund, "ABNORMAL", "PAYERROR")
	case NotFound:
		return w.errorReply(st, http.StatusNotFound, pick(refund, wechat.ResourceNotExists, wechat.OrderNotExist), "订单不存在")
	case RateLimited:
		return w.errorReply(st, http.StatusTooManyRequests, pick(refund, "FREQUENCY_LIMITED", "RATELIMIT_EXCEEDED"), "请求频率超限, 请降低频率后重试")
	case SystemError:
		return w.errorReply(st, http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
	default:
		panic(fmt.Sprintf("fakechannel: unknown answer %q", st.Answer)) // a test's own mistake
	}
	if st.State != "" {
		state = st.State
	}
	return w.signed(st, http.StatusOK, build(state))
}

func pick(refund bool, ifRefund, otherwise string) string {
	if refund {
		return ifRefund
	}
	return otherwise
}

// errorReply is an error answer {"code","message"}, signed as st says.
func (w *WeChat) errorReply(st Step, status int, code, message string) reply {
	return w.signed(st, status, sample.MustJSON(map[string]string{"code": code, "message": message}))
}

// signed is body answered with status, signed as st says.
func (w *WeChat) signed(st Step, status int, body []byte) reply {
	h := http.Header{"Content-Type": {"application/json"}, "Request-Id": {nonce()}}
	if !st.Unsigned {
		key, at := w.keys.Platform, w.now()
		if st.Forged {
			key = w.keys.Other
		}
		if st.Stale {
			at = at.Add(-staleBy)
		}
		sig, err := wechat.SignAnswer(key, WeChatPlatformKeyID, at, nonce(), body)
		if err != nil {
			panic(fmt.Sprintf("fakechannel: sign wechat answer: %v", err)) // a generated key always signs
		}
		for k, vs := range sig {
			h[k] = vs
		}
	}
	return reply{status: status, header: h, body: body, delay: st.Delay}
}

// checkAuthorization verifies the request's Authorization as WeChat Pay
// does; rec.Merchant is set to the mchid it names.
func (w *WeChat) checkAuthorization(r *http.Request, body []byte, rec *Request) error {
	auth := r.Header.Values("Authorization")
	if len(auth) != 1 {
		return fmt.Errorf("%d Authorization headers", len(auth))
	}
	rest, ok := strings.CutPrefix(auth[0], wechat.AuthScheme+" ")
	if !ok {
		return fmt.Errorf("scheme is not %s", wechat.AuthScheme)
	}
	params := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return fmt.Errorf("parameter %q is not name=\"value\"", k)
		}
		if _, dup := params[k]; dup {
			return fmt.Errorf("parameter %s repeated", k)
		}
		params[k] = v[1 : len(v)-1]
	}
	rec.Merchant = params["mchid"]
	for _, k := range []string{"mchid", "nonce_str", "signature", "timestamp", "serial_no"} {
		if params[k] == "" {
			return fmt.Errorf("no %s", k)
		}
	}
	if params["mchid"] != WeChatMerchantID && !w.merchants[params["mchid"]] {
		return fmt.Errorf("unknown mchid %s", params["mchid"])
	}
	if params["serial_no"] != WeChatSerialNo {
		return fmt.Errorf("serial_no %s is not the merchant's certificate", params["serial_no"])
	}
	sec, err := strconv.ParseInt(params["timestamp"], 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q is not a number", params["timestamp"])
	}
	if d := w.now().Sub(time.Unix(sec, 0)).Abs(); d > RequestWindow {
		return fmt.Errorf("timestamp is %s from the server's clock", d.Truncate(time.Second))
	}
	sig, err := base64.StdEncoding.DecodeString(params["signature"])
	if err != nil {
		return fmt.Errorf("signature is not base64")
	}
	digest := sha256.Sum256(wechat.RequestMessage(r.Method, r.RequestURI, params["timestamp"], params["nonce_str"], body))
	if err := rsa.VerifyPKCS1v15(&w.keys.Merchant.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("signature does not verify with the merchant's key")
	}
	return nil
}
