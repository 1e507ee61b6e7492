package sqb_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/stretchr/testify/require"
)

// answeredAt is when the test answers came.
var answeredAt = time.Date(2024, 6, 1, 12, 5, 0, 0, time.UTC)

// sampleTerminal is the terminal_sn of the package's sample callbacks.
const sampleTerminal = "01939202039923029"

func response(body []byte) channels.QueryResponse {
	return channels.QueryResponse{StatusCode: http.StatusOK, Body: body, ReceivedAt: answeredAt}
}

// queryAnswerBody wraps an order (a callback body) as the query's SUCCESS
// answer: the answer's data has the callback's fields (docs/queries.md).
func queryAnswerBody(order []byte) []byte {
	return []byte(`{"result_code":"200","biz_response":{"result_code":"SUCCESS","data":` + string(order) + `}}`)
}

// callbackBody is the body of a sample envelope.
func callbackBody(tb testing.TB, envelope []byte) []byte {
	tb.Helper()
	env, err := channels.ParseEnvelope(envelope)
	require.NoError(tb, err)
	return []byte(env.Body)
}

func sampleTarget(tr sample.Trade, kind channels.QueryKind, refundNo string) channels.QueryTarget {
	return channels.QueryTarget{
		TenantID: tr.TenantID, Channel: sqb.Code, Kind: kind, MerchantID: sampleTerminal,
		TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo, RefundNo: refundNo,
	}
}

// mustAnswer decodes an answer, requires success and checks what holds
// for every answer: events only when settled, each complete and valid.
func mustAnswer(tb testing.TB, target channels.QueryTarget, resp channels.QueryResponse) channels.QueryAnswer {
	tb.Helper()
	ans, err := sqb.DecodeQueryAnswer(target, resp)
	require.NoError(tb, err)
	require.NotEmpty(tb, ans.Outcome)
	require.NotEmpty(tb, ans.RawState)
	require.NotEmpty(tb, ans.Detail)
	if ans.Outcome != channels.QuerySettled {
		require.Empty(tb, ans.Events)
	} else {
		require.NotEmpty(tb, ans.Events)
	}
	for _, ev := range ans.Events {
		require.NoError(tb, ev.Validate())
		require.Equal(tb, target.TenantID, ev.TenantID)
		require.Equal(tb, sqb.Code, ev.Channel)
		require.Equal(tb, answeredAt, ev.ReceivedAt)
		require.Equal(tb, channels.Fingerprint(ev), ev.Fingerprint)
	}
	return ans
}

// sameEvent requires that the answer's event is the callback's: same key
// and fingerprint, and the same facts.
func sameEvent(tb testing.TB, callback, answer channels.Event) {
	tb.Helper()
	require.Equal(tb, callback.Key, answer.Key)
	require.Equal(tb, callback.Fingerprint, answer.Fingerprint)
	require.Equal(tb, callback.Type, answer.Type)
	require.Equal(tb, callback.TradeNo, answer.TradeNo)
	require.Equal(tb, callback.MerchantOrderNo, answer.MerchantOrderNo)
	require.Equal(tb, callback.RefundNo, answer.RefundNo)
	require.Equal(tb, callback.OrderTotal, answer.OrderTotal)
	require.Equal(tb, callback.CumulativeRefunded, answer.CumulativeRefunded)
	require.Equal(tb, callback.Currency, answer.Currency)
}

// TestQueryAnswerMatchesCallback is the property the querier rests on: for
// trades built by the sample builders, the answer about a trade proves the
// very events its callbacks give (same key, same fingerprint), so
// whichever comes second is a duplicate.
func TestQueryAnswerMatchesCallback(t *testing.T) {
	forms := []sample.SQBForm{sample.SQBRequestNo, sample.SQBClientTSN, sample.SQBNoRefundNo}
	for seq := 1; seq <= 60; seq++ {
		tr := sample.NewTrade(sqb.Code, seq)
		tr.Total = int64(1 + (seq*7919)%500000)
		form := forms[seq%len(forms)]
		cum := 1 + (int64(seq)*104729)%tr.Total // 1..total: partial and full refunds
		r := sample.Refund{No: fmt.Sprintf("RF%04d", seq), Cumulative: cum}
		d := sample.Delivery{SQB: form}
		t.Run(fmt.Sprintf("seq %d form %d", seq, form), func(t *testing.T) {
			payCB := mustDecode(t, sqb.SamplePayment(tr, d)).Event
			ans := mustAnswer(t, sampleTarget(tr, channels.QueryPayment, ""),
				response(queryAnswerBody(callbackBody(t, sqb.SamplePayment(tr, d)))))
			require.Equal(t, channels.QuerySettled, ans.Outcome)
			require.Len(t, ans.Events, 1)
			sameEvent(t, payCB, ans.Events[0])
			// A PAID answer is the payment callback to the last field.
			want := payCB
			want.ReceivedAt = answeredAt
			require.Equal(t, want, ans.Events[0])
			require.Equal(t, sampleTerminal, ans.MerchantID)

			refundEnv := sqb.SampleRefund(tr, r, d)
			refundCB := mustDecode(t, refundEnv).Event
			refundBody := queryAnswerBody(callbackBody(t, refundEnv))
			ans = mustAnswer(t, sampleTarget(tr, channels.QueryPayment, ""), response(refundBody))
			require.Equal(t, channels.QuerySettled, ans.Outcome)
			sameEvent(t, payCB, ans.Events[0])
			if form == sample.SQBNoRefundNo {
				// The callback numbered the refund by its cumulative
				// amount; the answer cannot tell whether that refund's
				// callback carried a number: the payment only.
				require.Len(t, ans.Events, 1)
				require.Contains(t, ans.Detail, "payment only")
			} else {
				require.Len(t, ans.Events, 2)
				want := refundCB
				want.ReceivedAt = answeredAt
				require.Equal(t, want, ans.Events[1])
			}

			// Asked about the refund itself.
			ans = mustAnswer(t, sampleTarget(tr, channels.QueryRefund, r.No), response(refundBody))
			if form == sample.SQBNoRefundNo {
				require.Equal(t, channels.QueryUncertain, ans.Outcome)
			} else {
				require.Equal(t, channels.QuerySettled, ans.Outcome)
				require.Len(t, ans.Events, 2)
				sameEvent(t, payCB, ans.Events[0])
				sameEvent(t, refundCB, ans.Events[1])
			}

			cancelEnv := sqb.SampleCancel(tr, d)
			cancelCB := mustDecode(t, cancelEnv).Event
			ans = mustAnswer(t, sampleTarget(tr, channels.QueryPayment, ""), response(queryAnswerBody(callbackBody(t, cancelEnv))))
			require.Equal(t, channels.QuerySettled, ans.Outcome)
			require.Len(t, ans.Events, 1)
			require.True(t, ans.Events[0].IsCancel())
			want = cancelCB
			want.ReceivedAt = answeredAt
			require.Equal(t, want, ans.Events[0])
		})
	}
}

func TestQueryAnswerPublished(t *testing.T) {
	ms := func(v int64) time.Time { return time.UnixMilli(v).UTC() }
	published := func(name string) []byte {
		return []byte(readPublished(t, filepath.Join("sqb", name)))
	}
	// constructed: a published answer of another endpoint with its
	// business result_code made the query's SUCCESS, to read its order.
	asQuery := func(name, bizCode string) []byte {
		return []byte(strings.Replace(string(published(name)), `"result_code": "`+bizCode+`"`, `"result_code": "SUCCESS"`, 1))
	}
	tests := []struct {
		name    string
		body    []byte
		target  channels.QueryTarget
		outcome channels.QueryOutcome
		raw     string
		keys    []eventkey.Key
		at      time.Time
		kind    channels.ErrorKind // an error instead of an answer
	}{
		// shouqianba-doc api/core.md 9. 查单成功 (= interface/query.md's example).
		{
			name: "core_query_canceled_response", body: published("core_query_canceled_response.json"),
			target:  paymentTarget("100000330010000000", "7894259244096963", "1234567"),
			outcome: channels.QuerySettled, raw: "CANCELED",
			keys: []eventkey.Key{"SQB:7894259244096963:REFUND_SUCCEEDED:CANCEL"}, at: ms(1449563206776),
		},
		// sqb-payment-skills sqb-query/SKILL.md 响应示例: status "PAID"
		// (= order_status) is accepted; net_amount is not read for PAID.
		{
			name: "skills_query_paid", body: readQueryVector(t, "skills_query_paid.json"),
			target:  paymentTarget(vectorTerminal, "", "20230615143052001"),
			outcome: channels.QuerySettled, raw: "PAID",
			keys: []eventkey.Key{"SQB:7892840250140845:PAYMENT_RECEIVED"}, at: ms(1686816652000),
		},
		// queries-vectors.md A.12: no finish_time nor channel_finish_time:
		// the time the callback's event needs is missing.
		{
			name: "doc_query_paid_compacted", body: readQueryVector(t, "doc_query_paid_compacted.json"),
			target: paymentTarget(vectorTerminal, "7895259867120667", "test"), kind: channels.KindMalformed,
		},
		// Not JSON as published (trailing comma).
		{
			name: "core_pay_success_response", body: published("core_pay_success_response.json"),
			target: paymentTarget("1122234-dewls02s2", "7894259244067349", ""), kind: channels.KindMalformed,
		},
		// Other endpoints' answers are no query answer: uncertain.
		{
			name: "core_refund_success_response", body: published("core_refund_success_response.json"),
			target: paymentTarget("t", "7894259244067218", ""), outcome: channels.QueryUncertain, raw: "REFUND_SUCCESS",
		},
		{
			name: "core_pay_in_progress_response", body: published("core_pay_in_progress_response.json"),
			target: paymentTarget("t", "789200393929142", ""), outcome: channels.QueryUncertain, raw: "PAY_IN_PROGRESS",
		},
		{
			name: "core_pay_fail_response", body: published("core_pay_fail_response.json"),
			target: paymentTarget("t", "7894259244067344", ""), outcome: channels.QueryUncertain, raw: "PAY_FAIL",
		},
		{
			name: "core_cancel_error_response", body: published("core_cancel_error_response.json"),
			target: paymentTarget("t", "7894259244061958", ""), outcome: channels.QueryUncertain, raw: "CANCEL_ERROR",
		},
		// FAIL with an error code that says nothing of the order.
		{
			name: "core_refund_fail_response", body: published("core_refund_fail_response.json"),
			target: paymentTarget("t", "7894259244061958", ""), outcome: channels.QueryUncertain, raw: "UPAY_REFUND_INVALID_ORDER_STATE",
		},
		// constructed: the refund answer's order, REFUNDED without
		// refund_request_no nor client_tsn: the payment only.
		{
			name: "constructed: core_refund_success_response as a query answer", body: asQuery("core_refund_success_response.json", "REFUND_SUCCESS"),
			target:  paymentTarget("t", "7894259244067218", "12345677767776"),
			outcome: channels.QuerySettled, raw: "REFUNDED",
			keys: []eventkey.Key{"SQB:7894259244067218:PAYMENT_RECEIVED"}, at: ms(1449563206776),
		},
		// constructed: the same, asked about a refund: it cannot be told.
		{
			name: "constructed: core_refund_success_response asked about a refund", body: asQuery("core_refund_success_response.json", "REFUND_SUCCESS"),
			target:  channels.QueryTarget{TenantID: 1001, Channel: sqb.Code, Kind: channels.QueryRefund, MerchantID: "t", TradeNo: "7894259244067218", RefundNo: "1"},
			outcome: channels.QueryUncertain, raw: "REFUNDED",
		},
		// constructed: the pay-in-progress answer's order: CREATED.
		{
			name: "constructed: core_pay_in_progress_response as a query answer", body: asQuery("core_pay_in_progress_response.json", "PAY_IN_PROGRESS"),
			target: paymentTarget("t", "789200393929142", ""), outcome: channels.QueryPending, raw: "CREATED",
		},
		// constructed: the failed payment's order: PAY_CANCELED.
		{
			name: "constructed: core_pay_fail_response as a query answer", body: asQuery("core_pay_fail_response.json", "PAY_FAIL"),
			target: paymentTarget("t", "7894259244067344", "12345677767776"), outcome: channels.QueryClosed, raw: "PAY_CANCELED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.kind != "" {
				_, err := sqb.DecodeQueryAnswer(tt.target, response(tt.body))
				require.Error(t, err)
				kind, ok := channels.KindOf(err)
				require.True(t, ok, "untyped error %v", err)
				require.Equal(t, tt.kind, kind, "error: %v", err)
				return
			}
			ans := mustAnswer(t, tt.target, response(tt.body))
			require.Equal(t, tt.outcome, ans.Outcome, ans.Detail)
			require.Equal(t, tt.raw, ans.RawState)
			var keys []eventkey.Key
			for _, ev := range ans.Events {
				keys = append(keys, ev.Key)
				require.Equal(t, tt.at, ev.OccurredAt)
			}
			require.Equal(t, tt.keys, keys)
		})
	}
}

// TestQueryAnswerPublishedPair: the published query answer, decoded as the
// callback decoder reads a forwarded API answer and as a query answer,
// proves one event.
func TestQueryAnswerPublishedPair(t *testing.T) {
	body := readPublished(t, filepath.Join("sqb", "core_query_canceled_response.json"))
	cb := mustDecode(t, envelope(channels.SQB, body)).Event
	ans := mustAnswer(t, paymentTarget("t", "7894259244096963", "1234567"), response([]byte(body)))
	require.Len(t, ans.Events, 1)
	sameEvent(t, cb, ans.Events[0])
	require.Equal(t, cb.OccurredAt, ans.Events[0].OccurredAt)
}

// baseOrder is an answer's order for trade 7892840250140845 / client_sn
// ORD1 of terminal T1, with edit applied (nil deletes a member).
func baseOrder(edit map[string]any) map[string]any {
	o := map[string]any{
		"terminal_sn": "T1", "sn": "7892840250140845", "client_sn": "ORD1", "client_tsn": "ORD1-R2",
		"status": "SUCCESS", "order_status": "PARTIAL_REFUNDED", "total_amount": "1000", "net_amount": "700",
		"finish_time": "1717214405000", "channel_finish_time": "1717214404000",
	}
	for k, v := range edit {
		if v == nil {
			delete(o, k)
		} else {
			o[k] = v
		}
	}
	return o
}

func orderAnswer(tb testing.TB, edit map[string]any) []byte {
	tb.Helper()
	b, err := json.Marshal(baseOrder(edit))
	require.NoError(tb, err)
	return queryAnswerBody(b)
}

func stateTarget(kind channels.QueryKind, refundNo string) channels.QueryTarget {
	return channels.QueryTarget{
		TenantID: 1001, Channel: sqb.Code, Kind: kind, MerchantID: "T1",
		TradeNo: "7892840250140845", MerchantOrderNo: "ORD1", RefundNo: refundNo,
	}
}

// TestQueryAnswerStates: every state of docs/queries.md's table, for a
// payment and a refund target, maps to its documented outcome.
func TestQueryAnswerStates(t *testing.T) {
	pay, refund := channels.QueryPayment, channels.QueryRefund
	raw := func(s string) []byte { return []byte(s) }
	biz := func(code, errCode string) []byte {
		return raw(`{"result_code":"200","biz_response":{"result_code":"` + code + `","error_code":"` + errCode + `","error_message":"x"}}`)
	}
	type payRefund struct{ pay, refund channels.QueryOutcome }
	tests := []struct {
		name   string
		status int
		body   []byte
		want   payRefund
		raw    string
		events []int // number of events: pay, refund
	}{
		{name: "HTTP 500", status: 500, body: raw("<html>"), want: payRefund{channels.QueryRetry, channels.QueryRetry}, raw: "HTTP 500"},
		{name: "HTTP 503", status: 503, body: nil, want: payRefund{channels.QueryRetry, channels.QueryRetry}, raw: "HTTP 503"},
		{name: "HTTP 429", status: 429, body: raw(""), want: payRefund{channels.QueryThrottled, channels.QueryThrottled}, raw: "HTTP 429"},
		{name: "HTTP 404 page", status: 404, body: raw("not found"), want: payRefund{channels.QueryRefused, channels.QueryRefused}, raw: "HTTP 404"},
		{name: "400 ILLEGAL_SIGN", body: raw(`{"result_code":"400","error_code":"ILLEGAL_SIGN","error_message":"签名错误"}`), want: payRefund{channels.QueryRefused, channels.QueryRefused}, raw: "ILLEGAL_SIGN"},
		{name: "400 INVALID_TERMINAL on HTTP 400", status: 400, body: raw(`{"result_code":"400","error_code":"INVALID_TERMINAL"}`), want: payRefund{channels.QueryRefused, channels.QueryRefused}, raw: "INVALID_TERMINAL"},
		{name: "400 INVALID_PARAMS", body: raw(`{"result_code":"400","error_code":"INVALID_PARAMS"}`), want: payRefund{channels.QueryRefused, channels.QueryRefused}, raw: "INVALID_PARAMS"},
		{name: "500 UNKNOWN_SYSTEM_ERROR", body: raw(`{"result_code":"500","error_code":"UNKNOWN_SYSTEM_ERROR"}`), want: payRefund{channels.QueryRetry, channels.QueryRetry}, raw: "UNKNOWN_SYSTEM_ERROR"},
		{name: "unknown result_code", body: raw(`{"result_code":"302"}`), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "302"},
		{name: "UPAY_ORDER_NOT_EXISTS", body: biz("FAIL", "UPAY_ORDER_NOT_EXISTS"), want: payRefund{channels.QueryNotFound, channels.QueryNotFound}, raw: "UPAY_ORDER_NOT_EXISTS"},
		{name: "UPAY_TERMINAL_NOT_EXISTS", body: biz("FAIL", "UPAY_TERMINAL_NOT_EXISTS"), want: payRefund{channels.QueryRefused, channels.QueryRefused}, raw: "UPAY_TERMINAL_NOT_EXISTS"},
		{name: "UPAY_TERMINAL_STATUS_ABNORMAL", body: biz("FAIL", "UPAY_TERMINAL_STATUS_ABNORMAL"), want: payRefund{channels.QueryRefused, channels.QueryRefused}, raw: "UPAY_TERMINAL_STATUS_ABNORMAL"},
		{name: "FAIL other", body: biz("FAIL", "TRADE_NOT_EXIST"), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "TRADE_NOT_EXIST"},
		{name: "FAIL without code", body: biz("FAIL", ""), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "FAIL"},
		{name: "biz ERROR", body: biz("ERROR", ""), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "ERROR"},
		{name: "PAID", body: orderAnswer(t, map[string]any{"order_status": "PAID", "net_amount": "1000", "client_tsn": "ORD1"}), want: payRefund{channels.QuerySettled, channels.QueryNotFound}, raw: "PAID", events: []int{1, 0}},
		{name: "PAID, refunded_amount 0", body: orderAnswer(t, map[string]any{"order_status": "PAID", "refunded_amount": "0"}), want: payRefund{channels.QuerySettled, channels.QueryNotFound}, raw: "PAID", events: []int{1, 0}},
		{name: "PAID, refunded_amount 5", body: orderAnswer(t, map[string]any{"order_status": "PAID", "refunded_amount": "5"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "PAID"},
		{name: "PAID, status PAID", body: orderAnswer(t, map[string]any{"order_status": "PAID", "status": "PAID"}), want: payRefund{channels.QuerySettled, channels.QueryNotFound}, raw: "PAID", events: []int{1, 0}},
		{name: "PAID, last operation failed", body: orderAnswer(t, map[string]any{"order_status": "PAID", "status": "FAIL_CANCELED"}), want: payRefund{channels.QueryUncertain, channels.QueryClosed}, raw: "PAID"},
		{name: "PAID, another refund failed", body: orderAnswer(t, map[string]any{"order_status": "PAID", "status": "FAIL_CANCELED", "client_tsn": "ORD1-R1"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "PAID"},
		{name: "PAID, last operation FAIL_IO_1", body: orderAnswer(t, map[string]any{"order_status": "PAID", "status": "FAIL_IO_1"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "PAID"},
		{name: "PARTIAL_REFUNDED", body: orderAnswer(t, nil), want: payRefund{channels.QuerySettled, channels.QuerySettled}, raw: "PARTIAL_REFUNDED", events: []int{2, 2}},
		{name: "PARTIAL_REFUNDED, refund_request_no", body: orderAnswer(t, map[string]any{"client_tsn": nil, "refund_request_no": "R2"}), want: payRefund{channels.QuerySettled, channels.QuerySettled}, raw: "PARTIAL_REFUNDED", events: []int{2, 2}},
		{name: "PARTIAL_REFUNDED, refunded_amount agrees", body: orderAnswer(t, map[string]any{"refunded_amount": "300"}), want: payRefund{channels.QuerySettled, channels.QuerySettled}, raw: "PARTIAL_REFUNDED", events: []int{2, 2}},
		{name: "PARTIAL_REFUNDED, refunded_amount disagrees", body: orderAnswer(t, map[string]any{"refunded_amount": "200"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "PARTIAL_REFUNDED"},
		{name: "PARTIAL_REFUNDED, status PARTIAL_REFUNDED", body: orderAnswer(t, map[string]any{"status": "PARTIAL_REFUNDED"}), want: payRefund{channels.QuerySettled, channels.QuerySettled}, raw: "PARTIAL_REFUNDED", events: []int{2, 2}},
		{name: "PARTIAL_REFUNDED, status PAID", body: orderAnswer(t, map[string]any{"status": "PAID"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "PARTIAL_REFUNDED"},
		{name: "PARTIAL_REFUNDED, another refund last", body: orderAnswer(t, map[string]any{"client_tsn": "ORD1-R3"}), want: payRefund{channels.QuerySettled, channels.QueryUncertain}, raw: "PARTIAL_REFUNDED", events: []int{2, 0}},
		{name: "PARTIAL_REFUNDED, no refund number", body: orderAnswer(t, map[string]any{"client_tsn": "ORD1"}), want: payRefund{channels.QuerySettled, channels.QueryUncertain}, raw: "PARTIAL_REFUNDED", events: []int{1, 0}},
		{name: "PARTIAL_REFUNDED, refund numbered CANCEL", body: orderAnswer(t, map[string]any{"client_tsn": "ORD1-CANCEL"}), want: payRefund{channels.QuerySettled, channels.QueryUncertain}, raw: "PARTIAL_REFUNDED", events: []int{1, 0}},
		{name: "REFUNDED", body: orderAnswer(t, map[string]any{"order_status": "REFUNDED", "net_amount": "0"}), want: payRefund{channels.QuerySettled, channels.QuerySettled}, raw: "REFUNDED", events: []int{2, 2}},
		{name: "REFUNDED, refunded_amount disagrees", body: orderAnswer(t, map[string]any{"order_status": "REFUNDED", "net_amount": "0", "refunded_amount": "999"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "REFUNDED"},
		{name: "CANCELED", body: orderAnswer(t, map[string]any{"order_status": "CANCELED", "net_amount": "0", "client_tsn": "ORD1"}), want: payRefund{channels.QuerySettled, channels.QueryUncertain}, raw: "CANCELED", events: []int{1, 0}},
		{name: "CANCELED, refunded_amount not compared", body: orderAnswer(t, map[string]any{"order_status": "CANCELED", "net_amount": "0", "refunded_amount": "0"}), want: payRefund{channels.QuerySettled, channels.QueryUncertain}, raw: "CANCELED", events: []int{1, 0}},
		{name: "CREATED", body: orderAnswer(t, map[string]any{"order_status": "CREATED", "status": "IN_PROG", "finish_time": nil, "channel_finish_time": nil}), want: payRefund{channels.QueryPending, channels.QueryUncertain}, raw: "CREATED"},
		{name: "PAY_CANCELED", body: orderAnswer(t, map[string]any{"order_status": "PAY_CANCELED", "status": "FAIL_CANCELED"}), want: payRefund{channels.QueryClosed, channels.QueryUncertain}, raw: "PAY_CANCELED"},
		{name: "PAY_ERROR", body: orderAnswer(t, map[string]any{"order_status": "PAY_ERROR"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "PAY_ERROR"},
		{name: "REFUND_ERROR", body: orderAnswer(t, map[string]any{"order_status": "REFUND_ERROR"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "REFUND_ERROR"},
		{name: "CANCEL_ERROR", body: orderAnswer(t, map[string]any{"order_status": "CANCEL_ERROR"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "CANCEL_ERROR"},
		{name: "CANCEL_INPROGRESS", body: orderAnswer(t, map[string]any{"order_status": "CANCEL_INPROGRESS"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "CANCEL_INPROGRESS"},
		{name: "unknown order_status", body: orderAnswer(t, map[string]any{"order_status": "PAID_LATER"}), want: payRefund{channels.QueryUncertain, channels.QueryUncertain}, raw: "PAID_LATER"},
		{name: "no terminal_sn named", body: orderAnswer(t, map[string]any{"terminal_sn": nil}), want: payRefund{channels.QuerySettled, channels.QuerySettled}, raw: "PARTIAL_REFUNDED", events: []int{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, kind := range []channels.QueryKind{pay, refund} {
				want := tt.want.pay
				if kind == refund {
					want = tt.want.refund
				}
				resp := response(tt.body)
				if tt.status != 0 {
					resp.StatusCode = tt.status
				}
				ans := mustAnswer(t, stateTarget(kind, "R2"), resp)
				require.Equal(t, want, ans.Outcome, "%s: %s", kind, ans.Detail)
				require.Equal(t, tt.raw, ans.RawState)
				n := 0
				if tt.events != nil {
					n = tt.events[i]
				}
				require.Len(t, ans.Events, n, "%s: %s", kind, ans.Detail)
			}
		})
	}
}

// TestQueryAnswerRefundEvents pins what a refunded order proves.
func TestQueryAnswerRefundEvents(t *testing.T) {
	ans := mustAnswer(t, stateTarget(channels.QueryRefund, "R2"), response(orderAnswer(t, nil)))
	require.Len(t, ans.Events, 2)
	pay, refund := ans.Events[0], ans.Events[1]
	require.Equal(t, eventkey.Key("SQB:7892840250140845:PAYMENT_RECEIVED"), pay.Key)
	require.Equal(t, int64(1000), pay.OrderTotal)
	require.Zero(t, pay.CumulativeRefunded)
	require.Empty(t, pay.RefundNo)
	require.Equal(t, eventkey.Key("SQB:7892840250140845:REFUND_SUCCEEDED:R2"), refund.Key)
	require.Equal(t, int64(300), refund.CumulativeRefunded)
	require.Equal(t, "R2", refund.RefundNo)
	require.Equal(t, "ORD1", refund.MerchantOrderNo)
	require.Equal(t, time.UnixMilli(1717214405000).UTC(), refund.OccurredAt)
	require.Equal(t, "T1", ans.MerchantID)
}

func TestQueryAnswerOtherOrder(t *testing.T) {
	tests := []struct {
		name   string
		edit   map[string]any
		target channels.QueryTarget
	}{
		{"another terminal", map[string]any{"terminal_sn": "T2"}, stateTarget(channels.QueryPayment, "")},
		{"another sn", map[string]any{"sn": "7892840250140846"}, stateTarget(channels.QueryPayment, "")},
		{"another client_sn", map[string]any{"client_sn": "ORD2", "client_tsn": "ORD2-R2"}, stateTarget(channels.QueryPayment, "")},
		{"another client_sn, asked by client_sn", map[string]any{"client_sn": "ORD2"}, channels.QueryTarget{
			TenantID: 1001, Channel: sqb.Code, Kind: channels.QueryPayment, MerchantID: "T1", MerchantOrderNo: "ORD1",
		}},
		{"another sn, CREATED", map[string]any{"sn": "7892840250140846", "order_status": "CREATED"}, stateTarget(channels.QueryPayment, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sqb.DecodeQueryAnswer(tt.target, response(orderAnswer(t, tt.edit)))
			require.ErrorIs(t, err, sqb.ErrOtherOrder)
			kind, ok := channels.KindOf(err)
			require.True(t, ok)
			require.Equal(t, channels.KindMalformed, kind)
		})
	}
	target := stateTarget(channels.QueryPayment, "")
	target.Channel = channels.Alipay
	_, err := sqb.DecodeQueryAnswer(target, response(orderAnswer(t, nil)))
	require.ErrorIs(t, err, sqb.ErrBadQueryTarget)
}

// TestQueryAnswerMalformed: an answer that cannot be read one way only is
// an error, never a guess.
func TestQueryAnswerMalformed(t *testing.T) {
	raw := func(s string) []byte { return []byte(s) }
	data := func(s string) []byte { return queryAnswerBody([]byte(s)) }
	tests := []struct {
		name string
		body []byte
		kind channels.ErrorKind
	}{
		{"empty", raw(""), channels.KindMalformed},
		{"not JSON", raw("<xml/>"), channels.KindMalformed},
		{"truncated", orderAnswer(t, nil)[:40], channels.KindMalformed},
		{"trailing data", append(orderAnswer(t, nil), '{', '}'), channels.KindMalformed},
		{"array", raw(`[]`), channels.KindMalformed},
		{"repeated result_code", raw(`{"result_code":"500","result_code":"200","biz_response":{"result_code":"FAIL","error_code":"UPAY_ORDER_NOT_EXISTS"}}`), channels.KindMalformed},
		{"repeated biz result_code", raw(`{"result_code":"200","biz_response":{"result_code":"FAIL","result_code":"SUCCESS","data":{}}}`), channels.KindMalformed},
		{"repeated order_status", data(`{"sn":"7892840250140845","client_sn":"ORD1","order_status":"CREATED","order_status":"PAID","status":"SUCCESS","total_amount":"1000","finish_time":"1717214405000"}`), channels.KindMalformed},
		{"members differing in case", data(`{"sn":"7892840250140845","client_sn":"ORD1","order_status":"PAID","Order_Status":"CREATED","status":"SUCCESS","total_amount":"1000","finish_time":"1717214405000"}`), channels.KindMalformed},
		{"repeated data", raw(`{"result_code":"200","biz_response":{"result_code":"SUCCESS","data":{"sn":"1"},"data":{"sn":"2"}}}`), channels.KindMalformed},
		{"result_code a number", raw(`{"result_code":200}`), channels.KindMalformed},
		{"total_amount a number", orderAnswer(t, map[string]any{"total_amount": 1000}), channels.KindMalformed},
		{"sn a number", orderAnswer(t, map[string]any{"sn": 7892840250140845}), channels.KindMalformed},
		{"data a string", raw(`{"result_code":"200","biz_response":{"result_code":"SUCCESS","data":"PAID"}}`), channels.KindMalformed},
		{"biz_response a list", raw(`{"result_code":"200","biz_response":[]}`), channels.KindMalformed},
		{"no result_code", raw(`{"biz_response":{"result_code":"FAIL","error_code":"UPAY_ORDER_NOT_EXISTS"}}`), channels.KindMalformed},
		{"no biz_response", raw(`{"result_code":"200"}`), channels.KindMalformed},
		{"no biz result_code", raw(`{"result_code":"200","biz_response":{"error_code":"UPAY_ORDER_NOT_EXISTS"}}`), channels.KindMalformed},
		{"no data", raw(`{"result_code":"200","biz_response":{"result_code":"SUCCESS"}}`), channels.KindMalformed},
		{"null data", raw(`{"result_code":"200","biz_response":{"result_code":"SUCCESS","data":null}}`), channels.KindMalformed},
		{"no sn", orderAnswer(t, map[string]any{"sn": nil}), channels.KindMalformed},
		{"no order_status", orderAnswer(t, map[string]any{"order_status": nil}), channels.KindMalformed},
		{"no status", orderAnswer(t, map[string]any{"status": nil}), channels.KindMalformed},
		{"no client_sn", orderAnswer(t, map[string]any{"client_sn": nil}), channels.KindMalformed},
		{"no total_amount", orderAnswer(t, map[string]any{"total_amount": nil}), channels.KindInvalidAmount},
		{"no net_amount", orderAnswer(t, map[string]any{"net_amount": nil}), channels.KindInvalidAmount},
		{"no time", orderAnswer(t, map[string]any{"finish_time": nil, "channel_finish_time": nil}), channels.KindMalformed},
		{"time in seconds", orderAnswer(t, map[string]any{"finish_time": "1717214405"}), channels.KindMalformed},
		{"negative amount", orderAnswer(t, map[string]any{"total_amount": "-1000"}), channels.KindInvalidAmount},
		{"decimal amount", orderAnswer(t, map[string]any{"total_amount": "10.00"}), channels.KindInvalidAmount},
		{"exponent amount", orderAnswer(t, map[string]any{"total_amount": "1e3"}), channels.KindInvalidAmount},
		{"absurd amount", orderAnswer(t, map[string]any{"total_amount": "99999999999999999"}), channels.KindInvalidAmount},
		{"zero total", orderAnswer(t, map[string]any{"order_status": "PAID", "total_amount": "0"}), channels.KindInvalidAmount},
		{"net above total", orderAnswer(t, map[string]any{"net_amount": "1001"}), channels.KindInvalidAmount},
		{"nothing refunded", orderAnswer(t, map[string]any{"net_amount": "1000"}), channels.KindInvalidAmount},
		{"refunded_amount not an amount", orderAnswer(t, map[string]any{"refunded_amount": "3.00"}), channels.KindInvalidAmount},
		{"refunded_amount a number", orderAnswer(t, map[string]any{"refunded_amount": 300}), channels.KindMalformed},
	}
	for _, status := range []int{0, 101, 199, 302, 304} {
		resp := response(orderAnswer(t, nil))
		resp.StatusCode = status
		_, err := sqb.DecodeQueryAnswer(stateTarget(channels.QueryPayment, ""), resp)
		require.Error(t, err, "HTTP %d", status)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ans, err := sqb.DecodeQueryAnswer(stateTarget(channels.QueryPayment, ""), response(tt.body))
			require.Error(t, err, "answer %+v", ans)
			require.Equal(t, channels.QueryAnswer{}, ans)
			kind, ok := channels.KindOf(err)
			require.True(t, ok, "untyped error %v", err)
			require.Equal(t, tt.kind, kind, "error: %v", err)
		})
	}
}
