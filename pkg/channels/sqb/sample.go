package sqb

import (
	"fmt"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/statements"
)

// The channel's realistic callbacks, for tests, the demo and simulations
// (package sample describes trades, refunds and deliveries). Like sample,
// this is production code: it never imports testing.

// SampleBodies are the channel's builders as package sample knows them;
// package allchannels registers them.
func SampleBodies() sample.Bodies {
	return sample.Bodies{
		TradeNo:        func(seq int) string { return fmt.Sprintf("789325%010d", seq) },
		Payment:        SamplePayment,
		Refund:         SampleRefund,
		StatementLines: func(evs []channels.Event) ([]statements.Line, error) { return SampleStatementLines(evs), nil },
		Statement: func(lines []statements.Line) ([]byte, error) {
			f, err := SampleQueryResponses(lines)
			return f.Data, err
		},
	}
}

// SamplePayment is a PAID/SUCCESS callback for t.
func SamplePayment(t sample.Trade, d sample.Delivery) []byte {
	t = t.WithDefaults()
	o := sampleBase(t, Paid, StatusSuccess, t.Total)
	o["client_tsn"] = t.MerchantOrderNo
	return sampleEnvelope(t, o, t.PaidAt, d)
}

// SampleRefund is the callback of refund r of t: PARTIAL_REFUNDED, or REFUNDED
// once the cumulative reaches the total, with net_amount = total -
// cumulative; d.SQB chooses how the refund number is carried.
func SampleRefund(t sample.Trade, r sample.Refund, d sample.Delivery) []byte {
	t = t.WithDefaults()
	r = r.WithDefaults(t)
	status := PartialRefunded
	if r.Cumulative >= t.Total {
		status = Refunded
	}
	o := sampleBase(t, status, StatusSuccess, t.Total-r.Cumulative)
	o["finish_time"] = millis(r.At)
	o["channel_finish_time"] = millis(r.At.Truncate(time.Second))
	switch d.SQB {
	case sample.SQBRequestNo:
		o["refund_request_no"] = r.No
		o["client_tsn"] = t.MerchantOrderNo + "-" + r.No
	case sample.SQBClientTSN, sample.SQBAPIResponse:
		o["client_tsn"] = t.MerchantOrderNo + "-" + r.No
	case sample.SQBNoRefundNo:
		o["client_tsn"] = t.MerchantOrderNo
	}
	return sampleEnvelope(t, o, r.At, d)
}

// SampleCancel is the CANCELED callback of t, 30 minutes after its payment
// time: decoded as a refund numbered CANCEL, which nets the trade to zero
// whether or not it was paid.
func SampleCancel(t sample.Trade, d sample.Delivery) []byte {
	t = t.WithDefaults()
	at := t.PaidAt.Add(30 * time.Minute)
	o := sampleBase(t, Canceled, StatusSuccess, 0)
	o["finish_time"] = millis(at)
	o["channel_finish_time"] = millis(at.Truncate(time.Second))
	return sampleEnvelope(t, o, at, d)
}

// SampleState is a callback for t with any order_status and status, e.g.
// CREATED, PAY_CANCELED or a FAIL_* status (no money moves).
func SampleState(t sample.Trade, orderStatus, status string, d sample.Delivery) []byte {
	t = t.WithDefaults()
	return sampleEnvelope(t, sampleBase(t, orderStatus, status, t.Total), t.PaidAt, d)
}

func sampleBase(t sample.Trade, orderStatus, status string, net int64) map[string]any {
	return map[string]any{
		"terminal_sn":         "01939202039923029",
		"sn":                  t.TradeNo,
		"client_sn":           t.MerchantOrderNo,
		"client_tsn":          t.MerchantOrderNo,
		"trade_no":            "4003262001" + sample.Digits(t.TradeNo, 18),
		"status":              status,
		"order_status":        orderStatus,
		"payway":              "3",
		"sub_payway":          "1",
		"total_amount":        strconv.FormatInt(t.Total, 10),
		"net_amount":          strconv.FormatInt(net, 10),
		"subject":             "门店消费",
		"finish_time":         millis(t.PaidAt),
		"channel_finish_time": millis(t.PaidAt.Truncate(time.Second)),
		"operator":            "cashier01",
		"reflect":             "",
		"payment_list": []map[string]string{
			{"type": "WALLET_WEIXIN", "amount_total": strconv.FormatInt(t.Total, 10)},
		},
	}
}

func sampleEnvelope(t sample.Trade, o map[string]any, at time.Time, d sample.Delivery) []byte {
	if d.Edit != nil {
		d.Edit(o)
	}
	var body []byte
	if d.SQB == sample.SQBAPIResponse {
		body = sample.MustJSON(map[string]any{
			"result_code": "200",
			"biz_response": map[string]any{
				"result_code": "REFUND_SUCCESS",
				"data":        o,
			},
		})
	} else {
		body = sample.MustJSON(o)
	}
	return sample.Envelope(t.TenantID, Code, string(body), d.ReceivedAtFor(d.NotifyAt(at)))
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
