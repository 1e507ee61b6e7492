package alipay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/stretchr/testify/require"
)

// Answer verification and decoding. Published answers:
// testdata/query/SOURCES.

var answerAt = time.Date(2024, 6, 1, 12, 5, 0, 0, time.UTC)

// alipayKey is the test stand-in for Alipay's key pair: answers are
// signed with its private half and verified with its public half.
func alipayKey() alipay.PublicKey {
	k := testKeys()[1]
	return alipay.PublicKey{AppID: "2021000000000000", Key: &k.PublicKey}
}

func requireKind(tb testing.TB, err error, want channels.ErrorKind) {
	tb.Helper()
	require.Error(tb, err)
	kind, ok := channels.KindOf(err)
	require.True(tb, ok, "untyped error %v", err)
	require.Equal(tb, want, kind, "error: %v", err)
}

// a5Answer is the A.5 answer: the published signed text inside an
// alipay.trade.query answer with the published sign (the text is the
// member's value; the wrapping is the answer's documented shape).
func a5Answer(tb testing.TB, layout string) []byte {
	tb.Helper()
	return []byte(fmt.Sprintf(layout, a5Field(tb, "signData"), a5Field(tb, "sign")))
}

func a5Key(tb testing.TB) alipay.PublicKey {
	tb.Helper()
	k, err := alipay.ParsePublicKey(pemArmour(a5Field(tb, "alipayPublicKey")))
	require.NoError(tb, err)
	return alipay.PublicKey{AppID: "gopay", Key: k}
}

func TestPublishedAnswerSignatures(t *testing.T) {
	a7, err := alipay.ParsePublicKey(alipay.ReadQueryTestdata(t, "a7_alipay_public_key.pem"))
	require.NoError(t, err)
	a7Key := alipay.PublicKey{AppID: "nodejs-sdk", Key: a7}
	a7Body := alipay.ReadQueryTestdata(t, "a7_file_upload_response.json")
	a5Body := a5Answer(t, `{"alipay_trade_query_response":%s,"sign":"%s"}`)

	// The published answers verify: A.7 as received, A.5 in either member
	// order and with whitespace between members (only the member's text
	// is signed).
	require.NoError(t, alipay.VerifyResponse("alipay.open.file.upload", a7Body, a7Key))
	require.NoError(t, alipay.VerifyAnswer(channels.QueryPayment, a5Body, a5Key(t)))
	require.NoError(t, alipay.VerifyAnswer(channels.QueryPayment,
		a5Answer(t, "{ \"sign\" : \"%[2]s\",\n \"alipay_trade_query_response\" :\t%[1]s }"), a5Key(t)))

	// One changed byte anywhere in the signed member or the sign, another
	// key, another method, no sign: unauthenticated.
	for i := strings.Index(string(a7Body), "{\"code"); i < strings.Index(string(a7Body), `,"sign"`); i++ {
		b := []byte(string(a7Body))
		b[i] ^= 0x01
		requireKind(t, alipay.VerifyResponse("alipay.open.file.upload", b, a7Key), channels.KindUnauthenticated)
	}
	sigAt := strings.Index(string(a5Body), `"sign":"`) + len(`"sign":"`)
	b := []byte(string(a5Body))
	b[sigAt+10] = 'A' + (b[sigAt+10]-'A'+1)%26
	requireKind(t, alipay.VerifyAnswer(channels.QueryPayment, b, a5Key(t)), channels.KindUnauthenticated)
	requireKind(t, alipay.VerifyResponse("alipay.open.file.upload", a7Body, a5Key(t)), channels.KindUnauthenticated)
	requireKind(t, alipay.VerifyAnswer(channels.QueryPayment, a5Body, a7Key), channels.KindUnauthenticated)
	requireKind(t, alipay.VerifyAnswer(channels.QueryRefund, a5Body, a5Key(t)), channels.KindUnauthenticated)
	requireKind(t, alipay.VerifyAnswer(channels.QueryPayment,
		[]byte(`{"alipay_trade_query_response":`+a5Field(t, "signData")+`}`), a5Key(t)), channels.KindUnauthenticated)
	requireKind(t, alipay.VerifyAnswer(channels.QueryPayment, a5Body, alipay.PublicKey{AppID: "none"}), channels.KindUnauthenticated)

	// The real A.5 answer says code 10000 without a trade_status (its
	// fields are those of a payment's answer): nothing is concluded.
	tg := paymentTarget()
	tg.MerchantOrderNo = "GZ201901301040361012"
	ans, err := alipay.ReadAnswer(tg, channels.QueryResponse{StatusCode: 200, Body: a5Body, ReceivedAt: answerAt}, a5Key(t))
	require.NoError(t, err)
	require.Equal(t, channels.QueryUncertain, ans.Outcome)
	require.Empty(t, ans.Events)
}

func TestVerifyAnswerRefusesMalformed(t *testing.T) {
	signed := func(member, value string) []byte {
		b, err := alipay.SampleAnswer(alipay.MethodTradeQuery, []byte(value), testKeys()[1])
		require.NoError(t, err)
		return []byte(strings.Replace(string(b), "alipay_trade_query_response", member, 1))
	}
	ok := signed("alipay_trade_query_response", `{"code":"40004","sub_code":"ACQ.TRADE_NOT_EXIST"}`)
	require.NoError(t, alipay.VerifyAnswer(channels.QueryPayment, ok, alipayKey()))
	require.NoError(t, alipay.VerifyAnswer(channels.QueryPayment,
		signed("error_response", `{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature"}`), alipayKey()))
	for name, body := range map[string]string{
		"bad JSON":            `{"alipay_trade_query_response":{"code":"10000"},"sign":"x"`,
		"two signs":           strings.Replace(string(ok), `,"sign":`, `,"sign":"AAAA","sign":`, 1),
		"two responses":       strings.Replace(string(ok), `,"sign":`, `,"alipay_trade_query_response":{"code":"10000"},"sign":`, 1),
		"response and error":  strings.Replace(string(ok), `,"sign":`, `,"error_response":{"code":"20000"},"sign":`, 1),
		"no response":         `{"sign":"AAAA"}`,
		"response not object": `{"alipay_trade_query_response":"{}","sign":"AAAA"}`,
		"sign not string":     `{"alipay_trade_query_response":{},"sign":1}`,
		"sign not base64":     `{"alipay_trade_query_response":{},"sign":"***"}`,
		"array":               `[]`,
	} {
		t.Run(name, func(t *testing.T) {
			requireKind(t, alipay.VerifyAnswer(channels.QueryPayment, []byte(body), alipayKey()), channels.KindUnauthenticated)
		})
	}
}

// decodeAnswerJSON wraps a response object as a signed answer to the target's
// method and decodes it.
func decodeAnswerJSON(tb testing.TB, target channels.QueryTarget, response string) (channels.QueryAnswer, error) {
	tb.Helper()
	method := alipay.MethodTradeQuery
	if target.Kind == channels.QueryRefund {
		method = alipay.MethodRefundQuery
	}
	body, err := alipay.SampleAnswer(method, []byte(response), testKeys()[1])
	require.NoError(tb, err)
	return alipay.ReadAnswer(target, channels.QueryResponse{StatusCode: 200, Body: body, ReceivedAt: answerAt}, alipayKey())
}

func refundTarget() channels.QueryTarget {
	tg := paymentTarget()
	tg.Kind, tg.TradeNo, tg.RefundNo = channels.QueryRefund, "2024060122001439000000000001", "RF1"
	return tg
}

// TestAnswerStates: every row of docs/queries.md's Alipay table.
func TestAnswerStates(t *testing.T) {
	const ids = `"out_trade_no":"POS20240601000001","trade_no":"2024060122001439000000000001"`
	const paid = `,"total_amount":"25.80","send_pay_date":"2024-06-01 20:00:05"`
	const refund = `,"out_request_no":"RF1","total_amount":"25.80","gmt_refund_pay":"2024-06-01 21:00:05"`
	for _, tc := range []struct {
		name     string
		refund   bool
		response string
		want     channels.QueryOutcome
		raw      string
		events   int
	}{
		{"TRADE_SUCCESS", false, `{"code":"10000","msg":"Success",` + ids + paid + `,"trade_status":"TRADE_SUCCESS"}`, channels.QuerySettled, "TRADE_SUCCESS", 1},
		{"TRADE_FINISHED", false, `{"code":"10000","msg":"Success",` + ids + paid + `,"trade_status":"TRADE_FINISHED"}`, channels.QuerySettled, "TRADE_FINISHED", 1},
		{"WAIT_BUYER_PAY", false, `{"code":"10000",` + ids + `,"total_amount":"25.80","trade_status":"WAIT_BUYER_PAY"}`, channels.QueryPending, "WAIT_BUYER_PAY", 0},
		{"TRADE_CLOSED", false, `{"code":"10000",` + ids + `,"total_amount":"25.80","trade_status":"TRADE_CLOSED"}`, channels.QueryUncertain, "TRADE_CLOSED", 0},
		{"TRADE_CLOSED paid", false, `{"code":"10000",` + ids + paid + `,"trade_status":"TRADE_CLOSED"}`, channels.QueryUncertain, "TRADE_CLOSED", 0},
		{"no trade_status", false, `{"code":"10000",` + ids + `}`, channels.QueryUncertain, "", 0},
		{"unknown trade_status", false, `{"code":"10000",` + ids + `,"trade_status":"TRADE_PENDING"}`, channels.QueryUncertain, "TRADE_PENDING", 0},
		{"ACQ.TRADE_NOT_EXIST", false, `{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在","out_trade_no":"POS20240601000001"}`, channels.QueryNotFound, "ACQ.TRADE_NOT_EXIST", 0},
		{"refund ACQ.TRADE_NOT_EXIST", true, `{"code":"40004","sub_code":"ACQ.TRADE_NOT_EXIST"}`, channels.QueryNotFound, "ACQ.TRADE_NOT_EXIST", 0},
		{"20000", false, `{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, channels.QueryRetry, "isp.unknow-error", 0},
		{"ACQ.SYSTEM_ERROR", false, `{"code":"40004","sub_code":"ACQ.SYSTEM_ERROR"}`, channels.QueryRetry, "ACQ.SYSTEM_ERROR", 0},
		{"40005", false, `{"code":"40005","msg":"Call Limited","sub_code":"isv.app-call-limited"}`, channels.QueryThrottled, "isv.app-call-limited", 0},
		{"20001", false, `{"code":"20001","msg":"Insufficient Token Permissions","sub_code":"aop.invalid-auth-token"}`, channels.QueryRefused, "aop.invalid-auth-token", 0},
		{"40001", false, `{"code":"40001","msg":"Missing Required Arguments","sub_code":"isv.missing-method"}`, channels.QueryRefused, "isv.missing-method", 0},
		{"40002", false, `{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature"}`, channels.QueryRefused, "isv.invalid-signature", 0},
		{"40006", false, `{"code":"40006","msg":"Insufficient Permissions","sub_code":"isv.insufficient-isv-permissions"}`, channels.QueryRefused, "isv.insufficient-isv-permissions", 0},
		{"ACQ.INVALID_PARAMETER", false, `{"code":"40004","sub_code":"ACQ.INVALID_PARAMETER"}`, channels.QueryRefused, "ACQ.INVALID_PARAMETER", 0},
		{"unknown 40004", false, `{"code":"40004","sub_code":"ACQ.SOMETHING_NEW"}`, channels.QueryUncertain, "ACQ.SOMETHING_NEW", 0},
		{"unknown code", false, `{"code":"50000"}`, channels.QueryUncertain, "50000", 0},
		{"REFUND_SUCCESS full", true, `{"code":"10000",` + ids + refund + `,"refund_amount":"25.80","refund_status":"REFUND_SUCCESS"}`, channels.QuerySettled, "REFUND_SUCCESS", 1},
		{"REFUND_SUCCESS partial", true, `{"code":"10000",` + ids + refund + `,"refund_amount":"5.80","refund_status":"REFUND_SUCCESS"}`, channels.QuerySettled, "REFUND_SUCCESS", 0},
		{"no refund data", true, `{"code":"10000","msg":"Success"}`, channels.QueryNotFound, "NO_REFUND_DATA", 0},
		{"no refund data, trade named", true, `{"code":"10000",` + ids + `,"out_request_no":"RF1"}`, channels.QueryNotFound, "NO_REFUND_DATA", 0},
		{"refund data without status", true, `{"code":"10000",` + ids + refund + `,"refund_amount":"5.80"}`, channels.QueryUncertain, "NO_REFUND_STATUS", 0},
		{"unknown refund_status", true, `{"code":"10000",` + ids + refund + `,"refund_amount":"5.80","refund_status":"REFUND_PROCESSING"}`, channels.QueryUncertain, "REFUND_PROCESSING", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := paymentTarget()
			if tc.refund {
				tg = refundTarget()
			}
			ans, err := decodeAnswerJSON(t, tg, tc.response)
			require.NoError(t, err)
			require.Equal(t, tc.want, ans.Outcome)
			require.Equal(t, tc.raw, ans.RawState)
			require.Len(t, ans.Events, tc.events)
			require.NotEmpty(t, ans.Detail)
			require.Empty(t, ans.MerchantID)
			for _, ev := range ans.Events {
				require.NoError(t, ev.Validate())
				require.Equal(t, answerAt, ev.ReceivedAt)
				require.Equal(t, int64(1001), ev.TenantID)
			}
		})
	}
}

func TestAnswerHTTPStatus(t *testing.T) {
	for status, want := range map[int]channels.QueryOutcome{
		429: channels.QueryThrottled, 500: channels.QueryRetry, 503: channels.QueryRetry, 404: channels.QueryUncertain,
	} {
		ans, err := alipay.DecodeAnswer(paymentTarget(), channels.QueryResponse{StatusCode: status, Body: []byte("<html>")})
		require.NoError(t, err)
		require.Equal(t, want, ans.Outcome, "HTTP %d", status)
		ans, err = alipay.ReadAnswer(paymentTarget(), channels.QueryResponse{StatusCode: status, Body: []byte("<html>")}, alipayKey())
		require.NoError(t, err, "an unsigned error page is no answer, not a forgery")
		require.Equal(t, want, ans.Outcome, "HTTP %d", status)
		require.Empty(t, ans.Events)
	}
}

// TestAnswerRefused: malformed answers, answers about another order or
// refund, and settled answers with missing or absurd fields are errors,
// never guesses.
func TestAnswerRefused(t *testing.T) {
	const ok = `{"code":"10000","out_trade_no":"POS20240601000001","trade_no":"2024060122001439000000000001","total_amount":"25.80","send_pay_date":"2024-06-01 20:00:05","trade_status":"TRADE_SUCCESS"}`
	_, err := decodeAnswerJSON(t, paymentTarget(), ok)
	require.NoError(t, err)
	edit := func(from, to string) string {
		require.Contains(t, ok, from)
		return strings.Replace(ok, from, to, 1)
	}
	drop := func(member string) string {
		i := strings.Index(ok, `"`+member+`"`)
		j := strings.Index(ok[i:], `",`)
		if j < 0 {
			j = strings.Index(ok[i:], `"}`)
			return ok[:i-1] + ok[i+j+1:]
		}
		return ok[:i] + ok[i+j+2:]
	}
	for _, tc := range []struct {
		name, response string
		want           channels.ErrorKind
	}{
		{"repeated member", edit(`"trade_status"`, `"trade_status":"WAIT_BUYER_PAY","trade_status"`), channels.KindMalformed},
		{"member case variant", edit(`"trade_status"`, `"Trade_Status":"WAIT_BUYER_PAY","trade_status"`), channels.KindMalformed},
		{"amount as number", edit(`"25.80"`, `25.80`), channels.KindMalformed},
		{"code as number", edit(`"10000"`, `10000`), channels.KindMalformed},
		{"status as object", edit(`"TRADE_SUCCESS"`, `{}`), channels.KindMalformed},
		{"no code", drop("code"), channels.KindMalformed},
		{"no out_trade_no", drop("out_trade_no"), channels.KindMalformed},
		{"no trade_no", drop("trade_no"), channels.KindMalformed},
		{"no total_amount", drop("total_amount"), channels.KindInvalidAmount},
		{"no send_pay_date", drop("send_pay_date"), channels.KindMalformed},
		{"bad send_pay_date", edit(`2024-06-01 20:00:05`, `2024-06-01T20:00:05`), channels.KindMalformed},
		{"three decimals", edit(`"25.80"`, `"25.801"`), channels.KindInvalidAmount},
		{"exponent", edit(`"25.80"`, `"2e3"`), channels.KindInvalidAmount},
		{"negative", edit(`"25.80"`, `"-25.80"`), channels.KindInvalidAmount},
		{"absurd", edit(`"25.80"`, `"99999999999999.99"`), channels.KindInvalidAmount},
		{"zero", edit(`"25.80"`, `"0.00"`), channels.KindInvalidAmount},
		{"foreign currency", edit(`"code":"10000"`, `"code":"10000","trans_currency":"USD"`), channels.KindUnsupported},
		{"another out_trade_no", edit(`POS20240601000001`, `POS20240601000002`), channels.KindMalformed},
		{"another out_trade_no on an error", `{"code":"40004","sub_code":"ACQ.TRADE_NOT_EXIST","out_trade_no":"POS2"}`, channels.KindMalformed},
		{"not an object", `[]`, channels.KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := alipay.SampleAnswer(alipay.MethodTradeQuery, []byte(tc.response), nil)
			require.NoError(t, err)
			_, err = alipay.DecodeAnswer(paymentTarget(), channels.QueryResponse{StatusCode: 200, Body: body, ReceivedAt: answerAt})
			requireKind(t, err, tc.want)
		})
	}

	// Asked by trade_no: another trade_no is refused.
	tg := paymentTarget()
	tg.TradeNo = "2024060122001439000000000009"
	_, err = decodeAnswerJSON(t, tg, ok)
	requireKind(t, err, channels.KindMalformed)

	// A refund answer about another refund, and a refund above the total.
	const refundOK = `{"code":"10000","out_trade_no":"POS20240601000001","trade_no":"2024060122001439000000000001","out_request_no":"RF1","total_amount":"25.80","refund_amount":"25.80","refund_status":"REFUND_SUCCESS","gmt_refund_pay":"2024-06-01 21:00:05"}`
	_, err = decodeAnswerJSON(t, refundTarget(), refundOK)
	require.NoError(t, err)
	for name, resp := range map[string]string{
		"another refund":       strings.Replace(refundOK, `"RF1"`, `"RF2"`, 1),
		"no out_request_no":    strings.Replace(refundOK, `"out_request_no":"RF1",`, ``, 1),
		"above the total":      strings.Replace(refundOK, `"refund_amount":"25.80"`, `"refund_amount":"25.81"`, 1),
		"zero refund":          strings.Replace(refundOK, `"refund_amount":"25.80"`, `"refund_amount":"0.00"`, 1),
		"no gmt_refund_pay":    strings.Replace(refundOK, `,"gmt_refund_pay":"2024-06-01 21:00:05"`, ``, 1),
		"error_response 10000": "",
	} {
		if resp == "" {
			body := []byte(`{"error_response":{"code":"10000"}}`)
			_, err = alipay.DecodeAnswer(refundTarget(), channels.QueryResponse{StatusCode: 200, Body: body, ReceivedAt: answerAt})
		} else {
			_, err = decodeAnswerJSON(t, refundTarget(), resp)
		}
		require.Error(t, err, name)
	}
	_, err = alipay.DecodeAnswer(channels.QueryTarget{Channel: "WECHAT", Kind: channels.QueryPayment}, channels.QueryResponse{})
	requireKind(t, err, channels.KindMalformed)
}

// TestPublishedAnswersDecode reads the real A.11 answers (unverifiable:
// their keys are not published).
func TestPublishedAnswersDecode(t *testing.T) {
	decode := func(target channels.QueryTarget, name string) (channels.QueryAnswer, error) {
		return alipay.DecodeAnswer(target, channels.QueryResponse{StatusCode: 200, Body: alipay.ReadQueryTestdata(t, name), ReceivedAt: answerAt})
	}
	tg := paymentTarget()
	tg.MerchantOrderNo = "20200229153713885346523"
	ans, err := decode(tg, "a11_wait_buyer_pay.json")
	require.NoError(t, err)
	require.Equal(t, channels.QueryPending, ans.Outcome)

	tg.MerchantOrderNo = "yyy"
	ans, err = decode(tg, "a11_trade_success.json")
	require.NoError(t, err)
	require.Equal(t, channels.QuerySettled, ans.Outcome)
	require.Len(t, ans.Events, 1)
	ev := ans.Events[0]
	require.Equal(t, eventkey.PaymentReceived, ev.Type)
	require.Equal(t, int64(38800), ev.OrderTotal)
	require.Equal(t, time.Date(2020, 11, 20, 8, 9, 28, 0, time.UTC), ev.OccurredAt)
	require.Equal(t, "yyy", ev.MerchantOrderNo)
	require.Equal(t, "xxx", ev.TradeNo)

	tg.MerchantOrderNo = "someone-else"
	_, err = decode(tg, "a11_trade_success.json")
	requireKind(t, err, channels.KindMalformed)

	// The published refund answer has refund data but no refund_status:
	// old documentation reads it as success, the 2024 SDK as not received
	// or failed.
	rt := channels.QueryTarget{
		TenantID: 1001, Channel: alipay.Code, Kind: channels.QueryRefund, MerchantID: "2088101117955611",
		MerchantOrderNo: "201881141452422", TradeNo: "2018080121001004890510526880", RefundNo: "201881141452422",
	}
	ans, err = decode(rt, "a11_refund_query.json")
	require.NoError(t, err)
	require.Equal(t, channels.QueryUncertain, ans.Outcome)
}

// TestAnswerEventIsTheCallbacks: for the sample trades, the event the
// query answer proves has the callback's key and fingerprint: payments
// (TRADE_SUCCESS and TRADE_FINISHED) and a full refund. A partial refund
// proves none, and the event one could build from it would conflict with
// the callback's: shown here both ways round.
func TestAnswerEventIsTheCallbacks(t *testing.T) {
	for seq := 1; seq <= 40; seq++ {
		tr := sample.NewTrade(alipay.Code, seq)
		tr.Total = int64(1 + seq*seq*seq*977%5_000_000)
		target := channels.QueryTarget{
			TenantID: tr.TenantID, Channel: alipay.Code, Kind: channels.QueryPayment,
			MerchantID: "2088101117955611", MerchantOrderNo: tr.MerchantOrderNo,
		}
		if seq%2 == 0 {
			target.TradeNo = tr.TradeNo
		}
		read := func(body []byte) channels.QueryAnswer {
			ans, err := alipay.ReadAnswer(target, channels.QueryResponse{StatusCode: 200, Body: body, ReceivedAt: answerAt}, alipayKey())
			require.NoError(t, err)
			return ans
		}
		for status, callback := range map[string][]byte{
			alipay.TradeSuccess:  alipay.SamplePayment(tr, sample.Delivery{}),
			alipay.TradeFinished: alipay.SampleFinished(tr, sample.Delivery{}),
		} {
			want := mustDecode(t, callback).Event
			body, err := alipay.SampleTradeQueryAnswer(tr, status, testKeys()[1])
			require.NoError(t, err)
			ans := read(body)
			require.Equal(t, channels.QuerySettled, ans.Outcome)
			require.Len(t, ans.Events, 1)
			got := ans.Events[0]
			require.Equal(t, want.Key, got.Key)
			require.Equal(t, want.Fingerprint, got.Fingerprint)
			require.Equal(t, want.OccurredAt, got.OccurredAt, "send_pay_date is gmt_payment in the samples")
		}

		// A single full refund: the callback's cumulative is the total.
		target.Kind, target.RefundNo = channels.QueryRefund, fmt.Sprintf("RF%06d", seq)
		full := sample.Refund{No: target.RefundNo, Amount: tr.Total}
		want := mustDecode(t, alipay.SampleRefund(tr, full, sample.Delivery{})).Event
		body, err := alipay.SampleRefundQueryAnswer(tr, full, testKeys()[1])
		require.NoError(t, err)
		ans := read(body)
		require.Equal(t, channels.QuerySettled, ans.Outcome)
		require.Len(t, ans.Events, 1)
		require.Equal(t, want.Key, ans.Events[0].Key)
		require.Equal(t, want.Fingerprint, ans.Events[0].Fingerprint)

		if tr.Total < 3 {
			continue
		}
		// Two partial refunds: the second's callback reports the
		// cumulative (first + second); its answer names the second's own
		// amount only. The answer proves the refund but carries no event.
		first := sample.Refund{No: "RFA" + target.RefundNo, Amount: tr.Total / 3}
		second := sample.Refund{No: target.RefundNo, Amount: tr.Total / 3, Cumulative: 2 * (tr.Total / 3)}
		wantSecond := mustDecode(t, alipay.SampleRefund(tr, second, sample.Delivery{})).Event
		body, err = alipay.SampleRefundQueryAnswer(tr, sample.Refund{No: second.No, Amount: second.Amount}, testKeys()[1])
		require.NoError(t, err)
		ans = read(body)
		require.Equal(t, channels.QuerySettled, ans.Outcome)
		require.Empty(t, ans.Events)
		require.Contains(t, ans.Detail, "cumulative")

		// Why: the event the answer's own amount would give has the
		// callback's key but not its fingerprint (a conflict if the
		// callback comes second); and settlement, reading the amount as a
		// cumulative, would move nothing for it if the first refund was
		// posted (own amount = cumulative − highest cumulative so far).
		naive := wantSecond
		naive.CumulativeRefunded = second.Amount
		naive.Fingerprint = channels.Fingerprint(naive)
		require.Equal(t, wantSecond.Key, naive.Key)
		require.NotEqual(t, wantSecond.Fingerprint, naive.Fingerprint)
		require.LessOrEqual(t, naive.CumulativeRefunded-first.Amount, int64(0))
		// The other way round: a first refund's answer would match its
		// callback only because no refund came before, which the answer
		// cannot show: the rule is the same for every partial refund.
		wantFirst := mustDecode(t, alipay.SampleRefund(tr, first, sample.Delivery{})).Event
		body, err = alipay.SampleRefundQueryAnswer(tr, first, testKeys()[1])
		require.NoError(t, err)
		target.RefundNo = first.No
		ans = read(body)
		require.Empty(t, ans.Events)
		require.Equal(t, wantFirst.CumulativeRefunded, first.Amount)
	}
}

// FuzzDecodeAnswer: for any answer body, DecodeAnswer never panics, fails
// only with a typed error, and a settled event validates with the target's
// tenant; any other outcome carries no event.
func FuzzDecodeAnswer(f *testing.F) {
	for _, name := range []string{"a11_wait_buyer_pay.json", "a11_trade_success.json", "a11_refund_query.json"} {
		f.Add(false, alipay.ReadQueryTestdata(f, name))
	}
	tr := sample.NewTrade(alipay.Code, 1)
	body, err := alipay.SampleTradeQueryAnswer(tr, alipay.TradeSuccess, nil)
	require.NoError(f, err)
	f.Add(false, body)
	body, err = alipay.SampleRefundQueryAnswer(tr, sample.Refund{No: "RF1", Amount: tr.Total}, nil)
	require.NoError(f, err)
	f.Add(true, body)
	f.Fuzz(func(t *testing.T, refund bool, body []byte) {
		target := channels.QueryTarget{
			TenantID: 1001, Channel: alipay.Code, Kind: channels.QueryPayment, MerchantID: "2088101117955611",
			MerchantOrderNo: tr.MerchantOrderNo,
		}
		if refund {
			target.Kind, target.RefundNo = channels.QueryRefund, "RF1"
		}
		ans, err := alipay.DecodeAnswer(target, channels.QueryResponse{StatusCode: 200, Body: body, ReceivedAt: answerAt})
		if err != nil {
			_, ok := channels.KindOf(err)
			require.True(t, ok, "untyped error %v", err)
			return
		}
		require.NotEmpty(t, ans.Outcome)
		if ans.Outcome != channels.QuerySettled {
			require.Empty(t, ans.Events)
		}
		for _, ev := range ans.Events {
			require.NoError(t, ev.Validate())
			require.Equal(t, int64(1001), ev.TenantID)
			require.Equal(t, tr.MerchantOrderNo, ev.MerchantOrderNo)
		}
	})
}
