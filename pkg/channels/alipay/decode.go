package alipay

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	_ "time/tzdata" // Alipay times are Beijing time; parse them without system zoneinfo

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// Alipay trade statuses.
const (
	WaitBuyerPay  = "WAIT_BUYER_PAY"
	TradeClosed   = "TRADE_CLOSED"
	TradeSuccess  = "TRADE_SUCCESS"
	TradeFinished = "TRADE_FINISHED"
	NotifyType    = "trade_status_sync"
)

// TimeLayout is the layout of Alipay's zone-less Beijing times;
// gmt_refund's milliseconds parse with it too.
const TimeLayout = "2006-01-02 15:04:05"

// shanghai is Asia/Shanghai from the embedded tzdata. China has kept UTC+8
// without daylight saving since 1991, so the fixed zone is an exact stand-in
// should the lookup ever fail.
var shanghai = func() *time.Location {
	if loc, err := time.LoadLocation("Asia/Shanghai"); err == nil {
		return loc
	}
	return time.FixedZone("CST", 8*3600)
}()

// alipayFields are the form fields the decoder reads; every other field is
// tolerated and ignored. Each of these must appear at most once.
var alipayFields = [...]string{
	"notify_type", "trade_no", "out_trade_no", "out_biz_no", "trade_status",
	"total_amount", "refund_fee", "gmt_create", "gmt_payment", "gmt_refund",
	"notify_time", "trans_currency", "seller_id", "app_id",
}

// alipayForm holds the values of alipayFields read from one body.
type alipayForm struct {
	vals [len(alipayFields)]string
}

func (f *alipayForm) get(name string) string { return f.vals[alipayFieldIndex(name)] }

func alipayFieldIndex(name string) int {
	for i, k := range alipayFields {
		if k == name {
			return i
		}
	}
	return -1
}

// parseAlipayForm decodes a form body with url.ParseQuery's grammar and
// errors (bad %-escapes, ';' separators), keeping only alipayFields and
// refusing any of them that appears twice.
func parseAlipayForm(body string) (*alipayForm, error) {
	f := new(alipayForm)
	var seen [len(alipayFields)]bool
	for body != "" {
		var pair string
		pair, body, _ = strings.Cut(body, "&")
		if strings.IndexByte(pair, ';') >= 0 {
			return nil, errors.New("invalid semicolon separator in form")
		}
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		i := alipayFieldIndex(key)
		if i < 0 {
			if err := checkEscapes(v); err != nil {
				return nil, err
			}
			continue
		}
		if seen[i] {
			return nil, fmt.Errorf("field %s appears more than once", key)
		}
		seen[i] = true
		if f.vals[i], err = url.QueryUnescape(v); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// checkEscapes reports a '%' not followed by two hex digits, as
// url.QueryUnescape would, without building the value.
func checkEscapes(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			rest := s[i:]
			if len(rest) > 3 {
				rest = rest[:3]
			}
			return url.EscapeError(rest)
		}
		i += 2
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func decodeAlipay(env channels.Envelope) (res channels.Result, err error) {
	form, err := parseAlipayForm(env.Body)
	if err != nil {
		return channels.Result{}, channels.Errorf(channels.KindMalformed, "decode alipay form: %w", err)
	}
	defer func() { res.MerchantID, res.AppID = form.get("seller_id"), form.get("app_id") }()
	get := form.get
	if nt := get("notify_type"); nt != "" && nt != NotifyType {
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "alipay notify_type %s", channels.Quote(nt))
	}
	status := get("trade_status")
	ev := channels.Event{
		TradeNo:         get("trade_no"),
		MerchantOrderNo: get("out_trade_no"),
		RawStatus:       status,
	}
	switch status {
	case TradeSuccess, TradeFinished, TradeClosed:
	case WaitBuyerPay:
		return channels.Ignored("alipay WAIT_BUYER_PAY: not paid yet", ev), nil
	case "":
		return channels.Result{}, channels.Errorf(channels.KindMalformed, "alipay notification has no trade_status")
	default:
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "alipay trade_status %s", channels.Quote(status))
	}
	if c := get("trans_currency"); c != "" && c != channels.CurrencyCNY {
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "alipay trans_currency %s", channels.Quote(c))
	}

	// A refund is gmt_refund present and refund_fee > 0: a payment may carry
	// refund_fee=0.00.
	var refundFee int64
	if s := get("refund_fee"); s != "" {
		if refundFee, err = channels.ParseYuan(s); err != nil {
			return channels.Result{}, channels.WrapKind(err, "alipay refund_fee")
		}
	}
	gmtRefund := get("gmt_refund")
	isRefund := gmtRefund != "" && refundFee > 0
	if !isRefund && refundFee > 0 {
		// Not a documented shape; refusing it keeps a possible refund visible.
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "alipay %s with refund_fee %s but no gmt_refund", status, channels.Quote(get("refund_fee")))
	}
	if !isRefund && status == TradeClosed {
		return channels.Ignored("alipay TRADE_CLOSED without refund: unpaid close", ev), nil
	}

	if err := channels.CheckID("alipay out_trade_no", ev.MerchantOrderNo); err != nil {
		return channels.Result{}, err
	}
	total, err := channels.ParseYuan(get("total_amount"))
	if err != nil {
		return channels.Result{}, channels.WrapKind(err, "alipay total_amount")
	}
	if total == 0 {
		return channels.Result{}, channels.Errorf(channels.KindInvalidAmount, "alipay total_amount is zero")
	}
	ev.OrderTotal = total

	if !isRefund {
		// TRADE_SUCCESS or TRADE_FINISHED: the same payment, same key and
		// fingerprint, so a late TRADE_FINISHED is a duplicate.
		ev.Type = eventkey.PaymentReceived
		if ev.Key, err = channels.PaymentKey(Code, ev.TradeNo); err != nil {
			return channels.Result{}, err
		}
		if ev.OccurredAt, err = alipayTime(get("gmt_payment"), get("gmt_create"), get("notify_time")); err != nil {
			return channels.Result{}, err
		}
		return channels.Result{Event: ev}, nil
	}

	// Partial (TRADE_SUCCESS) or full (TRADE_CLOSED) refund; refund_fee is
	// cumulative. out_biz_no is the refund request number; Alipay uses the
	// trade number when the merchant set none.
	ev.Type = eventkey.RefundSucceeded
	ev.CumulativeRefunded = refundFee
	ev.RefundNo = get("out_biz_no")
	if ev.RefundNo == "" {
		ev.RefundNo = ev.TradeNo
	}
	if ev.Key, err = channels.RefundKey(Code, ev.TradeNo, ev.RefundNo); err != nil {
		return channels.Result{}, err
	}
	if ev.OccurredAt, err = alipayTime(gmtRefund); err != nil {
		return channels.Result{}, err
	}
	return channels.Result{Event: ev, RefundStatus: channels.RefundSuccess}, nil
}

// alipayTime parses the first non-empty candidate as Beijing time into UTC.
func alipayTime(candidates ...string) (time.Time, error) {
	for _, s := range candidates {
		if s == "" {
			continue
		}
		t, err := time.ParseInLocation(TimeLayout, s, shanghai)
		if err != nil {
			return time.Time{}, channels.Errorf(channels.KindMalformed, "alipay time %s: %w", channels.Quote(s), err)
		}
		return t.UTC(), nil
	}
	return time.Time{}, channels.Errorf(channels.KindMalformed, "alipay notification carries no usable time")
}
