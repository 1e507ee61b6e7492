package wechat

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Query answers (docs/queries.md, WeChat section): verified with the
// platform key Wechatpay-Serial names, then read into a
// channels.QueryAnswer whose events are the callbacks' own.

// The not-found codes of a 404 answer.
const (
	// OrderNotExist answers a payment query for an order WeChat does not
	// know.
	OrderNotExist = "ORDER_NOT_EXIST"
	// ResourceNotExists answers a refund query for a refund WeChat does
	// not know.
	ResourceNotExists = "RESOURCE_NOT_EXISTS"
)

// ReadAnswer reads resp, the answer to the query for target, at now (the
// verifier's clock for the timestamp window; ReceivedAt is the events'
// receive time).
//
// A 2xx answer must verify (VerifyAnswer with target.MerchantID); an error
// then is KindUnauthenticated. Its body (200) is decoded: the trade_state or
// refund status gives the outcome (docs/queries.md has the table), and a
// settled answer carries the event the callback gives for the same trade.
// A body that does not have the documented shape (bad JSON, a repeated
// member, a wrong type, a missing field, an absurd amount, a currency
// other than CNY) is a *channels.Error of the decoder's kinds, never a
// guess, and so is an answer about another merchant, order or refund than
// the one asked.
//
// Any other status is an error answer, read for its outcome by status and
// code (429 throttled, 5xx retry, 400/401/403 refused, 404 with the
// not-found code of the query not_found, anything else uncertain). Whether
// WeChat signs error answers is UNCONFIRMED: one that carries a signature
// must verify, one that carries none is read as it is; either way it never
// yields an event.
func ReadAnswer(target channels.QueryTarget, resp channels.QueryResponse, keys []PublicKey, now time.Time) (channels.QueryAnswer, error) {
	if target.Kind != channels.QueryPayment && target.Kind != channels.QueryRefund {
		return channels.QueryAnswer{}, fmt.Errorf("wechat query answer: kind %s", channels.Quote(string(target.Kind)))
	}
	success := resp.StatusCode >= 200 && resp.StatusCode < 300
	if success || resp.Header.Get(HeaderSignature) != "" {
		if err := VerifyAnswer(resp, target.MerchantID, keys, now); err != nil {
			return channels.QueryAnswer{}, err
		}
	}
	switch {
	case resp.StatusCode == http.StatusOK && target.Kind == channels.QueryPayment:
		return readPaymentAnswer(target, resp)
	case resp.StatusCode == http.StatusOK:
		return readRefundAnswer(target, resp)
	case resp.StatusCode == http.StatusAccepted:
		return channels.QueryAnswer{
			Outcome: channels.QueryRetry, RawState: "HTTP 202",
			Detail: "WeChat accepted the query without an answer (HTTP 202): ask again",
		}, nil
	case success:
		return channels.QueryAnswer{
			Outcome: channels.QueryUncertain, RawState: "HTTP " + strconv.Itoa(resp.StatusCode),
			Detail: fmt.Sprintf("WeChat answered HTTP %d, undocumented for a query: nothing is concluded", resp.StatusCode),
		}, nil
	}
	return readErrorAnswer(target, resp), nil
}

// queryTransaction is a payment query's answer: the callback's resource
// and its description of the state.
type queryTransaction struct {
	wechatTransaction
	TradeStateDesc string `json:"trade_state_desc"`
}

// readPaymentAnswer reads a verified 200 answer to a payment query.
func readPaymentAnswer(target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	var tx queryTransaction
	if err := decodeAnswer(resp.Body, &tx, &tx.Amount.Currency, "wechat payment query answer"); err != nil {
		return channels.QueryAnswer{}, err
	}
	ans := channels.QueryAnswer{RawState: tx.TradeState, MerchantID: wechatMerchant(tx.MchID, tx.SubMchID)}
	if err := checkAnswered(target, ans.MerchantID, tx.OutTradeNo, tx.TransactionID, ""); err != nil {
		return channels.QueryAnswer{}, err
	}
	desc := ""
	if tx.TradeStateDesc != "" {
		desc = " (" + channels.Quote(tx.TradeStateDesc) + ")"
	}
	switch tx.TradeState {
	case "SUCCESS", "REFUND":
		if tx.SuccessTime == "" {
			return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "wechat payment query answer in %s has no success_time", tx.TradeState)
		}
		ev, err := paymentEvent(&tx.wechatTransaction, "")
		if err != nil {
			return channels.QueryAnswer{}, err
		}
		if ev, err = completeEvent(ev, target, resp); err != nil {
			return channels.QueryAnswer{}, err
		}
		ans.Outcome, ans.Events = channels.QuerySettled, []channels.Event{ev}
		ans.Detail = fmt.Sprintf("paid %d fen at %s: the TRANSACTION.SUCCESS event", ev.OrderTotal, ev.OccurredAt.Format(time.RFC3339))
		if tx.TradeState == "REFUND" {
			ans.Detail = fmt.Sprintf("paid %d fen at %s, and a refund exists (REFUND): the payment event; the refunds are learned by refund queries of their out_refund_no",
				ev.OrderTotal, ev.OccurredAt.Format(time.RFC3339))
		}
	case "NOTPAY", "USERPAYING", "ACCEPT":
		ans.Outcome = channels.QueryPending
		ans.Detail = "not paid yet: " + tx.TradeState + desc
	case "CLOSED", "REVOKED":
		ans.Outcome = channels.QueryClosed
		ans.Detail = "the order ended unpaid: " + tx.TradeState + desc
	case "PAYERROR":
		ans.Outcome = channels.QueryUncertain
		ans.Detail = "payment failed (PAYERROR)" + desc + ", yet a payer may have been debited: nothing is posted, check the order with WeChat"
	case "":
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "wechat payment query answer has no trade_state")
	default:
		ans.Outcome = channels.QueryUncertain
		ans.Detail = "trade_state " + channels.Quote(tx.TradeState) + desc + " is not documented: nothing is concluded"
	}
	return ans, nil
}

// readRefundAnswer reads a verified 200 answer to a refund query.
func readRefundAnswer(target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	var rf wechatRefund
	if err := decodeAnswer(resp.Body, &rf, &rf.Amount.Currency, "wechat refund query answer"); err != nil {
		return channels.QueryAnswer{}, err
	}
	status := rf.Status
	if status == "" {
		status = rf.RefundStatus
	}
	// A refund answer names no merchant in direct mode; the signed request
	// chose it.
	ans := channels.QueryAnswer{RawState: status, MerchantID: wechatMerchant(rf.MchID, rf.SubMchID)}
	if err := channels.CheckID("wechat out_refund_no", rf.OutRefundNo); err != nil {
		return channels.QueryAnswer{}, err
	}
	if err := checkAnswered(target, ans.MerchantID, rf.OutTradeNo, rf.TransactionID, rf.OutRefundNo); err != nil {
		return channels.QueryAnswer{}, err
	}
	switch status {
	case "SUCCESS":
		if rf.SuccessTime == "" {
			return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "wechat refund query answer in SUCCESS has no success_time")
		}
		ev, err := refundEvent(&rf, status, "")
		if err != nil {
			return channels.QueryAnswer{}, err
		}
		if ev, err = completeEvent(ev, target, resp); err != nil {
			return channels.QueryAnswer{}, err
		}
		ans.Outcome, ans.Events = channels.QuerySettled, []channels.Event{ev}
		ans.Detail = fmt.Sprintf("refund %s of %d fen (order total %d) succeeded at %s: the REFUND.SUCCESS event",
			channels.Quote(ev.RefundNo), ev.RefundAmount, ev.OrderTotal, ev.OccurredAt.Format(time.RFC3339))
	case "PROCESSING":
		ans.Outcome = channels.QueryPending
		ans.Detail = "refund still processing: ask again"
	case "ABNORMAL":
		ans.Outcome = channels.QueryUncertain
		ans.Detail = "refund ABNORMAL (the payer's account could not take it): not final, handle it in the merchant platform"
	case "CLOSED":
		ans.Outcome = channels.QueryClosed
		ans.Detail = "refund CLOSED: it failed, no money moved"
	case "":
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "wechat refund query answer has no status")
	default:
		ans.Outcome = channels.QueryUncertain
		ans.Detail = "refund status " + channels.Quote(status) + " is not documented: nothing is concluded"
	}
	return ans, nil
}

// decodeAnswer decodes body into v (channels.Unmarshal), then refuses a
// currency other than CNY; currency points at v's amount.currency.
func decodeAnswer(body []byte, v any, currency *string, what string) error {
	if err := channels.Unmarshal(body, v, what); err != nil {
		return err
	}
	return checkWeChatCurrency(*currency)
}

// checkAnswered refuses an answer about another merchant, order or refund
// than target asks about: every number the target and the answer both
// have must be equal, and a payment answer must name its merchant and
// out_trade_no.
func checkAnswered(target channels.QueryTarget, merchantID, outTradeNo, transactionID, outRefundNo string) error {
	mismatch := func(what, asked, answered string) error {
		return channels.Errorf(channels.KindMalformed, "wechat query answer is about %s %s, the query asked about %s",
			what, channels.Quote(answered), channels.Quote(asked))
	}
	if target.Kind == channels.QueryPayment {
		if merchantID == "" {
			return channels.Errorf(channels.KindMalformed, "wechat payment query answer names no mchid")
		}
		if err := channels.CheckID("wechat out_trade_no", outTradeNo); err != nil {
			return err
		}
		if target.TradeNo != "" && transactionID == "" {
			return channels.Errorf(channels.KindMalformed, "wechat query answer has no transaction_id, the query asked by %s", channels.Quote(target.TradeNo))
		}
	}
	switch {
	case merchantID != "" && merchantID != target.MerchantID:
		return mismatch("merchant", target.MerchantID, merchantID)
	case target.MerchantOrderNo != "" && outTradeNo != "" && outTradeNo != target.MerchantOrderNo:
		return mismatch("out_trade_no", target.MerchantOrderNo, outTradeNo)
	case target.TradeNo != "" && transactionID != "" && transactionID != target.TradeNo:
		return mismatch("transaction_id", target.TradeNo, transactionID)
	case target.Kind == channels.QueryRefund && outRefundNo != target.RefundNo:
		return mismatch("out_refund_no", target.RefundNo, outRefundNo)
	}
	return nil
}

// completeEvent gives ev the target's tenant and the channel and completes
// it as the Decoder completes a callback's event.
func completeEvent(ev channels.Event, target channels.QueryTarget, resp channels.QueryResponse) (channels.Event, error) {
	ev.TenantID = target.TenantID
	ev.Channel = Code
	return channels.CompleteQueryEvent(ev, resp.ReceivedAt)
}

// errorBody is an error answer's body.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// readErrorAnswer reads a non-2xx answer for its outcome. Its body is read
// leniently (a proxy's HTML 502 still means retry): an unreadable body
// leaves the code empty, which only a 404 needs.
func readErrorAnswer(target channels.QueryTarget, resp channels.QueryResponse) channels.QueryAnswer {
	var body errorBody
	readable := channels.Unmarshal(resp.Body, &body, "wechat error answer") == nil
	if !readable {
		body = errorBody{} // what was read of a body read two ways says nothing
	}
	status := resp.StatusCode
	ans := channels.QueryAnswer{RawState: body.Code}
	if body.Code == "" {
		ans.RawState = "HTTP " + strconv.Itoa(status)
	}
	said := fmt.Sprintf("HTTP %d %s", status, channels.Quote(body.Code))
	if body.Message != "" {
		said += " " + channels.Quote(body.Message)
	}
	if !readable {
		said = fmt.Sprintf("HTTP %d with a body that is not WeChat's error object", status)
	}
	notFound := OrderNotExist
	if target.Kind == channels.QueryRefund {
		notFound = ResourceNotExists
	}
	switch {
	case status == http.StatusTooManyRequests:
		ans.Outcome, ans.Detail = channels.QueryThrottled, said+": rate limited, back this merchant off"
	case status >= 500 && status <= 599:
		ans.Outcome, ans.Detail = channels.QueryRetry, said+": WeChat failed, ask again"
	case status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden:
		ans.Outcome, ans.Detail = channels.QueryRefused, said+": WeChat refuses the request or the credentials; fix the merchant's configuration"
	case status == http.StatusNotFound && body.Code == notFound:
		ans.Outcome, ans.Detail = channels.QueryNotFound, said+": WeChat does not know it"
	default:
		ans.Outcome, ans.Detail = channels.QueryUncertain, said+": undocumented for this query, nothing is concluded"
	}
	return ans
}
