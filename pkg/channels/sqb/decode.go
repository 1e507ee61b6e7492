package sqb

import (
	"strconv"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// Shouqianba order statuses and the operation status that moves money.
const (
	StatusSuccess     = "SUCCESS"
	Created           = "CREATED"
	Paid              = "PAID"
	PayCanceled       = "PAY_CANCELED"
	PayError          = "PAY_ERROR"
	Refunded          = "REFUNDED"
	PartialRefunded   = "PARTIAL_REFUNDED"
	RefundError       = "REFUND_ERROR"
	Canceled          = "CANCELED"
	CancelError       = "CANCEL_ERROR"
	CancelInProgress  = "CANCEL_INPROGRESS"
	CancelRefundNo    = "CANCEL"      // the refund number of a CANCELED order's reversal
	sqbMaxEpochMillis = 4102444800000 // 2100-01-01T00:00:00Z
	sqbMinEpochMillis = 946684800000  // 2000-01-01T00:00:00Z
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

func decodeSQB(env channels.Envelope) (res channels.Result, err error) {
	var body sqbBody
	defer func() { res.MerchantID = body.merchant() }()
	if !fastSQB([]byte(env.Body), &body) {
		body = sqbBody{}
		if err := channels.Unmarshal([]byte(env.Body), &body, "sqb body"); err != nil {
			return channels.Result{}, err
		}
	}
	o := &body.sqbOrder
	if body.BizResponse != nil && body.BizResponse.Data != nil {
		if o.SN != "" || o.OrderStatus != "" {
			return channels.Result{}, channels.Errorf(channels.KindMalformed, "sqb body has both top-level order fields and biz_response.data")
		}
		o = body.BizResponse.Data
	}
	ev := channels.Event{
		TradeNo:         o.SN,
		MerchantOrderNo: o.ClientSN,
		RawStatus:       o.OrderStatus,
	}
	switch o.OrderStatus {
	case Paid, PartialRefunded, Refunded, Canceled:
	case Created, PayCanceled, PayError, RefundError, CancelError, CancelInProgress:
		return channels.Ignored("sqb order_status "+o.OrderStatus+": no money moves", ev), nil
	case "":
		return channels.Result{}, channels.Errorf(channels.KindMalformed, "sqb body has no order_status")
	default:
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "sqb order_status %s", channels.Quote(o.OrderStatus))
	}
	if o.Status != StatusSuccess {
		if o.Status == "" {
			return channels.Result{}, channels.Errorf(channels.KindMalformed, "sqb body has no status")
		}
		return channels.Ignored("sqb status "+channels.Quote(o.Status)+": operation did not succeed", ev), nil
	}
	ev, err = sqbMoneyEvent(o)
	if err != nil {
		return channels.Result{}, err
	}
	if ev.Type == eventkey.RefundSucceeded {
		return channels.Result{Event: ev, RefundStatus: channels.RefundSuccess}, nil
	}
	return channels.Result{Event: ev}, nil
}

// sqbMoneyEvent is the event of an order in a money-moving order_status
// (PAID, PARTIAL_REFUNDED, REFUNDED, CANCELED) whose last operation
// succeeded: the payment, the cumulative refund or the cancel. The callback
// decoder and the query answer decoder both build their events with it, so
// an answer's event is its callback's. TenantID, Channel, Currency and the
// fingerprint are the caller's.
func sqbMoneyEvent(o *sqbOrder) (channels.Event, error) {
	ev := channels.Event{
		TradeNo:         o.SN,
		MerchantOrderNo: o.ClientSN,
		RawStatus:       o.OrderStatus,
	}
	if err := channels.CheckID("sqb client_sn", o.ClientSN); err != nil {
		return channels.Event{}, err
	}
	total, err := channels.ParseFen(o.TotalAmount)
	if err != nil {
		return channels.Event{}, channels.WrapKind(err, "sqb total_amount")
	}
	if total == 0 {
		return channels.Event{}, channels.Errorf(channels.KindInvalidAmount, "sqb total_amount is zero")
	}
	ev.OrderTotal = total
	if ev.OccurredAt, err = sqbTime(o.FinishTime, o.ChannelFinishTime); err != nil {
		return channels.Event{}, err
	}

	switch o.OrderStatus {
	case Paid:
		ev.Type = eventkey.PaymentReceived
		if ev.Key, err = channels.PaymentKey(Code, o.SN); err != nil {
			return channels.Event{}, err
		}
		return ev, nil
	case Canceled:
		// The end of a cancel, which says nothing about whether money had
		// moved: it nets the trade to zero (settlement reverses whatever
		// payment is posted for the trade, now or when it is reported
		// later; see Event.IsCancel). It is reported as the whole total
		// refunded so far, under refund number CANCEL.
		ev.CumulativeRefunded = total
		ev.RefundNo = CancelRefundNo
	case PartialRefunded, Refunded: // refunded so far = total - net
		net, err := channels.ParseFen(o.NetAmount)
		if err != nil {
			return channels.Event{}, channels.WrapKind(err, "sqb net_amount")
		}
		if net > total {
			return channels.Event{}, channels.Errorf(channels.KindInvalidAmount, "sqb net_amount %d exceeds total_amount %d", net, total)
		}
		if net == total {
			return channels.Event{}, channels.Errorf(channels.KindInvalidAmount, "sqb %s with nothing refunded (net_amount equals total_amount)", o.OrderStatus)
		}
		ev.CumulativeRefunded = total - net
		ev.RefundNo = sqbRefundNo(o, ev.CumulativeRefunded)
		if ev.RefundNo == CancelRefundNo {
			// A refund numbered CANCEL would take the cancel's key and be
			// settled as the cancel, netting the trade to zero whatever
			// amount it refunds: held for a person instead.
			return channels.Event{}, channels.Errorf(channels.KindUnsupported,
				"sqb refund number %s is the one the cancel's key reserves; settle this refund by hand", channels.Quote(ev.RefundNo))
		}
	default:
		return channels.Event{}, channels.Errorf(channels.KindUnsupported, "sqb order_status %s moves no money", channels.Quote(o.OrderStatus))
	}
	ev.Type = eventkey.RefundSucceeded
	if ev.Key, err = channels.RefundKey(Code, o.SN, ev.RefundNo); err != nil {
		return channels.Event{}, err
	}
	return ev, nil
}

// merchant is the terminal the body names: biz_response.data's of a
// forwarded API response, else the callback's own.
func (b *sqbBody) merchant() string {
	if b.BizResponse != nil && b.BizResponse.Data != nil {
		return b.BizResponse.Data.TerminalSN
	}
	return b.TerminalSN
}

// CancelKey is the idempotency key of the CANCELED callback of
// Shouqianba trade tradeNo: SQB:<tradeNo>:REFUND_SUCCEEDED:CANCEL.
// It is channels.CancelKey(Code, tradeNo).
func CancelKey(tradeNo string) (eventkey.Key, error) {
	return channels.CancelKey(Code, tradeNo)
}

// sqbRefundNo is refund_request_no, else the suffix of client_tsn
// (client_sn + "-" + refund_request_no), else the cumulative amount, which
// is the same on every redelivery of one refund.
func sqbRefundNo(o *sqbOrder, cumulative int64) string {
	if no, ok := sqbCarriedRefundNo(o); ok {
		return no
	}
	return strconv.FormatInt(cumulative, 10)
}

// sqbCarriedRefundNo is the refund number o carries itself:
// refund_request_no, else the suffix of client_tsn; false when it carries
// neither.
func sqbCarriedRefundNo(o *sqbOrder) (string, bool) {
	if o.RefundRequestNo != "" {
		return o.RefundRequestNo, true
	}
	if o.ClientSN != "" {
		if s, ok := strings.CutPrefix(o.ClientTSN, o.ClientSN+"-"); ok && s != "" {
			return s, true
		}
	}
	return "", false
}

// sqbTime parses the first non-empty epoch-milliseconds candidate.
func sqbTime(candidates ...string) (time.Time, error) {
	for _, s := range candidates {
		if s == "" {
			continue
		}
		ms, err := channels.ParseUint(s, sqbMaxEpochMillis)
		if err != nil || ms < sqbMinEpochMillis {
			return time.Time{}, channels.Errorf(channels.KindMalformed, "sqb time %s is not epoch milliseconds between 2000 and 2100", channels.Quote(s))
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	return time.Time{}, channels.Errorf(channels.KindMalformed, "sqb body has neither finish_time nor channel_finish_time")
}
