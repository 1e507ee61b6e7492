package alipay

import (
	"fmt"
	"net/url"
	"time"

	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// The channel's realistic callbacks, for tests, the demo and simulations
// (package sample describes trades, refunds and deliveries). Like sample,
// this is production code: it never imports testing.

// SampleAccount is the account of the sample bills: the sample callbacks'
// seller_id (PID 2088101117955611) followed by AccountSuffix.
const SampleAccount = "2088101117955611" + AccountSuffix

// SampleBodies are the channel's builders as package sample knows them;
// package allchannels registers them.
func SampleBodies() sample.Bodies {
	return sample.Bodies{
		TradeNo:        func(seq int) string { return fmt.Sprintf("2024060122001439%012d", seq) },
		Payment:        SamplePayment,
		Refund:         SampleRefund,
		StatementLines: SampleStatementLines,
		Statement: func(lines []statements.Line) ([]byte, error) {
			day := statementsample.Day(sample.BaseTime)
			if len(lines) > 0 {
				day = statementsample.Day(lines[0].Time)
			}
			f, err := SampleBill(SampleAccount, day, lines)
			return f.Data, err
		},
	}
}

// SamplePayment is a TRADE_SUCCESS payment notification for t (it carries
// no refund markers).
func SamplePayment(t sample.Trade, d sample.Delivery) []byte {
	return sampleTrade(t, TradeSuccess, d)
}

// SampleFinished is the TRADE_FINISHED notification for t: same amounts as
// the payment, sent when the trade can no longer be refunded.
func SampleFinished(t sample.Trade, d sample.Delivery) []byte {
	return sampleTrade(t, TradeFinished, d)
}

// SampleWaitBuyerPay is a WAIT_BUYER_PAY notification (no money moves).
func SampleWaitBuyerPay(t sample.Trade, d sample.Delivery) []byte {
	t = t.WithDefaults()
	f := sampleBase(t, WaitBuyerPay)
	return sampleEnvelope(t, f, "wait"+t.TradeNo, t.PaidAt.Add(-time.Minute), d)
}

// SampleUnpaidClose is a TRADE_CLOSED notification of an order that was
// never paid (no refund markers; no money moves).
func SampleUnpaidClose(t sample.Trade, d sample.Delivery) []byte {
	t = t.WithDefaults()
	f := sampleBase(t, TradeClosed)
	delete(f, "gmt_payment")
	f["gmt_close"] = sampleTime(t.PaidAt.Add(15 * time.Minute))
	return sampleEnvelope(t, f, "close"+t.TradeNo, t.PaidAt.Add(15*time.Minute), d)
}

// SampleRefund is the notification of refund r of t: TRADE_SUCCESS with
// refund_fee (the cumulative), gmt_refund and out_biz_no for a partial
// refund; TRADE_CLOSED with gmt_close as well once the cumulative reaches the
// total.
func SampleRefund(t sample.Trade, r sample.Refund, d sample.Delivery) []byte {
	t = t.WithDefaults()
	r = r.WithDefaults(t)
	status := TradeSuccess
	if r.Cumulative >= t.Total {
		status = TradeClosed
	}
	f := sampleBase(t, status)
	f["out_biz_no"] = r.No
	f["refund_fee"] = Yuan(r.Cumulative)
	f["gmt_refund"] = r.At.In(sample.Beijing).Format("2006-01-02 15:04:05.000")
	if status == TradeClosed {
		f["gmt_close"] = sampleTime(r.At)
	}
	return sampleEnvelope(t, f, "refund"+t.TradeNo+"/"+r.No, r.At, d)
}

// SampleForm encodes fields as an Alipay form body (sorted, URL-encoded).
func SampleForm(fields map[string]any) string {
	v := url.Values{}
	for k, x := range fields {
		v.Set(k, fmt.Sprint(x))
	}
	return v.Encode()
}

// Yuan formats fen as Alipay writes amounts: "25.80", "0.01", "20.00".
func Yuan(fen int64) string {
	return fmt.Sprintf("%d.%02d", fen/100, fen%100)
}

func sampleTrade(t sample.Trade, status string, d sample.Delivery) []byte {
	t = t.WithDefaults()
	at := t.PaidAt
	if status == TradeFinished {
		at = at.AddDate(0, 3, 0)
	}
	return sampleEnvelope(t, sampleBase(t, status), status+t.TradeNo, at, d)
}

func sampleBase(t sample.Trade, status string) map[string]any {
	return map[string]any{
		"notify_type":      NotifyType,
		"app_id":           "2021000000000000",
		"auth_app_id":      "2021000000000000",
		"charset":          "utf-8",
		"version":          "1.0",
		"sign_type":        "RSA2",
		"sign":             "c2lnbmF0dXJlLXZlcmlmaWVkLXVwc3RyZWFt" + sample.Digits(t.TradeNo, 8),
		"trade_no":         t.TradeNo,
		"out_trade_no":     t.MerchantOrderNo,
		"buyer_id":         "2088102" + sample.Digits(t.MerchantOrderNo, 9),
		"seller_id":        "2088101117955611",
		"trade_status":     status,
		"total_amount":     Yuan(t.Total),
		"receipt_amount":   Yuan(t.Total),
		"buyer_pay_amount": Yuan(t.Total),
		"invoice_amount":   Yuan(t.Total),
		"point_amount":     "0.00",
		"subject":          "门店消费",
		"gmt_create":       sampleTime(t.PaidAt.Add(-10 * time.Second)),
		"gmt_payment":      sampleTime(t.PaidAt),
		"fund_bill_list":   `[{"amount":"` + Yuan(t.Total) + `","fundChannel":"ALIPAYACCOUNT"}]`,
	}
}

func sampleEnvelope(t sample.Trade, f map[string]any, seed string, at time.Time, d sample.Delivery) []byte {
	notify := d.NotifyAt(at)
	f["notify_time"] = sampleTime(notify)
	f["notify_id"] = d.NotifyID
	if d.NotifyID == "" {
		f["notify_id"] = "2024060101222" + sample.Digits(seed, 21)
	}
	if d.Edit != nil {
		d.Edit(f)
	}
	return sample.Envelope(t.TenantID, Code, SampleForm(f), d.ReceivedAtFor(notify))
}

func sampleTime(t time.Time) string { return t.In(sample.Beijing).Format(TimeLayout) }
