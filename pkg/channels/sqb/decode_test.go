package sqb_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// sqbDocPayment is Shouqianba's documented example payment callback
// (docs/channels.md), verbatim.
const sqbDocPayment = `{"terminal_sn":"01939202039923029","sn":"7893259247405832","client_sn":"w145206259311176","client_tsn":"w145206259311176","trade_no":"4003262001201704187463804544","status":"SUCCESS","order_status":"PAID","payway":"3","sub_payway":"1","total_amount":"101","net_amount":"101","subject":"Apple iPhone 6s plus","finish_time":"1492506702864","channel_finish_time":"1492506702000","operator":"test","reflect":"","payment_list":[{"type":"BANKCARD_DEBIT","amount_total":"1"},{"type":"DISCOUNT_CHANNEL_MCH","amount_total":"100"}]}`

// sqbEdit changes fields of a Shouqianba body (nil removes).
func sqbEdit(body string, kv ...any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		panic(err)
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestSQBDocPayment(t *testing.T) {
	ev := mustDecode(t, envelope(channels.SQB, sqbDocPayment)).Event
	require.Equal(t, eventkey.PaymentReceived, ev.Type)
	require.Equal(t, eventkey.Key("SQB:7893259247405832:PAYMENT_RECEIVED"), ev.Key)
	require.Equal(t, "w145206259311176", ev.MerchantOrderNo)
	require.Equal(t, int64(101), ev.OrderTotal)
	require.Equal(t, "PAID", ev.RawStatus)
	require.Equal(t, time.UnixMilli(1492506702864).UTC(), ev.OccurredAt)
	require.True(t, ev.Cumulative())
}

func TestSQBMapping(t *testing.T) {
	partial := sqbEdit(sqbDocPayment, "order_status", "PARTIAL_REFUNDED", "net_amount", "61",
		"client_tsn", "w145206259311176-R1", "refund_request_no", "R1")
	tests := []struct {
		name       string
		body       string
		want       channels.ErrorKind // "" = decodes
		ignored    bool
		refundNo   string
		cumulative int64
	}{
		{"partial refund", partial, "", false, "R1", 40},
		{"full refund", sqbEdit(partial, "order_status", "REFUNDED", "net_amount", "0"), "", false, "R1", 101},
		{"refund number from client_tsn suffix", sqbEdit(partial, "refund_request_no", nil), "", false, "R1", 40},
		{"refund number from cumulative", sqbEdit(partial, "refund_request_no", nil, "client_tsn", "w145206259311176"), "", false, "40", 40},
		{"refund number from cumulative without client_tsn", sqbEdit(partial, "refund_request_no", nil, "client_tsn", nil), "", false, "40", 40},
		{"CANCELED is a full refund numbered CANCEL", sqbEdit(sqbDocPayment, "order_status", "CANCELED", "net_amount", "0"), "", false, "CANCEL", 101},
		{"CREATED ignored", sqbEdit(sqbDocPayment, "order_status", "CREATED"), "", true, "", 0},
		{"PAY_CANCELED ignored", sqbEdit(sqbDocPayment, "order_status", "PAY_CANCELED"), "", true, "", 0},
		{"PAY_ERROR ignored", sqbEdit(sqbDocPayment, "order_status", "PAY_ERROR"), "", true, "", 0},
		{"REFUND_ERROR ignored", sqbEdit(sqbDocPayment, "order_status", "REFUND_ERROR"), "", true, "", 0},
		{"CANCEL_ERROR ignored", sqbEdit(sqbDocPayment, "order_status", "CANCEL_ERROR"), "", true, "", 0},
		{"CANCEL_INPROGRESS ignored", sqbEdit(sqbDocPayment, "order_status", "CANCEL_INPROGRESS"), "", true, "", 0},
		{"failed operation on a paid order ignored", sqbEdit(sqbDocPayment, "status", "FAIL_CANCELED"), "", true, "", 0},
		{"failed refund ignored", sqbEdit(partial, "status", "REFUND_ERROR"), "", true, "", 0},
		{"unknown order_status", sqbEdit(sqbDocPayment, "order_status", "FROZEN"), channels.KindUnsupported, false, "", 0},
		{"no order_status", sqbEdit(sqbDocPayment, "order_status", nil), channels.KindMalformed, false, "", 0},
		{"no status", sqbEdit(sqbDocPayment, "status", nil), channels.KindMalformed, false, "", 0},
		{"numeric amount is not the documented string", sqbEdit(sqbDocPayment, "total_amount", 101), channels.KindMalformed, false, "", 0},
		{"decimal amount", sqbEdit(sqbDocPayment, "total_amount", "1.01"), channels.KindInvalidAmount, false, "", 0},
		{"negative amount", sqbEdit(sqbDocPayment, "total_amount", "-101"), channels.KindInvalidAmount, false, "", 0},
		{"zero amount", sqbEdit(sqbDocPayment, "total_amount", "0"), channels.KindInvalidAmount, false, "", 0},
		{"absurd amount", sqbEdit(sqbDocPayment, "total_amount", "1000000000001"), channels.KindInvalidAmount, false, "", 0},
		{"net above total", sqbEdit(partial, "net_amount", "102"), channels.KindInvalidAmount, false, "", 0},
		{"refund with nothing refunded", sqbEdit(partial, "net_amount", "101"), channels.KindInvalidAmount, false, "", 0},
		{"refund without net_amount", sqbEdit(partial, "net_amount", nil), channels.KindInvalidAmount, false, "", 0},
		{"no sn", sqbEdit(sqbDocPayment, "sn", nil), channels.KindMalformed, false, "", 0},
		{"no client_sn", sqbEdit(sqbDocPayment, "client_sn", nil), channels.KindMalformed, false, "", 0},
		{"time not epoch ms", sqbEdit(sqbDocPayment, "finish_time", "2017-04-18 17:11:42"), channels.KindMalformed, false, "", 0},
		{"time in seconds", sqbEdit(sqbDocPayment, "finish_time", "1492506702"), channels.KindMalformed, false, "", 0},
		{"channel_finish_time fallback", sqbEdit(sqbDocPayment, "finish_time", nil), "", false, "", 0},
		{"no time", sqbEdit(sqbDocPayment, "finish_time", nil, "channel_finish_time", nil), channels.KindMalformed, false, "", 0},
		{"not JSON", "status=SUCCESS", channels.KindMalformed, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := envelope(channels.SQB, tt.body)
			if tt.want != "" {
				mustFail(t, v, tt.want)
				return
			}
			res := mustDecode(t, v)
			require.Equal(t, tt.ignored, res.Ignored, res.IgnoreReason)
			require.Equal(t, tt.refundNo, res.Event.RefundNo)
			require.Equal(t, tt.cumulative, res.Event.CumulativeRefunded)
			if tt.refundNo != "" {
				require.Equal(t, eventkey.Key("SQB:7893259247405832:REFUND_SUCCEEDED:"+tt.refundNo), res.Event.Key)
				require.Equal(t, int64(101), res.Event.OrderTotal)
			}
		})
	}
}

func TestSQBRefundShapesAgree(t *testing.T) {
	trade := channelstest.NewTrade(channels.SQB, 21)
	r := channelstest.Refund{No: "rr-21-1", Cumulative: 700}
	var keys, fps []string
	for _, form := range []channelstest.SQBForm{channelstest.SQBRequestNo, channelstest.SQBClientTSN, channelstest.SQBAPIResponse} {
		ev := mustDecode(t, channelstest.SQBRefund(trade, r, channelstest.Delivery{SQB: form})).Event
		keys = append(keys, string(ev.Key))
		fps = append(fps, ev.Fingerprint)
		require.Equal(t, int64(700), ev.CumulativeRefunded)
		require.Equal(t, "PARTIAL_REFUNDED", ev.RawStatus)
	}
	require.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "refund_request_no, client_tsn suffix and API response name one refund")
	require.Equal(t, []string{fps[0], fps[0], fps[0]}, fps)

	ev := mustDecode(t, channelstest.SQBRefund(trade, r, channelstest.Delivery{SQB: channelstest.SQBNoRefundNo})).Event
	require.Equal(t, "700", ev.RefundNo)

	upper := mustDecode(t, channelstest.SQBRefund(trade, channelstest.Refund{No: "RR-21-1", Cumulative: 700}, channelstest.Delivery{})).Event
	require.NotEqual(t, keys[0], string(upper.Key), "refund numbers are case-sensitive")
}

// TestSQBRefundNumberedCancelIsRefused: a refund whose request number is
// CANCEL (byte for byte; "cancel" is another number) would take the
// cancel's key and net the trade to zero; it is refused as unsupported, so
// it is dead-lettered with its reason rather than settled as a cancel.
func TestSQBRefundNumberedCancelIsRefused(t *testing.T) {
	trade := channelstest.NewTrade(channels.SQB, 23)
	for _, form := range []channelstest.SQBForm{channelstest.SQBRequestNo, channelstest.SQBClientTSN, channelstest.SQBAPIResponse} {
		mustFail(t, channelstest.SQBRefund(trade, channelstest.Refund{No: "CANCEL", Cumulative: 300}, channelstest.Delivery{SQB: form}),
			channels.KindUnsupported)
	}
	ev := mustDecode(t, channelstest.SQBRefund(trade, channelstest.Refund{No: "cancel", Cumulative: 300}, channelstest.Delivery{})).Event
	require.Equal(t, "cancel", ev.RefundNo)
	require.False(t, ev.IsCancel(), "a refund numbered cancel is a refund")
	require.Equal(t, int64(300), ev.CumulativeRefunded)
}

func TestSQBCancelAndStates(t *testing.T) {
	trade := channelstest.NewTrade(channels.SQB, 22)
	res := mustDecode(t, channelstest.SQBCancel(trade, channelstest.Delivery{}))
	require.Equal(t, eventkey.RefundSucceeded, res.Event.Type)
	require.Equal(t, "CANCEL", res.Event.RefundNo)
	require.Equal(t, trade.Total, res.Event.CumulativeRefunded)
	res = mustDecode(t, channelstest.SQBState(trade, "CREATED", "SUCCESS", channelstest.Delivery{}))
	require.True(t, res.Ignored)
	require.Contains(t, res.IgnoreReason, "CREATED")
}

func TestSQBAPIResponseWithTopLevelOrderIsMalformed(t *testing.T) {
	body := `{"sn":"1","order_status":"PAID","biz_response":{"data":{"sn":"2","order_status":"PAID"}}}`
	mustFail(t, envelope(channels.SQB, body), channels.KindMalformed)
}
