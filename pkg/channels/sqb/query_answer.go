package sqb

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/paycallback/paycallback/pkg/channels"
)

// The communication and business result codes of a query answer
// (zh-cn/api/annex.md).
const (
	// ResultOK is the top-level result_code of an answer that reached the
	// business layer.
	ResultOK = "200"
	// ResultClientError is the top-level result_code of a request
	// Shouqianba refuses (error_code INVALID_PARAMS, INVALID_TERMINAL,
	// ILLEGAL_SIGN).
	ResultClientError = "400"
	// ResultServerError is the top-level result_code of a failure on
	// Shouqianba's side (UNKNOWN_SYSTEM_ERROR).
	ResultServerError = "500"
	// BizSuccess is the biz_response.result_code of a query that found
	// the order: biz_response.data says its state.
	BizSuccess = "SUCCESS"
	// BizFail is the biz_response.result_code of a query that failed; its
	// error_code says why.
	BizFail = "FAIL"
	// OrderNotExists is the error_code of an order Shouqianba does not
	// know.
	OrderNotExists = "UPAY_ORDER_NOT_EXISTS"
)

// ErrOtherOrder is what DecodeQueryAnswer's refusal of an answer about
// another order (or terminal) than the one asked unwraps to.
var ErrOtherOrder = errors.New("sqb answer is about another order than the one asked")

// sqbAPIResponse is an answer of Shouqianba's API with order data D: a
// communication layer (result_code, error_code), a business layer
// (biz_response) and the order (biz_response.data). Pointers tell a
// missing result code from an empty one.
type sqbAPIResponse[D any] struct {
	ResultCode   *string       `json:"result_code"`
	ErrorCode    string        `json:"error_code"`
	ErrorMessage string        `json:"error_message"`
	BizResponse  *sqbAPIBiz[D] `json:"biz_response"`
}

// sqbAPIBiz is the business layer of an API answer.
type sqbAPIBiz[D any] struct {
	ResultCode   *string `json:"result_code"`
	ErrorCode    string  `json:"error_code"`
	ErrorMessage string  `json:"error_message"`
	Data         *D      `json:"data"`
}

// sqbAnswer is the order query's answer as the query client reads it.
type sqbAnswer = sqbAPIResponse[sqbAnswerOrder]

// sqbAnswerOrder is the order as a query answer gives it: the callback's
// fields, and refunded_amount, which only the sqb-payment-skills
// repository documents (UNCONFIRMED).
type sqbAnswerOrder struct {
	sqbOrder
	RefundedAmount *string `json:"refunded_amount"`
}

// DecodeQueryAnswer reads Shouqianba's answer resp to the order query
// BuildQueryRequest built for target. Shouqianba does not sign its
// answers: there is nothing to verify but TLS to the configured host,
// which is the caller's.
//
// The outcome, by layer (docs/queries.md has the table and sources):
//   - HTTP 5xx: QueryRetry; HTTP 429: QueryThrottled; another 4xx whose
//     body is no Shouqianba answer: QueryRefused.
//   - result_code "400" (INVALID_PARAMS, INVALID_TERMINAL, ILLEGAL_SIGN):
//     QueryRefused; "500": QueryRetry; any other: QueryUncertain.
//   - biz_response.result_code FAIL with UPAY_ORDER_NOT_EXISTS:
//     QueryNotFound; with UPAY_TERMINAL_NOT_EXISTS or
//     UPAY_TERMINAL_STATUS_ABNORMAL: QueryRefused; other codes, and
//     business result codes other than SUCCESS and FAIL: QueryUncertain.
//   - order_status PAID: QuerySettled with the payment event;
//     PARTIAL_REFUNDED and REFUNDED: QuerySettled with the payment event
//     and the cumulative refund event, or the payment event alone when the
//     answer carries no refund number (neither refund_request_no nor a
//     client_tsn suffix: the callback's number cannot be told); CANCELED:
//     QuerySettled with the cancel event; CREATED: QueryPending;
//     PAY_CANCELED: QueryClosed; PAY_ERROR, REFUND_ERROR, CANCEL_ERROR,
//     CANCEL_INPROGRESS and unknown states: QueryUncertain.
//   - A money-moving order_status whose last operation (status) is neither
//     SUCCESS nor the order_status itself, or whose refunded_amount
//     disagrees with total_amount - net_amount: QueryUncertain.
//
// A refund target (QueryRefund) is settled only when the order's last
// operation is that very refund (its number equals target.RefundNo); a
// paid order showing no refund is QueryNotFound; a last operation that
// failed (FAIL_CANCELED) and is that refund is QueryClosed; anything else
// is QueryUncertain, since the answer shows the last operation only.
//
// Each event is the one the order's callback gives (sqbMoneyEvent, the
// callback decoder's), completed with channels.CompleteQueryEvent for
// target's tenant with resp.ReceivedAt. Errors (a *channels.Error): an
// answer that is not JSON, repeats a member, has a value of the wrong type
// or lacks a field it needs (KindMalformed); an amount or time the callback
// decoder refuses (its kinds); an answer naming another terminal_sn, sn or
// client_sn than target (KindMalformed, wrapping ErrOtherOrder). A target
// of another channel is refused with ErrBadQueryTarget.
func DecodeQueryAnswer(target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	if target.Channel != Code {
		return channels.QueryAnswer{}, fmt.Errorf("%w: channel %q is not %s", ErrBadQueryTarget, target.Channel, Code)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return httpAnswer(channels.QueryThrottled, code, "Shouqianba limits the rate: back this terminal off"), nil
	case code >= 500 && code <= 599:
		return httpAnswer(channels.QueryRetry, code, "Shouqianba failed on its side: ask again"), nil
	}
	var a sqbAnswer
	err := channels.Unmarshal(resp.Body, &a, "sqb query answer")
	switch code := resp.StatusCode; {
	case code >= 400 && code <= 499 && (err != nil || a.ResultCode == nil):
		return httpAnswer(channels.QueryRefused, code, "Shouqianba refused the request without an answer: check the base URL and the terminal"), nil
	case err != nil:
		return channels.QueryAnswer{}, err
	case (code < 200 || code > 299) && (code < 400 || code > 499):
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "sqb query answer with HTTP status %d", code)
	}
	return decodeAnswer(target, &a, resp)
}

// httpAnswer is the answer of an HTTP status alone.
func httpAnswer(o channels.QueryOutcome, code int, detail string) channels.QueryAnswer {
	return channels.QueryAnswer{Outcome: o, RawState: "HTTP " + strconv.Itoa(code), Detail: detail}
}

// decodeAnswer reads the answer's layers.
func decodeAnswer(target channels.QueryTarget, a *sqbAnswer, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	if a.ResultCode == nil || *a.ResultCode == "" {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "sqb query answer has no result_code")
	}
	switch rc := *a.ResultCode; rc {
	case ResultOK:
	case ResultClientError:
		return channels.QueryAnswer{
			Outcome: channels.QueryRefused, RawState: orCode(a.ErrorCode, rc),
			Detail: "Shouqianba refuses the request (" + orCode(a.ErrorCode, rc) + ": INVALID_PARAMS, INVALID_TERMINAL or ILLEGAL_SIGN: " +
				"check the terminal_sn and whether the terminal key was rotated by a check-in)",
		}, nil
	case ResultServerError:
		return channels.QueryAnswer{
			Outcome: channels.QueryRetry, RawState: orCode(a.ErrorCode, rc),
			Detail: "Shouqianba failed on its side (" + orCode(a.ErrorCode, rc) + "): ask again",
		}, nil
	default:
		return channels.QueryAnswer{
			Outcome: channels.QueryUncertain, RawState: rc,
			Detail: "unknown result_code " + channels.Quote(rc) + ": nothing is posted",
		}, nil
	}
	biz := a.BizResponse
	if biz == nil || biz.ResultCode == nil || *biz.ResultCode == "" {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "sqb query answer has no biz_response.result_code")
	}
	switch bizCode := *biz.ResultCode; bizCode {
	case BizSuccess:
	case BizFail:
		return failAnswer(biz), nil
	default:
		return channels.QueryAnswer{
			Outcome: channels.QueryUncertain, RawState: bizCode,
			Detail: "business result " + channels.Quote(bizCode) + " is not a query's SUCCESS or FAIL: nothing is posted",
		}, nil
	}
	if biz.Data == nil {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "sqb query answer SUCCESS has no biz_response.data")
	}
	o := biz.Data
	if err := checkSameOrder(target, &o.sqbOrder); err != nil {
		return channels.QueryAnswer{}, err
	}
	ans, err := orderAnswer(target, o)
	if err != nil {
		return channels.QueryAnswer{}, err
	}
	ans.MerchantID = o.TerminalSN
	if ans.RawState == "" {
		ans.RawState = o.OrderStatus
	}
	for i, ev := range ans.Events {
		ev.TenantID = target.TenantID
		ev.Channel = Code
		if ans.Events[i], err = channels.CompleteQueryEvent(ev, resp.ReceivedAt); err != nil {
			return channels.QueryAnswer{}, fmt.Errorf("sqb query answer: %w", err)
		}
	}
	return ans, nil
}

// orCode is code, else fallback.
func orCode(code, fallback string) string {
	if code != "" {
		return code
	}
	return fallback
}

// failAnswer is the answer of a business FAIL.
func failAnswer(biz *sqbAPIBiz[sqbAnswerOrder]) channels.QueryAnswer {
	raw := orCode(biz.ErrorCode, BizFail)
	switch biz.ErrorCode {
	case OrderNotExists:
		return channels.QueryAnswer{
			Outcome: channels.QueryNotFound, RawState: raw,
			Detail: "Shouqianba does not know the order (UPAY_ORDER_NOT_EXISTS): not final while the order is young",
		}
	case "UPAY_TERMINAL_NOT_EXISTS", "UPAY_TERMINAL_STATUS_ABNORMAL":
		return channels.QueryAnswer{
			Outcome: channels.QueryRefused, RawState: raw,
			Detail: "Shouqianba refuses the terminal (" + raw + "): the terminal does not exist or is not activated",
		}
	}
	return channels.QueryAnswer{
		Outcome: channels.QueryUncertain, RawState: raw,
		Detail: "the query failed with " + channels.Quote(raw) + ", which says nothing of the order: nothing is posted",
	}
}

// checkSameOrder refuses an answer about another order than target's: a
// terminal_sn (when the answer names one), sn or client_sn (when target
// knows it) that differs.
func checkSameOrder(target channels.QueryTarget, o *sqbOrder) error {
	if err := channels.CheckID("sqb query answer sn", o.SN); err != nil {
		return err
	}
	other := func(field, got, asked string) error {
		return channels.Errorf(channels.KindMalformed, "%w: %s %s, asked about %s", ErrOtherOrder, field, channels.Quote(got), channels.Quote(asked))
	}
	switch {
	case o.TerminalSN != "" && o.TerminalSN != target.MerchantID:
		return other("terminal_sn", o.TerminalSN, target.MerchantID)
	case target.TradeNo != "" && o.SN != target.TradeNo:
		return other("sn", o.SN, target.TradeNo)
	case target.MerchantOrderNo != "" && o.ClientSN != target.MerchantOrderNo:
		return other("client_sn", o.ClientSN, target.MerchantOrderNo)
	}
	return nil
}

// orderAnswer maps the order's state to the answer, with its events not
// yet completed.
func orderAnswer(target channels.QueryTarget, o *sqbAnswerOrder) (channels.QueryAnswer, error) {
	refund := target.Kind == channels.QueryRefund
	uncertain := func(detail string) channels.QueryAnswer {
		return channels.QueryAnswer{Outcome: channels.QueryUncertain, Detail: detail}
	}
	switch o.OrderStatus {
	case Paid, PartialRefunded, Refunded, Canceled:
	case Created:
		if refund {
			return uncertain("the order is CREATED (not paid yet), so it cannot show the refund asked about: nothing is posted"), nil
		}
		return channels.QueryAnswer{Outcome: channels.QueryPending, Detail: "the order is CREATED, not paid yet: ask again"}, nil
	case PayCanceled:
		if refund {
			return uncertain("the order ended unpaid (PAY_CANCELED), so it cannot show the refund asked about: nothing is posted"), nil
		}
		return channels.QueryAnswer{Outcome: channels.QueryClosed, Detail: "the payment failed and was reversed (PAY_CANCELED): the order ended unpaid"}, nil
	case PayError, RefundError, CancelError, CancelInProgress:
		return uncertain("Shouqianba cannot say how the order ended (" + o.OrderStatus +
			"): nothing is posted; Shouqianba's support settles it"), nil
	case "":
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "sqb query answer has no order_status")
	default:
		return uncertain("unknown order_status " + channels.Quote(o.OrderStatus) + ": nothing is posted"), nil
	}
	if o.Status == "" {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindMalformed, "sqb query answer has no status")
	}
	carried, hasNo := sqbCarriedRefundNo(&o.sqbOrder)
	if o.Status != StatusSuccess && o.Status != o.OrderStatus {
		if refund && o.Status == "FAIL_CANCELED" && hasNo && carried == target.RefundNo {
			return channels.QueryAnswer{
				Outcome: channels.QueryClosed,
				Detail:  "the refund failed and nothing was refunded (last operation FAIL_CANCELED)",
			}, nil
		}
		return uncertain("the order's last operation has status " + channels.Quote(o.Status) +
			", not SUCCESS: nothing is posted"), nil
	}
	switch disagree, err := refundedAmountDisagrees(o); {
	case err != nil:
		return channels.QueryAnswer{}, err
	case disagree != "":
		return uncertain(disagree), nil
	}
	switch o.OrderStatus {
	case Paid:
		if refund {
			return channels.QueryAnswer{
				Outcome: channels.QueryNotFound,
				Detail:  "the order is paid and shows no refund: the refund asked about has not reached Shouqianba",
			}, nil
		}
		ev, err := sqbMoneyEvent(&o.sqbOrder)
		return settled("the order is paid", ev), err
	case Canceled:
		if refund {
			return uncertain("the order was canceled (CANCELED), which nets the trade to zero; it does not show the refund asked about: nothing is posted"), nil
		}
		ev, err := sqbMoneyEvent(&o.sqbOrder)
		return settled("the order was canceled: the cancel nets the trade to zero", ev), err
	}
	return refundedAnswer(target, o, carried, hasNo)
}

// refundedAnswer is the answer of a PARTIAL_REFUNDED or REFUNDED order
// whose last operation succeeded: the payment, and the cumulative refund
// when the answer carries the number its callback would.
func refundedAnswer(target channels.QueryTarget, o *sqbAnswerOrder, carried string, hasNo bool) (channels.QueryAnswer, error) {
	paid := o.sqbOrder
	paid.OrderStatus = Paid
	payment, err := sqbMoneyEvent(&paid)
	if err != nil {
		return channels.QueryAnswer{}, err
	}
	if target.Kind == channels.QueryRefund {
		if !hasNo || carried != target.RefundNo {
			last := "carries no refund number"
			if hasNo {
				last = "is refund " + channels.Quote(carried)
			}
			return channels.QueryAnswer{
				Outcome: channels.QueryUncertain,
				Detail: "the order's last operation " + last + ", not the refund " + channels.Quote(target.RefundNo) +
					" asked about; the answer shows the last operation only: nothing is posted",
			}, nil
		}
	}
	if !hasNo || carried == CancelRefundNo {
		why := "carries neither refund_request_no nor a client_tsn suffix, so the refund's callback number cannot be told"
		if hasNo {
			why = "is numbered CANCEL, which the cancel's key reserves (its callback is held for a person)"
		}
		return settled("the order is paid; the refund "+why+": the payment only", payment), nil
	}
	refund, err := sqbMoneyEvent(&o.sqbOrder)
	if err != nil {
		return channels.QueryAnswer{}, err
	}
	return settled(fmt.Sprintf("the order is paid and %d fen refunded so far, the last refund numbered %s",
		refund.CumulativeRefunded, channels.Quote(refund.RefundNo)), payment, refund), nil
}

// settled is a QuerySettled answer proving evs.
func settled(detail string, evs ...channels.Event) channels.QueryAnswer {
	return channels.QueryAnswer{Outcome: channels.QuerySettled, Events: evs, Detail: detail}
}

// refundedAmountDisagrees checks refunded_amount, when present, against
// what the order's other amounts say was refunded (0 for PAID, total_amount
// - net_amount for PARTIAL_REFUNDED and REFUNDED; a CANCELED order's is
// not compared): a reason when they disagree, an error when an amount is
// not one.
func refundedAmountDisagrees(o *sqbAnswerOrder) (string, error) {
	if o.RefundedAmount == nil || o.OrderStatus == Canceled {
		return "", nil
	}
	refunded, err := channels.ParseFen(*o.RefundedAmount)
	if err != nil {
		return "", channels.WrapKind(err, "sqb refunded_amount")
	}
	var want int64
	if o.OrderStatus != Paid {
		total, err := channels.ParseFen(o.TotalAmount)
		if err != nil {
			return "", channels.WrapKind(err, "sqb total_amount")
		}
		net, err := channels.ParseFen(o.NetAmount)
		if err != nil {
			return "", channels.WrapKind(err, "sqb net_amount")
		}
		want = total - net
	}
	if refunded != want {
		return fmt.Sprintf("refunded_amount %d disagrees with the %d fen the order's other amounts say was refunded (%s): nothing is posted",
			refunded, want, o.OrderStatus), nil
	}
	return "", nil
}
