package sqb

import (
	"time"

	"github.com/paycallback/paycallback/pkg/channels/sample"
)

// Realistic order-query answers for the sample trades, for tests, fake
// channel servers and the demo; like sample.go, production code. The
// order in biz_response.data has the callback's fields (zh-cn/api/
// interface/query.md), for the terminal terminalSN.

// SampleOrderAnswer is the answer to the order query of t, whose order is
// in orderStatus (PAID, CREATED, PAY_CANCELED, PAY_ERROR, …) with its last
// operation's status (SUCCESS for a paid order; the decoder reads a
// non-money state by order_status alone).
func SampleOrderAnswer(t sample.Trade, terminalSN, orderStatus, status string) []byte {
	t = t.WithDefaults()
	o := sampleBase(t, orderStatus, status, t.Total)
	o["terminal_sn"] = terminalSN
	return sampleQueryAnswer(o)
}

// SampleRefundOrderAnswer is the answer to the order query of t after
// refund r, its last operation: PARTIAL_REFUNDED, or REFUNDED once r's
// cumulative reaches the total, net_amount the total less the cumulative,
// the refund numbered by refund_request_no and the client_tsn suffix, as
// the refund's callback (sample.SQBRequestNo) has it.
func SampleRefundOrderAnswer(t sample.Trade, r sample.Refund, terminalSN string) []byte {
	t = t.WithDefaults()
	r = r.WithDefaults(t)
	status := PartialRefunded
	if r.Cumulative >= t.Total {
		status = Refunded
	}
	o := sampleBase(t, status, StatusSuccess, t.Total-r.Cumulative)
	o["terminal_sn"] = terminalSN
	o["finish_time"] = millis(r.At)
	o["channel_finish_time"] = millis(r.At.Truncate(time.Second))
	o["refund_request_no"] = r.No
	o["client_tsn"] = t.MerchantOrderNo + "-" + r.No
	return sampleQueryAnswer(o)
}

// SampleQueryFailure is the answer of a query the business layer fails
// with errorCode (UPAY_ORDER_NOT_EXISTS: the order is unknown).
func SampleQueryFailure(errorCode, message string) []byte {
	return sample.MustJSON(map[string]any{
		"result_code": ResultOK,
		"biz_response": map[string]any{
			"result_code": BizFail, "error_code": errorCode, "error_message": message,
		},
	})
}

// SampleQueryError is the answer of a request refused or failed at the
// communication layer: resultCode 400 (INVALID_PARAMS, INVALID_TERMINAL,
// ILLEGAL_SIGN) or 500 (UNKNOWN_SYSTEM_ERROR).
func SampleQueryError(resultCode, errorCode, message string) []byte {
	return sample.MustJSON(map[string]any{
		"result_code": resultCode, "error_code": errorCode, "error_message": message,
	})
}

func sampleQueryAnswer(order map[string]any) []byte {
	return sample.MustJSON(map[string]any{
		"result_code":  ResultOK,
		"biz_response": map[string]any{"result_code": BizSuccess, "data": order},
	})
}
