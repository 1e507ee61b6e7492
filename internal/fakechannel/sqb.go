package fakechannel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
)

// SQB is a fake Shouqianba upay API (POST /upay/v2/query) for the test
// terminal SQBTerminalSN. A request must carry Authorization
// "{terminal_sn} {md5hex(body + SQBTerminalKey)}", else it is answered
// result_code 400 ILLEGAL_SIGN, as Shouqianba answers. Answers are
// unsigned, as Shouqianba's are: Forged, Stale and Unsigned change nothing.
//
// Shouqianba has no refund query: a refund is learned from its order's
// answer. Once ScriptRefund has scripted a refund of a trade, the trade's
// answers follow that refund's script (Success: the order REFUNDED or
// PARTIAL_REFUNDED showing the refund; Pending: PAID without it; Closed:
// its last operation FAIL_CANCELED; Uncertain: REFUND_ERROR).
type SQB struct{ *fake }

// NewSQB starts a fake Shouqianba; Close stops it.
func NewSQB(opts Options) (*SQB, error) {
	s := &SQB{}
	f, err := newFake(opts, s.handle)
	if err != nil {
		return nil, err
	}
	s.fake = f
	return s, nil
}

// MustSQB starts a fake Shouqianba that tb's cleanup stops.
func MustSQB(tb TB, opts Options) *SQB {
	tb.Helper()
	return mustFake(tb, func() (*SQB, error) { return NewSQB(opts) })
}

// sqbQuery is the order query's body.
type sqbQuery struct {
	TerminalSN string `json:"terminal_sn"`
	SN         string `json:"sn"`
	ClientSN   string `json:"client_sn"`
}

func (s *SQB) handle(r *http.Request, body []byte, rec *Request) reply {
	if r.Method != http.MethodPost || r.URL.Path != sqb.QueryPath {
		return reply{status: http.StatusNotFound, body: []byte("not found")}
	}
	auth := r.Header.Get("Authorization")
	rec.Merchant, _, _ = strings.Cut(auth, " ")
	if err := sqb.CheckAuthorization(auth, body, SQBTerminalSN, SQBTerminalKey); err != nil {
		rec.SignatureError = err.Error()
		return sqbReply(Step{}, sqb.SampleQueryError(sqb.ResultClientError, "ILLEGAL_SIGN", "签名错误"))
	}
	rec.SignatureOK = true
	var q sqbQuery
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil || q.TerminalSN != SQBTerminalSN || (q.SN == "" && q.ClientSN == "") {
		return sqbReply(Step{}, sqb.SampleQueryError(sqb.ResultClientError, "INVALID_PARAMS", "参数错误"))
	}
	rec.Asked = q.SN
	if q.SN == "" {
		rec.Asked = q.ClientSN
	}
	if no := s.lastRefund(q.SN, q.ClientSN); no != "" {
		t, rf, st, _ := s.takeRefund(q.SN, q.ClientSN, no)
		rec.Step = st
		return s.refund(st, t, rf)
	}
	t, st, ok := s.takePayment(q.SN, q.ClientSN)
	rec.Step = st
	if !ok {
		return sqbReply(Step{}, sqb.SampleQueryFailure(sqb.OrderNotExists, "订单不存在"))
	}
	return s.payment(st, t)
}

func (s *SQB) payment(st Step, t sample.Trade) reply {
	if r, done := sqbCommon(st); done {
		return r
	}
	orderStatus, status := "", ""
	switch st.Answer {
	case Success, "":
		orderStatus, status = sqb.Paid, sqb.StatusSuccess
	case Pending:
		orderStatus, status = sqb.Created, "IN_PROG"
	case Closed:
		orderStatus, status = sqb.PayCanceled, "FAIL_CANCELED"
	case Uncertain:
		orderStatus, status = sqb.PayError, "FAIL_ERROR"
	}
	if st.State != "" {
		orderStatus = st.State
	}
	return sqbReply(st, sqb.SampleOrderAnswer(t, SQBTerminalSN, orderStatus, status))
}

func (s *SQB) refund(st Step, t sample.Trade, r sample.Refund) reply {
	if rp, done := sqbCommon(st); done {
		return rp
	}
	switch st.Answer {
	case Pending:
		return sqbReply(st, sqb.SampleOrderAnswer(t, SQBTerminalSN, sqb.Paid, sqb.StatusSuccess))
	case Closed:
		return sqbReply(st, editOrder(sqb.SampleRefundOrderAnswer(t, r, SQBTerminalSN), map[string]any{
			"order_status": sqb.Paid, "status": "FAIL_CANCELED", "net_amount": fmt.Sprint(t.WithDefaults().Total),
		}))
	case Uncertain:
		return sqbReply(st, editOrder(sqb.SampleRefundOrderAnswer(t, r, SQBTerminalSN), map[string]any{
			"order_status": sqb.RefundError, "status": "FAIL_ERROR",
		}))
	}
	body := sqb.SampleRefundOrderAnswer(t, r, SQBTerminalSN)
	if st.State != "" {
		body = editOrder(body, map[string]any{"order_status": st.State})
	}
	return sqbReply(st, body)
}

// sqbCommon is the reply of the steps that answer alike for payments and
// refunds.
func sqbCommon(st Step) (reply, bool) {
	switch {
	case st.HTTPStatus != 0:
		return bareStatus(st), true
	case st.Answer == NotFound:
		return sqbReply(st, sqb.SampleQueryFailure(sqb.OrderNotExists, "订单不存在")), true
	case st.Answer == RateLimited:
		r := sqbReply(st, []byte(`{"result_code":"429","error_message":"too many requests"}`))
		r.status = http.StatusTooManyRequests
		return r, true
	case st.Answer == SystemError:
		return sqbReply(st, sqb.SampleQueryError(sqb.ResultServerError, "UNKNOWN_SYSTEM_ERROR", "系统错误")), true
	case st.Answer != Success && st.Answer != "" && st.Answer != Pending && st.Answer != Closed && st.Answer != Uncertain:
		panic(fmt.Sprintf("fakechannel: unknown answer %q", st.Answer)) // a test's own mistake
	}
	return reply{}, false
}

// editOrder sets members of an answer's biz_response.data.
func editOrder(answer []byte, set map[string]any) []byte {
	var a map[string]any
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		panic(fmt.Sprintf("fakechannel: sample answer does not decode: %v", err))
	}
	data := a["biz_response"].(map[string]any)["data"].(map[string]any)
	for k, v := range set {
		data[k] = v
	}
	return sample.MustJSON(a)
}

func sqbReply(st Step, body []byte) reply {
	return reply{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json;charset=UTF-8"}}, body: body, delay: st.Delay}
}
