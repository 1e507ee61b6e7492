package channels

import (
	"strconv"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/eventkey"
)

// Shouqianba order statuses and the operation status that moves money.
const (
	SQBStatusSuccess    = "SUCCESS"
	SQBCreated          = "CREATED"
	SQBPaid             = "PAID"
	SQBPayCanceled      = "PAY_CANCELED"
	SQBPayError         = "PAY_ERROR"
	SQBRefunded         = "REFUNDED"
	SQBPartialRefunded  = "PARTIAL_REFUNDED"
	SQBRefundError      = "REFUND_ERROR"
	SQBCanceled         = "CANCELED"
	SQBCancelError      = "CANCEL_ERROR"
	SQBCancelInProgress = "CANCEL_INPROGRESS"
	SQBCancelRefundNo   = "CANCEL"      // the refund number of a CANCELED order's reversal
	sqbMaxEpochMillis   = 4102444800000 // 2100-01-01T00:00:00Z
	sqbMinEpochMillis   = 946684800000  // 2000-01-01T00:00:00Z
)

// sqbOrder is a Shouqianba callback, or the data part of a forwarded
// refund API response. Every value is a JSON string.
type sqbOrder struct {
	SN                string `json:"sn"`
	ClientSN          string `json:"client_sn"`
	ClientTSN         string `json:"client_tsn"`
	RefundRequestNo   string `json:"refund_request_no"`
	Status            string `json:"status"`
	OrderStatus       string `json:"order_status"`
	TotalAmount       string `json:"total_amount"`
	NetAmount         string `json:"net_amount"`
	FinishTime        string `json:"finish_time"`
	ChannelFinishTime string `json:"channel_finish_time"`
	TerminalSN        string `json:"terminal_sn"`
}

// sqbBody accepts both the callback (fields at the top level) and the
// refund API response a receiver may forward instead
// ({"result_code":"200","biz_response":{"data":{...}}}).
type sqbBody struct {
	sqbOrder
	BizResponse *sqbBizResponse `json:"biz_response"`
}

// sqbBizResponse is the biz_response part of a forwarded refund API
// response.
type sqbBizResponse struct {
	Data *sqbOrder `json:"data"`
}

func decodeSQB(env Envelope) (res Result, err error) {
	var body sqbBody
	defer func() { res.MerchantID = body.merchant() }()
	if !fastSQB([]byte(env.Body), &body) {
		body = sqbBody{}
		if err := unmarshal([]byte(env.Body), &body, "sqb body"); err != nil {
			return Result{}, err
		}
	}
	o := &body.sqbOrder
	if body.BizResponse != nil && body.BizResponse.Data != nil {
		if o.SN != "" || o.OrderStatus != "" {
			return Result{}, errorf(KindMalformed, "sqb body has both top-level order fields and biz_response.data")
		}
		o = body.BizResponse.Data
	}
	ev := Event{
		TradeNo:         o.SN,
		MerchantOrderNo: o.ClientSN,
		RawStatus:       o.OrderStatus,
	}
	switch o.OrderStatus {
	case SQBPaid, SQBPartialRefunded, SQBRefunded, SQBCanceled:
	case SQBCreated, SQBPayCanceled, SQBPayError, SQBRefundError, SQBCancelError, SQBCancelInProgress:
		return ignored("sqb order_status "+o.OrderStatus+": no money moves", ev), nil
	case "":
		return Result{}, errorf(KindMalformed, "sqb body has no order_status")
	default:
		return Result{}, errorf(KindUnsupported, "sqb order_status %s", quote(o.OrderStatus))
	}
	if o.Status != SQBStatusSuccess {
		if o.Status == "" {
			return Result{}, errorf(KindMalformed, "sqb body has no status")
		}
		return ignored("sqb status "+quote(o.Status)+": operation did not succeed", ev), nil
	}
	if err := checkID("sqb client_sn", o.ClientSN); err != nil {
		return Result{}, err
	}
	total, err := ParseFen(o.TotalAmount)
	if err != nil {
		return Result{}, wrapKind(err, "sqb total_amount")
	}
	if total == 0 {
		return Result{}, errorf(KindInvalidAmount, "sqb total_amount is zero")
	}
	ev.OrderTotal = total
	if ev.OccurredAt, err = sqbTime(o.FinishTime, o.ChannelFinishTime); err != nil {
		return Result{}, err
	}

	switch o.OrderStatus {
	case SQBPaid:
		ev.Type = eventkey.PaymentReceived
		if ev.Key, err = paymentKey(SQB, o.SN); err != nil {
			return Result{}, err
		}
		return Result{Event: ev}, nil
	case SQBCanceled:
		// The end of a cancel, which says nothing about whether money had
		// moved: it nets the trade to zero (settlement reverses whatever
		// payment is posted for the trade, now or when it is reported
		// later; see Event.IsCancel). It is reported as the whole total
		// refunded so far, under refund number CANCEL.
		ev.CumulativeRefunded = total
		ev.RefundNo = SQBCancelRefundNo
	default: // PARTIAL_REFUNDED, REFUNDED: refunded so far = total - net
		net, err := ParseFen(o.NetAmount)
		if err != nil {
			return Result{}, wrapKind(err, "sqb net_amount")
		}
		if net > total {
			return Result{}, errorf(KindInvalidAmount, "sqb net_amount %d exceeds total_amount %d", net, total)
		}
		if net == total {
			return Result{}, errorf(KindInvalidAmount, "sqb %s with nothing refunded (net_amount equals total_amount)", o.OrderStatus)
		}
		ev.CumulativeRefunded = total - net
		ev.RefundNo = sqbRefundNo(o, ev.CumulativeRefunded)
		if ev.RefundNo == SQBCancelRefundNo {
			// A refund numbered CANCEL would take the cancel's key and be
			// settled as the cancel, netting the trade to zero whatever
			// amount it refunds: held for a person instead.
			return Result{}, errorf(KindUnsupported,
				"sqb refund number %s is the one the cancel's key reserves; settle this refund by hand", quote(ev.RefundNo))
		}
	}
	ev.Type = eventkey.RefundSucceeded
	if ev.Key, err = refundKey(SQB, o.SN, ev.RefundNo); err != nil {
		return Result{}, err
	}
	return Result{Event: ev, RefundStatus: RefundSuccess}, nil
}

// merchant is the terminal the body names: biz_response.data's of a
// forwarded API response, else the callback's own.
func (b *sqbBody) merchant() string {
	if b.BizResponse != nil && b.BizResponse.Data != nil {
		return b.BizResponse.Data.TerminalSN
	}
	return b.TerminalSN
}

// SQBCancelKey is the idempotency key of the CANCELED callback of
// Shouqianba trade tradeNo: SQB:<tradeNo>:REFUND_SUCCEEDED:CANCEL.
// It is CancelKey(SQB, tradeNo).
func SQBCancelKey(tradeNo string) (eventkey.Key, error) {
	return CancelKey(SQB, tradeNo)
}

// IsCancel reports whether e is the cancel of a channel that has one
// (Spec.CancelRefundNo; a Shouqianba CANCELED order, refund number
// CANCEL): it nets the trade to zero rather than refunding an amount. It
// reverses the payment posted for the trade; with none posted it moves
// nothing, and a payment settled later for the trade is reversed with it.
func (e Event) IsCancel() bool {
	if e.Type != eventkey.RefundSucceeded {
		return false
	}
	no := e.Channel.CancelRefundNo()
	return no != "" && e.RefundNo == no
}

// sqbRefundNo is refund_request_no, else the suffix of client_tsn
// (client_sn + "-" + refund_request_no), else the cumulative amount, which
// is the same on every redelivery of one refund.
func sqbRefundNo(o *sqbOrder, cumulative int64) string {
	if o.RefundRequestNo != "" {
		return o.RefundRequestNo
	}
	if o.ClientSN != "" {
		if s, ok := strings.CutPrefix(o.ClientTSN, o.ClientSN+"-"); ok && s != "" {
			return s
		}
	}
	return strconv.FormatInt(cumulative, 10)
}

// sqbTime parses the first non-empty epoch-milliseconds candidate.
func sqbTime(candidates ...string) (time.Time, error) {
	for _, s := range candidates {
		if s == "" {
			continue
		}
		ms, err := parseUint(s, sqbMaxEpochMillis)
		if err != nil || ms < sqbMinEpochMillis {
			return time.Time{}, errorf(KindMalformed, "sqb time %s is not epoch milliseconds between 2000 and 2100", quote(s))
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	return time.Time{}, errorf(KindMalformed, "sqb body has neither finish_time nor channel_finish_time")
}
