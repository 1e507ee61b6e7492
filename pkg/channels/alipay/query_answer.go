package alipay

import (
	"fmt"
	"net/http"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// RefundSuccess is the refund query's refund_status of a refund that
// succeeded.
const RefundSuccess = "REFUND_SUCCESS"

// codeOK is the code of an answer that answers (Alipay's "10000").
const codeOK = "10000"

// queryMethod returns the method that asks about kind.
func queryMethod(kind channels.QueryKind) (string, error) {
	switch kind {
	case channels.QueryPayment:
		return MethodTradeQuery, nil
	case channels.QueryRefund:
		return MethodRefundQuery, nil
	default:
		return "", fmt.Errorf("alipay query: kind %s", channels.Quote(string(kind)))
	}
}

// VerifyAnswer checks Alipay's signature of body, the answer to a query of
// kind sent for key.AppID (VerifyResponse with the kind's method). Every
// failure is a *channels.Error of kind unauthenticated: the answer must
// not be acted on.
func VerifyAnswer(kind channels.QueryKind, body []byte, key PublicKey) error {
	method, err := queryMethod(kind)
	if err != nil {
		return channels.Errorf(channels.KindUnauthenticated, "verify %w", err)
	}
	return VerifyResponse(method, body, key)
}

// VerifyResponse checks Alipay's signature of body, the answer to an
// OpenAPI call of method sent for key.AppID: the base64 SHA256withRSA sign
// member over the exact raw text of the <method>_response (or
// error_response) member, as received, never re-encoded. Every failure
// (an answer that cannot be split, no sign, no key, a signature that does
// not verify) is a *channels.Error of kind unauthenticated.
func VerifyResponse(method string, body []byte, key PublicKey) error {
	parts, err := splitAnswer(body, method)
	if err != nil {
		return channels.Errorf(channels.KindUnauthenticated, "verify %w", err)
	}
	if !parts.hasSign {
		return channels.Errorf(channels.KindUnauthenticated, "verify alipay %s answer: it carries no sign", method)
	}
	if key.Key == nil {
		return channels.Errorf(channels.KindUnauthenticated, "verify alipay %s answer: no public key for app %s", method, channels.Quote(key.AppID))
	}
	if key.CertSN != "" && parts.hasCertSN && parts.certSN != key.CertSN {
		return channels.Errorf(channels.KindUnauthenticated,
			"verify alipay %s answer for app %s: signed with Alipay's certificate %s, the configured one (%s) is %s: fetch the new certificate (alipay.open.app.alipaycert.download) and configure it",
			method, channels.Quote(key.AppID), channels.Quote(parts.certSN), key.PublicKeyFile, key.CertSN)
	}
	if err := VerifyRSA2(parts.response, parts.sign, key.Key); err != nil {
		return channels.WrapKind(err, fmt.Sprintf("verify alipay %s answer (%s) for app %s", method, parts.member, channels.Quote(key.AppID)))
	}
	return nil
}

// ReadAnswer verifies resp with key (VerifyAnswer) and only then decodes
// it (DecodeAnswer). An HTTP status other than 200 is no answer, signed or
// not, and proves nothing: it is read as DecodeAnswer reads it, unverified.
func ReadAnswer(target channels.QueryTarget, resp channels.QueryResponse, key PublicKey) (channels.QueryAnswer, error) {
	if resp.StatusCode != 0 && resp.StatusCode != http.StatusOK {
		return DecodeAnswer(target, resp)
	}
	if err := VerifyAnswer(target.Kind, resp.Body, key); err != nil {
		return channels.QueryAnswer{}, err
	}
	return DecodeAnswer(target, resp)
}

// answerFields are the members of a query answer the decoder reads; each
// is a JSON string when present.
type answerFields struct {
	Code          string `json:"code"`
	Msg           string `json:"msg"`
	SubCode       string `json:"sub_code"`
	SubMsg        string `json:"sub_msg"`
	TradeNo       string `json:"trade_no"`
	OutTradeNo    string `json:"out_trade_no"`
	TradeStatus   string `json:"trade_status"`
	TotalAmount   string `json:"total_amount"`
	SendPayDate   string `json:"send_pay_date"`
	TransCurrency string `json:"trans_currency"`
	OutRequestNo  string `json:"out_request_no"`
	RefundAmount  string `json:"refund_amount"`
	RefundStatus  string `json:"refund_status"`
	GmtRefundPay  string `json:"gmt_refund_pay"`
}

// DecodeAnswer reads resp, the answer to a query about target, which the
// caller has verified (VerifyAnswer; ReadAnswer does both). Outcomes
// (docs/queries.md has the table and its sources):
//
//   - code 10000, alipay.trade.query: TRADE_SUCCESS and TRADE_FINISHED are
//     QuerySettled with the payment event a trade_status_sync callback of
//     the trade gives (same key and fingerprint; occurred at send_pay_date);
//     WAIT_BUYER_PAY is QueryPending; TRADE_CLOSED is QueryUncertain (an
//     unpaid close and a full refund after payment answer alike, and no
//     documented field tells them apart); any other status is
//     QueryUncertain.
//   - code 10000, alipay.trade.fastpay.refund.query: refund_status
//     REFUND_SUCCESS is QuerySettled; its event is built only for a full
//     refund (refund_amount = total_amount, so the cumulative refunded the
//     callback reports is known); for a partial refund the answer carries
//     no event (the callback's cumulative cannot be known from it: Detail
//     says so). No refund data is QueryNotFound (not received, or failed);
//     data without refund_status, or another status, is QueryUncertain.
//   - 40004 ACQ.TRADE_NOT_EXIST: QueryNotFound; 20000 or ACQ.SYSTEM_ERROR:
//     QueryRetry; 40005: QueryThrottled; 20001, 40001, 40002, 40006 or
//     ACQ.INVALID_PARAMETER: QueryRefused; any other code: QueryUncertain.
//   - an HTTP status other than 200: 429 QueryThrottled, 5xx QueryRetry,
//     others QueryUncertain, the body unread.
//
// Errors (*channels.Error): a target that is not an ALIPAY query, an
// answer that is not one JSON object with unique member names or whose
// members have the wrong type (KindMalformed), an answer about another
// order or refund than target's (KindMalformed), and on a settled answer a
// missing or malformed field, an amount that is not a positive in-range
// yuan amount (KindInvalidAmount) or a currency other than CNY
// (KindUnsupported).
func DecodeAnswer(target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	if target.Channel != Code {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "decode alipay answer: target channel %s", channels.Quote(string(target.Channel)))
	}
	method, err := queryMethod(target.Kind)
	if err != nil {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "decode %w", err)
	}
	if ans, done := httpOutcome(method, resp.StatusCode); done {
		return ans, nil
	}
	parts, err := splitAnswer(resp.Body, method)
	if err != nil {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "decode %w", err)
	}
	if _, err := jsonMembers(parts.response); err != nil {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "decode alipay %s answer %s: %w", method, parts.member, err)
	}
	var f answerFields
	if err := channels.Unmarshal(parts.response, &f, "alipay "+method+" answer "+parts.member); err != nil {
		return channels.QueryAnswer{}, err
	}
	if f.Code == "" {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "decode alipay %s answer: no code", method)
	}
	if err := checkAnswerIdentity(target, f); err != nil {
		return channels.QueryAnswer{}, err
	}
	if f.Code != codeOK {
		return errorOutcome(method, f), nil
	}
	if parts.member == errorResponse {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "decode alipay %s answer: error_response with code 10000", method)
	}
	if target.Kind == channels.QueryRefund {
		return refundAnswer(target, resp, f)
	}
	return paymentAnswer(target, resp, f)
}

// httpOutcome reads an HTTP status other than 200 (0 is taken for 200):
// Alipay answers 200 whatever it says, so anything else is the way there.
func httpOutcome(method string, status int) (channels.QueryAnswer, bool) {
	if status == 0 || status == http.StatusOK {
		return channels.QueryAnswer{}, false
	}
	ans := channels.QueryAnswer{
		RawState: fmt.Sprintf("HTTP %d", status),
		Outcome:  channels.QueryUncertain,
		Detail:   fmt.Sprintf("alipay %s: HTTP status %d, not an answer; ask again later", method, status),
	}
	switch {
	case status == http.StatusTooManyRequests:
		ans.Outcome = channels.QueryThrottled
	case status >= 500:
		ans.Outcome = channels.QueryRetry
	}
	return ans, true
}

// checkAnswerIdentity refuses an answer about another trade or refund than
// target's: each number both name must be equal, byte for byte.
func checkAnswerIdentity(target channels.QueryTarget, f answerFields) error {
	for _, id := range []struct{ name, asked, answered string }{
		{"out_trade_no", target.MerchantOrderNo, f.OutTradeNo},
		{"trade_no", target.TradeNo, f.TradeNo},
		{"out_request_no", target.RefundNo, f.OutRequestNo},
	} {
		if id.asked != "" && id.answered != "" && id.asked != id.answered {
			return channels.Errorf(channels.KindMalformed, "alipay answer about %s %s, asked about %s", id.name, channels.Quote(id.answered), channels.Quote(id.asked))
		}
	}
	return nil
}

// checkAnswerNames requires a settled answer to name the trade asked about
// by at least one of its numbers (checkAnswerIdentity has refused any
// that differs) and to carry both, which its event needs.
func checkAnswerNames(target channels.QueryTarget, f answerFields) error {
	if err := channels.CheckID("alipay answer out_trade_no", f.OutTradeNo); err != nil {
		return err
	}
	if err := channels.CheckID("alipay answer trade_no", f.TradeNo); err != nil {
		return err
	}
	if f.OutTradeNo != target.MerchantOrderNo && f.TradeNo != target.TradeNo {
		return channels.Errorf(channels.KindMalformed, "alipay answer names neither the out_trade_no nor the trade_no asked about")
	}
	if f.TransCurrency != "" && f.TransCurrency != channels.CurrencyCNY {
		return channels.Errorf(channels.KindUnsupported, "alipay answer trans_currency %s", channels.Quote(f.TransCurrency))
	}
	return nil
}

// errorOutcome maps an answer whose code is not 10000.
func errorOutcome(method string, f answerFields) channels.QueryAnswer {
	ans := channels.QueryAnswer{RawState: f.Code}
	if f.SubCode != "" {
		ans.RawState = f.SubCode
	}
	var why string
	switch {
	case f.Code == "40004" && f.SubCode == "ACQ.TRADE_NOT_EXIST":
		ans.Outcome, why = channels.QueryNotFound, "Alipay does not know the trade (not created yet, e.g. a QR code not scanned, or asked with another app_id): not final for a young order"
	case f.SubCode == "ACQ.SYSTEM_ERROR" || f.Code == "20000":
		ans.Outcome, why = channels.QueryRetry, "Alipay failed transiently: ask again"
	case f.Code == "40005":
		ans.Outcome, why = channels.QueryThrottled, "Alipay limits the call rate (频次超限): back this merchant off"
	case f.SubCode == "ACQ.INVALID_PARAMETER" || f.Code == "20001" || f.Code == "40001" || f.Code == "40002" || f.Code == "40006":
		ans.Outcome, why = channels.QueryRefused, "Alipay refuses the request or the credentials (authorisation, parameters, signature, permission): check the merchant's app_id, keys and permissions"
	default:
		ans.Outcome, why = channels.QueryUncertain, "an answer this client does not know: nothing is concluded"
	}
	ans.Detail = fmt.Sprintf("alipay %s code %s sub_code %s (%s %s): %s", method,
		channels.Quote(f.Code), channels.Quote(f.SubCode), channels.Quote(f.Msg), channels.Quote(f.SubMsg), why)
	return ans
}

// paymentAnswer maps a code 10000 answer of alipay.trade.query.
func paymentAnswer(target channels.QueryTarget, resp channels.QueryResponse, f answerFields) (channels.QueryAnswer, error) {
	ans := channels.QueryAnswer{RawState: f.TradeStatus}
	switch f.TradeStatus {
	case TradeSuccess, TradeFinished:
	case WaitBuyerPay:
		return unsettled(ans.RawState, channels.QueryPending, "alipay trade WAIT_BUYER_PAY: created, not paid yet; ask again")
	case TradeClosed:
		return unsettled(ans.RawState, channels.QueryUncertain, "alipay trade TRADE_CLOSED: closed unpaid by timeout, or fully refunded after payment, and the answer does not say which; nothing is concluded (a refund query or the statement tells)")
	case "":
		return unsettled(ans.RawState, channels.QueryUncertain, "alipay trade query answered 10000 without trade_status: nothing is concluded")
	default:
		return unsettled(ans.RawState, channels.QueryUncertain, fmt.Sprintf("alipay trade_status %s is not documented: nothing is concluded", channels.Quote(f.TradeStatus)))
	}
	if err := checkAnswerNames(target, f); err != nil {
		return channels.QueryAnswer{}, err
	}
	total, err := positiveYuan("total_amount", f.TotalAmount)
	if err != nil {
		return channels.QueryAnswer{}, err
	}
	ev := channels.Event{
		TenantID:        target.TenantID,
		Channel:         Code,
		Type:            eventkey.PaymentReceived,
		TradeNo:         f.TradeNo,
		MerchantOrderNo: f.OutTradeNo,
		OrderTotal:      total,
		RawStatus:       f.TradeStatus,
	}
	if ev.Key, err = channels.PaymentKey(Code, ev.TradeNo); err != nil {
		return channels.QueryAnswer{}, err
	}
	if ev, err = completeAnswerEvent(ev, "send_pay_date", f.SendPayDate, resp); err != nil {
		return channels.QueryAnswer{}, err
	}
	ans.Outcome, ans.Events = channels.QuerySettled, []channels.Event{ev}
	ans.Detail = fmt.Sprintf("alipay trade %s: paid %s yuan", f.TradeStatus, f.TotalAmount)
	return ans, nil
}

// refundAnswer maps a code 10000 answer of
// alipay.trade.fastpay.refund.query.
func refundAnswer(target channels.QueryTarget, resp channels.QueryResponse, f answerFields) (channels.QueryAnswer, error) {
	ans := channels.QueryAnswer{RawState: f.RefundStatus}
	switch {
	case f.RefundStatus == RefundSuccess:
	case f.RefundStatus == "" && f.RefundAmount == "":
		return unsettled("NO_REFUND_DATA", channels.QueryNotFound, "alipay refund query returned no refund data: the refund request was not received, or failed (Alipay does not say which); ask again no sooner than 10 s after the refund")
	case f.RefundStatus == "":
		return unsettled("NO_REFUND_STATUS", channels.QueryUncertain, "alipay refund query returned refund data without refund_status: older documentation reads it as success, newer as not received or failed; nothing is concluded")
	default:
		return unsettled(ans.RawState, channels.QueryUncertain, fmt.Sprintf("alipay refund_status %s is not documented: nothing is concluded", channels.Quote(f.RefundStatus)))
	}
	if err := checkAnswerNames(target, f); err != nil {
		return channels.QueryAnswer{}, err
	}
	if err := channels.CheckID("alipay answer out_request_no", f.OutRequestNo); err != nil {
		return channels.QueryAnswer{}, err
	}
	total, err := positiveYuan("total_amount", f.TotalAmount)
	if err != nil {
		return channels.QueryAnswer{}, err
	}
	refund, err := positiveYuan("refund_amount", f.RefundAmount)
	if err != nil {
		return channels.QueryAnswer{}, err
	}
	if refund > total {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindInvalidAmount, "alipay answer refund_amount %s exceeds total_amount %s", channels.Quote(f.RefundAmount), channels.Quote(f.TotalAmount))
	}
	ans.Outcome = channels.QuerySettled
	if refund < total {
		// The callback reports refund_fee, the trade's cumulative refunded
		// after this refund, and its fingerprint covers it; this answer
		// gives this refund's own amount only, and earlier refunds are
		// unknown here. An event built from it could conflict with the
		// callback's or move the wrong amount: none is built.
		ans.Detail = fmt.Sprintf("alipay refund %s succeeded: %s of %s yuan, a partial refund; no event: the callback's cumulative refund_fee cannot be known from the answer (it names this refund's amount only)",
			channels.Quote(f.OutRequestNo), f.RefundAmount, f.TotalAmount)
		return ans, nil
	}
	// A full refund: no other refund moved money, so the cumulative the
	// callback reports is the total.
	ev := channels.Event{
		TenantID:           target.TenantID,
		Channel:            Code,
		Type:               eventkey.RefundSucceeded,
		TradeNo:            f.TradeNo,
		MerchantOrderNo:    f.OutTradeNo,
		RefundNo:           f.OutRequestNo,
		OrderTotal:         total,
		CumulativeRefunded: total,
		RawStatus:          f.RefundStatus,
	}
	if ev.Key, err = channels.RefundKey(Code, ev.TradeNo, ev.RefundNo); err != nil {
		return channels.QueryAnswer{}, err
	}
	if ev, err = completeAnswerEvent(ev, "gmt_refund_pay", f.GmtRefundPay, resp); err != nil {
		return channels.QueryAnswer{}, err
	}
	ans.Events = []channels.Event{ev}
	ans.Detail = fmt.Sprintf("alipay refund %s succeeded: %s yuan, the whole trade", channels.Quote(f.OutRequestNo), f.RefundAmount)
	return ans, nil
}

// unsettled is an answer that proves nothing.
func unsettled(raw string, outcome channels.QueryOutcome, detail string) (channels.QueryAnswer, error) {
	return channels.QueryAnswer{RawState: raw, Outcome: outcome, Detail: detail}, nil
}

// completeAnswerEvent sets ev's time from the answer's member name (value
// s, Beijing time) and completes ev as the callback's event is completed.
func completeAnswerEvent(ev channels.Event, name, s string, resp channels.QueryResponse) (channels.Event, error) {
	var err error
	if ev.OccurredAt, err = answerTime(name, s); err != nil {
		return channels.Event{}, err
	}
	return channels.CompleteQueryEvent(ev, resp.ReceivedAt)
}

// positiveYuan parses a yuan amount of an answer into fen with the
// callback's parser, refusing zero.
func positiveYuan(name, s string) (int64, error) {
	fen, err := channels.ParseYuan(s)
	if err != nil {
		return 0, channels.WrapKind(err, "alipay answer "+name)
	}
	if fen == 0 {
		return 0, channels.Errorf(channels.KindInvalidAmount, "alipay answer %s is zero", name)
	}
	return fen, nil
}

// answerTime parses an answer's Beijing time.
func answerTime(name, s string) (t time.Time, err error) {
	if s == "" {
		return time.Time{}, channels.Errorf(channels.KindMalformed, "alipay answer has no %s", name)
	}
	t, err = alipayTime(s)
	if err != nil {
		return time.Time{}, channels.WrapKind(err, "alipay answer "+name)
	}
	return t, nil
}
