package wechat_test

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/stretchr/testify/require"
)

// answerAt is when the tests' answers are signed, received and verified.
var answerAt = time.Date(2024, 6, 1, 12, 0, 6, 0, time.UTC)

// answerer signs answers with a platform key (the A.3 key, serial
// a3Serial) for one merchant, and reads them back as the querier does.
type answerer struct {
	key      *rsa.PrivateKey
	merchant string
	keys     []wechat.PublicKey
}

func newAnswerer(tb testing.TB, merchant string) answerer {
	tb.Helper()
	return answerer{key: a3PrivateKey(tb), merchant: merchant, keys: []wechat.PublicKey{a3PlatformKey(tb, merchant)}}
}

// signed is body answered with status and signed at answerAt.
func (a answerer) signed(tb testing.TB, status int, body []byte) channels.QueryResponse {
	tb.Helper()
	h, err := wechat.SignAnswer(a.key, a3Serial, answerAt, "5K8264ILTKCH16CQ2502SI8ZNMTM67VS", body)
	require.NoError(tb, err)
	return channels.QueryResponse{StatusCode: status, Header: h, Body: body, ReceivedAt: answerAt}
}

func (a answerer) read(tb testing.TB, target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
	tb.Helper()
	ans, err := wechat.ReadAnswer(target, resp, a.keys, answerAt)
	if err != nil {
		require.Empty(tb, ans.Events)
		return ans, err
	}
	require.NotEmpty(tb, ans.Detail)
	require.NotEmpty(tb, ans.RawState)
	if ans.Outcome == channels.QuerySettled {
		require.Len(tb, ans.Events, 1)
		ev := ans.Events[0]
		require.NoError(tb, ev.Validate())
		require.Equal(tb, target.TenantID, ev.TenantID)
		require.Equal(tb, wechat.Code, ev.Channel)
		require.Equal(tb, answerAt, ev.ReceivedAt)
	} else {
		require.Empty(tb, ans.Events, "only a settled answer proves events")
	}
	return ans, nil
}

// mustRead reads a signed 200 answer and requires success.
func (a answerer) mustRead(tb testing.TB, target channels.QueryTarget, body []byte) channels.QueryAnswer {
	tb.Helper()
	ans, err := a.read(tb, target, a.signed(tb, 200, body))
	require.NoError(tb, err)
	return ans
}

func paymentTarget(merchant, outTradeNo string) channels.QueryTarget {
	return channels.QueryTarget{TenantID: 1001, Channel: wechat.Code, Kind: channels.QueryPayment, MerchantID: merchant, MerchantOrderNo: outTradeNo}
}

func refundTarget(merchant, refundNo string) channels.QueryTarget {
	return channels.QueryTarget{TenantID: 1001, Channel: wechat.Code, Kind: channels.QueryRefund, MerchantID: merchant, RefundNo: refundNo}
}

// withoutBOM drops a leading UTF-8 byte order mark, which the SKIT sample
// files carry and WeChat's answers do not.
func withoutBOM(b []byte) []byte { return bytes.TrimPrefix(b, []byte("\ufeff")) }

func TestQueryPublishedAnswers(t *testing.T) {
	t.Parallel()
	beijing := time.FixedZone("CST", 8*3600)
	paid := func(tradeNo, orderNo string, total int64, at time.Time) channels.Event {
		return channels.Event{
			Type: eventkey.PaymentReceived, Key: eventkey.Key("WECHAT:" + tradeNo + ":PAYMENT_RECEIVED"),
			TradeNo: tradeNo, MerchantOrderNo: orderNo, OrderTotal: total, OccurredAt: at,
		}
	}
	for _, c := range []struct {
		name, file string
		target     channels.QueryTarget
		outcome    channels.QueryOutcome
		want       channels.Event // Key, TradeNo, MerchantOrderNo, RefundNo, amounts, OccurredAt
		merchant   string
	}{
		{
			name: "A.9 SKIT direct SUCCESS", file: "a9_skit_payment_answer.json",
			target: paymentTarget("1900006XXX", "44_2126281063_5504"), outcome: channels.QuerySettled, merchant: "1900006XXX",
			want: paid("4200000891202103228088184743", "44_2126281063_5504", 1, time.Date(2021, 3, 22, 10, 29, 5, 0, beijing)),
		},
		{
			name: "A.9 SKIT partner SUCCESS (the sub-merchant asked)", file: "a9_skit_partner_payment_answer.json",
			target: paymentTarget("1900008XXX", "b3682ea011c547a49e8d7cc93107b71c"), outcome: channels.QuerySettled, merchant: "1900008XXX",
			want: paid("4200000985202103031441826014", "b3682ea011c547a49e8d7cc93107b71c", 2, time.Date(2021, 3, 3, 15, 27, 14, 0, beijing)),
		},
		{
			name: "A.9 SKIT refund SUCCESS", file: "a9_skit_refund_answer.json",
			target: refundTarget("1900006XXX", "sdk12345678920210326145039"), outcome: channels.QuerySettled,
			want: channels.Event{
				Type: eventkey.RefundSucceeded, Key: "WECHAT:4200000991202103266853086457:REFUND_SUCCEEDED:sdk12345678920210326145039",
				TradeNo: "4200000991202103266853086457", MerchantOrderNo: "sdk12345678920210326145039", RefundNo: "sdk12345678920210326145039",
				OrderTotal: 1, RefundAmount: 1, OccurredAt: time.Date(2021, 3, 26, 14, 52, 11, 0, beijing),
			},
		},
		{
			name: "A.10 NOTPAY", file: "a10_notpay_answer.json",
			target: paymentTarget("1642979517", "1654449150982348804202305051933"), outcome: channels.QueryPending, merchant: "1642979517",
		},
		{
			name: "A.10 SUCCESS", file: "a10_success_answer.json",
			target: paymentTarget("1642979517", "1654747149419622403202305061517"), outcome: channels.QuerySettled, merchant: "1642979517",
			want: paid("4200001863202305068344507881", "1654747149419622403202305061517", 1, time.Date(2023, 5, 6, 15, 17, 31, 0, beijing)),
		},
		{
			name: "A.10 NOTPAY of 6000 fen", file: "a10_notpay_6000_answer.json",
			target: paymentTarget("1622988185", "ff39ecfb4333457480c083c88bf291f2"), outcome: channels.QueryPending, merchant: "1622988185",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := newAnswerer(t, c.target.MerchantID)
			ans := a.mustRead(t, c.target, withoutBOM(queryFile(t, c.file)))
			require.Equal(t, c.outcome, ans.Outcome, ans.Detail)
			require.Equal(t, c.merchant, ans.MerchantID)
			if c.outcome != channels.QuerySettled {
				return
			}
			ev := ans.Events[0]
			require.Equal(t, c.want.Type, ev.Type)
			require.Equal(t, c.want.Key, ev.Key)
			require.Equal(t, c.want.TradeNo, ev.TradeNo)
			require.Equal(t, c.want.MerchantOrderNo, ev.MerchantOrderNo)
			require.Equal(t, c.want.RefundNo, ev.RefundNo)
			require.Equal(t, c.want.OrderTotal, ev.OrderTotal)
			require.Equal(t, c.want.RefundAmount, ev.RefundAmount)
			require.Equal(t, channels.CurrencyCNY, ev.Currency)
			require.True(t, c.want.OccurredAt.Equal(ev.OccurredAt), "occurred at %s", ev.OccurredAt)
			require.Equal(t, channels.Fingerprint(ev), ev.Fingerprint)
		})
	}
}

// TestQueryAnswerIsTheCallbacksEvent: for the sample trades, the callback's
// event and the query answer's event are the same event: same key, same
// fingerprint (and the same fields the fingerprint does not cover).
func TestQueryAnswerIsTheCallbacksEvent(t *testing.T) {
	t.Parallel()
	a := newAnswerer(t, wechat.SampleMerchantID)
	for seq := 1; seq <= 40; seq++ {
		tr := sample.NewTrade(wechat.Code, seq)
		tr.Total = 1 + int64(seq*seq*997)%channels.MaxAmount
		if seq%7 == 0 {
			tr.MerchantOrderNo = fmt.Sprintf("订单-%d_a.b|c", seq)
		}
		cb := mustDecode(t, wechat.SamplePayment(tr, sample.Delivery{Attempt: seq % 3})).Event
		for _, state := range []string{"SUCCESS", "REFUND"} {
			ev := a.mustRead(t, paymentTarget(wechat.SampleMerchantID, tr.MerchantOrderNo), wechat.SamplePaymentAnswer(tr, state)).Events[0]
			requireSameEvent(t, cb, ev)
			// Asked by transaction_id, the same.
			byID := paymentTarget(wechat.SampleMerchantID, "")
			byID.TradeNo = tr.TradeNo
			requireSameEvent(t, cb, a.mustRead(t, byID, wechat.SamplePaymentAnswer(tr, state)).Events[0])
		}

		r := sample.Refund{No: fmt.Sprintf("RF%d-%d", seq, seq%3), Amount: 1 + tr.Total/int64(1+seq%4)}
		rcb := mustDecode(t, wechat.SampleRefund(tr, r, "SUCCESS", sample.Delivery{Partner: seq%2 == 0})).Event
		rev := a.mustRead(t, refundTarget(wechat.SampleMerchantID, r.No), wechat.SampleRefundAnswer(tr, r, "SUCCESS")).Events[0]
		requireSameEvent(t, rcb, rev)
		require.Equal(t, tr.Total, rev.OrderTotal)
		require.Equal(t, r.Amount, rev.RefundAmount)
	}
}

func requireSameEvent(tb testing.TB, callback, answer channels.Event) {
	tb.Helper()
	require.Equal(tb, callback.Key, answer.Key)
	require.Equal(tb, callback.Fingerprint, answer.Fingerprint)
	callback.ReceivedAt, answer.ReceivedAt = time.Time{}, time.Time{}
	callback.RawStatus, answer.RawStatus = "", ""
	require.Equal(tb, callback, answer)
}

func TestQueryStateTable(t *testing.T) {
	t.Parallel()
	a := newAnswerer(t, wechat.SampleMerchantID)
	tr := sample.NewTrade(wechat.Code, 3)
	r := sample.Refund{No: "RF-3", Amount: 100}
	pay, ref := channels.QueryPayment, channels.QueryRefund
	for _, c := range []struct {
		kind    channels.QueryKind
		state   string
		outcome channels.QueryOutcome
	}{
		{pay, "SUCCESS", channels.QuerySettled},
		{pay, "REFUND", channels.QuerySettled},
		{pay, "NOTPAY", channels.QueryPending},
		{pay, "USERPAYING", channels.QueryPending},
		{pay, "ACCEPT", channels.QueryPending},
		{pay, "CLOSED", channels.QueryClosed},
		{pay, "REVOKED", channels.QueryClosed},
		{pay, "PAYERROR", channels.QueryUncertain},
		{pay, "PAID", channels.QueryUncertain}, // not a WeChat state: never guessed at
		{pay, "success", channels.QueryUncertain},
		{ref, "SUCCESS", channels.QuerySettled},
		{ref, "PROCESSING", channels.QueryPending},
		{ref, "ABNORMAL", channels.QueryUncertain},
		{ref, "CLOSED", channels.QueryClosed},
		{ref, "FAILED", channels.QueryUncertain},
	} {
		target, body, merchant := paymentTarget(wechat.SampleMerchantID, tr.MerchantOrderNo), wechat.SamplePaymentAnswer(tr, c.state), wechat.SampleMerchantID
		if c.kind == ref {
			// A direct-mode refund answer names no merchant.
			target, body, merchant = refundTarget(wechat.SampleMerchantID, r.No), wechat.SampleRefundAnswer(tr, r, c.state), ""
		}
		ans := a.mustRead(t, target, body)
		require.Equal(t, c.outcome, ans.Outcome, "%s %s", c.kind, c.state)
		require.Equal(t, c.state, ans.RawState)
		require.Equal(t, merchant, ans.MerchantID)
		if c.kind == pay && c.state == "REFUND" {
			require.Contains(t, ans.Detail, "refund queries")
		}
	}
}

func TestQueryErrorAnswers(t *testing.T) {
	t.Parallel()
	a := newAnswerer(t, wechat.SampleMerchantID)
	pay := paymentTarget(wechat.SampleMerchantID, "POS1")
	ref := refundTarget(wechat.SampleMerchantID, "RF1")
	errBody := func(code string) []byte {
		return []byte(`{"code":"` + code + `","message":"` + code + ` message","detail":{"field":"x"}}`)
	}
	for _, c := range []struct {
		name    string
		target  channels.QueryTarget
		status  int
		body    []byte
		outcome channels.QueryOutcome
		raw     string
	}{
		{"payment not found", pay, 404, errBody(wechat.OrderNotExist), channels.QueryNotFound, wechat.OrderNotExist},
		{"refund not found", ref, 404, errBody(wechat.ResourceNotExists), channels.QueryNotFound, wechat.ResourceNotExists},
		{"the refund code on a payment query", pay, 404, errBody(wechat.ResourceNotExists), channels.QueryUncertain, wechat.ResourceNotExists},
		{"a 404 without a code (a wrong base URL?)", pay, 404, []byte("<html>Not Found</html>"), channels.QueryUncertain, "HTTP 404"},
		{"rate limited", pay, 429, errBody("RATELIMIT_EXCEEDED"), channels.QueryThrottled, "RATELIMIT_EXCEEDED"},
		{"refund query rate limited", ref, 429, errBody("FREQUENCY_LIMITED"), channels.QueryThrottled, "FREQUENCY_LIMITED"},
		{"system error", pay, 500, errBody("SYSTEM_ERROR"), channels.QueryRetry, "SYSTEM_ERROR"},
		{"a proxy's 502", pay, 502, []byte("<html>Bad Gateway</html>"), channels.QueryRetry, "HTTP 502"},
		{"503 without a body", ref, 503, nil, channels.QueryRetry, "HTTP 503"},
		{"bad parameter", pay, 400, errBody("PARAM_ERROR"), channels.QueryRefused, "PARAM_ERROR"},
		{"bad signature", pay, 401, errBody("SIGN_ERROR"), channels.QueryRefused, "SIGN_ERROR"},
		{"no authority", ref, 403, errBody("NO_AUTH"), channels.QueryRefused, "NO_AUTH"},
		{"an undocumented status", pay, 409, errBody("CONFLICT"), channels.QueryUncertain, "CONFLICT"},
		{"a redirect", pay, 302, nil, channels.QueryUncertain, "HTTP 302"},
		{"a repeated code is unreadable", pay, 404, []byte(`{"code":"ORDER_NOT_EXIST","code":"SYSTEM_ERROR"}`), channels.QueryUncertain, "HTTP 404"},
	} {
		// Unsigned, as WeChat may send them (UNCONFIRMED), and signed.
		unsigned := channels.QueryResponse{StatusCode: c.status, Header: http.Header{}, Body: c.body, ReceivedAt: answerAt}
		for _, resp := range []channels.QueryResponse{unsigned, a.signed(t, c.status, c.body)} {
			ans, err := a.read(t, c.target, resp)
			require.NoError(t, err, c.name)
			require.Equal(t, c.outcome, ans.Outcome, c.name)
			require.Equal(t, c.raw, ans.RawState, c.name)
		}
	}

	// A signed error answer must verify.
	forged := a.signed(t, 404, errBody(wechat.OrderNotExist))
	forged.Body = errBody("PARAM_ERROR")
	_, err := a.read(t, pay, forged)
	requireKind(t, err, channels.KindUnauthenticated)

	// 2xx answers must be signed, whatever their status.
	for _, status := range []int{200, 202, 204} {
		resp := channels.QueryResponse{StatusCode: status, Header: http.Header{}, Body: wechat.SamplePaymentAnswer(sample.NewTrade(wechat.Code, 1), "SUCCESS"), ReceivedAt: answerAt}
		_, err := a.read(t, pay, resp)
		requireKind(t, err, channels.KindUnauthenticated)
	}
	ans, err := a.read(t, pay, a.signed(t, 202, nil))
	require.NoError(t, err)
	require.Equal(t, channels.QueryRetry, ans.Outcome)
	ans, err = a.read(t, pay, a.signed(t, 204, nil))
	require.NoError(t, err)
	require.Equal(t, channels.QueryUncertain, ans.Outcome)

	// A SUCCESS answer signed with another key, or replayed later, proves nothing.
	tr := sample.NewTrade(wechat.Code, 1)
	good := a.signed(t, 200, wechat.SamplePaymentAnswer(tr, "SUCCESS"))
	other := answerer{key: a1PrivateKey(t), merchant: a.merchant, keys: a.keys}
	_, err = other.read(t, paymentTarget(a.merchant, tr.MerchantOrderNo), other.signed(t, 200, good.Body))
	requireKind(t, err, channels.KindUnauthenticated)
	_, err = wechat.ReadAnswer(paymentTarget(a.merchant, tr.MerchantOrderNo), good, a.keys, answerAt.Add(10*time.Minute))
	requireKind(t, err, channels.KindUnauthenticated)
}

func requireKind(tb testing.TB, err error, want channels.ErrorKind) {
	tb.Helper()
	require.Error(tb, err)
	kind, ok := channels.KindOf(err)
	require.True(tb, ok, "untyped error %v", err)
	require.Equal(tb, want, kind, "error: %v", err)
}

// editJSON returns body with edit applied to its members.
func editJSON(tb testing.TB, body []byte, edit func(m map[string]any)) []byte {
	tb.Helper()
	var m map[string]any
	require.NoError(tb, json.Unmarshal(body, &m))
	edit(m)
	out, err := json.Marshal(m)
	require.NoError(tb, err)
	return out
}

func TestQueryMalformedAnswers(t *testing.T) {
	t.Parallel()
	a := newAnswerer(t, wechat.SampleMerchantID)
	tr := sample.NewTrade(wechat.Code, 5)
	pay := paymentTarget(wechat.SampleMerchantID, tr.MerchantOrderNo)
	paid := wechat.SamplePaymentAnswer(tr, "SUCCESS")
	r := sample.Refund{No: "RF-5", Amount: 100}
	ref := refundTarget(wechat.SampleMerchantID, r.No)
	refunded := wechat.SampleRefundAnswer(tr, r, "SUCCESS")
	edit := func(body []byte, f func(m map[string]any)) []byte { return editJSON(t, body, f) }
	amount := func(k string, v any) func(m map[string]any) {
		return func(m map[string]any) { m["amount"].(map[string]any)[k] = v }
	}
	del := func(k string) func(m map[string]any) { return func(m map[string]any) { delete(m, k) } }
	set := func(k string, v any) func(m map[string]any) { return func(m map[string]any) { m[k] = v } }
	rawAmount := func(body []byte, total string) []byte {
		return bytes.Replace(body, []byte(fmt.Sprintf(`"total":%d`, tr.Total)), []byte(`"total":`+total), 1)
	}

	for _, c := range []struct {
		name   string
		target channels.QueryTarget
		body   []byte
		kind   channels.ErrorKind
	}{
		{"not JSON", pay, []byte("trade_state=SUCCESS"), channels.KindMalformed},
		{"empty", pay, nil, channels.KindMalformed},
		{"an array", pay, []byte(`[` + string(paid) + `]`), channels.KindMalformed},
		{"trailing data", pay, append(bytes.Clone(paid), []byte(`{}`)...), channels.KindMalformed},
		{"a byte order mark", pay, append([]byte("\ufeff"), paid...), channels.KindMalformed},
		{"trade_state repeated", pay, bytes.Replace(paid, []byte(`"trade_state":"SUCCESS"`), []byte(`"trade_state":"NOTPAY","trade_state":"SUCCESS"`), 1), channels.KindMalformed},
		{"trade_state repeated in another case", pay, bytes.Replace(paid, []byte(`"trade_state":"SUCCESS"`), []byte(`"Trade_State":"NOTPAY","trade_state":"SUCCESS"`), 1), channels.KindMalformed},
		{"total repeated", pay, bytes.Replace(paid, []byte(`"total":`), []byte(`"total":1,"total":`), 1), channels.KindMalformed},
		{"trade_state a number", pay, edit(paid, set("trade_state", 1)), channels.KindMalformed},
		{"amount a string", pay, edit(paid, set("amount", "25.80")), channels.KindMalformed},
		{"no trade_state", pay, edit(paid, del("trade_state")), channels.KindMalformed},
		{"no out_trade_no", pay, edit(paid, del("out_trade_no")), channels.KindMalformed},
		{"no mchid", pay, edit(paid, del("mchid")), channels.KindMalformed},
		{"SUCCESS without transaction_id", pay, edit(paid, del("transaction_id")), channels.KindMalformed},
		{"SUCCESS without success_time", pay, edit(paid, del("success_time")), channels.KindMalformed},
		{"SUCCESS with a bad success_time", pay, edit(paid, set("success_time", "2024-06-01 12:00:00")), channels.KindMalformed},
		{"SUCCESS without amount.total", pay, edit(paid, amount("total", nil)), channels.KindInvalidAmount},
		{"SUCCESS with a zero total", pay, edit(paid, amount("total", 0)), channels.KindInvalidAmount},
		{"a fractional total", pay, rawAmount(paid, "25.8"), channels.KindInvalidAmount},
		{"a negative total", pay, rawAmount(paid, "-2580"), channels.KindInvalidAmount},
		{"an exponent total", pay, rawAmount(paid, "2.58e3"), channels.KindInvalidAmount},
		{"a string total", pay, rawAmount(paid, `"2580"`), channels.KindInvalidAmount},
		{"an absurd total", pay, rawAmount(paid, "99999999999999999999"), channels.KindInvalidAmount},
		{"an absurd total while NOTPAY", pay, rawAmount(wechat.SamplePaymentAnswer(tr, "NOTPAY"), "99999999999999999999"), channels.KindInvalidAmount},
		{"USD", pay, edit(paid, amount("currency", "USD")), channels.KindUnsupported},
		{"another out_trade_no", pay, edit(paid, set("out_trade_no", "POS-OTHER")), channels.KindMalformed},
		{"another merchant", pay, edit(paid, set("mchid", "1900000100")), channels.KindMalformed},
		{"another transaction_id", func() channels.QueryTarget {
			t := pay
			t.TradeNo = "4200000000000000000000000000"
			return t
		}(), paid, channels.KindMalformed},
		{"no transaction_id asked by it", func() channels.QueryTarget {
			t := paymentTarget(wechat.SampleMerchantID, "")
			t.TradeNo = tr.TradeNo
			return t
		}(), wechat.SamplePaymentAnswer(tr, "NOTPAY"), channels.KindMalformed},
		{"refund: bad JSON", ref, refunded[:len(refunded)-1], channels.KindMalformed},
		{"refund: status repeated", ref, bytes.Replace(refunded, []byte(`"status":"SUCCESS"`), []byte(`"status":"CLOSED","status":"SUCCESS"`), 1), channels.KindMalformed},
		{"refund: no status", ref, edit(refunded, del("status")), channels.KindMalformed},
		{"refund: status a bool", ref, edit(refunded, set("status", true)), channels.KindMalformed},
		{"refund: no out_refund_no", ref, edit(refunded, del("out_refund_no")), channels.KindMalformed},
		{"refund: another out_refund_no", ref, edit(refunded, set("out_refund_no", "RF-6")), channels.KindMalformed},
		{"refund: SUCCESS without transaction_id", ref, edit(refunded, del("transaction_id")), channels.KindMalformed},
		{"refund: SUCCESS without out_trade_no", ref, edit(refunded, del("out_trade_no")), channels.KindMalformed},
		{"refund: SUCCESS without success_time", ref, edit(refunded, del("success_time")), channels.KindMalformed},
		{"refund: SUCCESS with a zero refund", ref, edit(refunded, amount("refund", 0)), channels.KindInvalidAmount},
		{"refund: a fractional refund", ref, edit(refunded, amount("refund", 0.5)), channels.KindInvalidAmount},
		{"refund: HKD", ref, edit(refunded, amount("currency", "HKD")), channels.KindUnsupported},
	} {
		_, err := a.read(t, c.target, a.signed(t, 200, c.body))
		requireKind(t, err, c.kind)
		if strings.Contains(c.name, "without success_time") {
			require.ErrorContains(t, err, "query answer in SUCCESS has no success_time", c.name)
		}
		require.NotContains(t, err.Error(), "\n", c.name)
	}

	// The sample answers themselves are fine.
	require.Equal(t, channels.QuerySettled, a.mustRead(t, pay, paid).Outcome)
	require.Equal(t, channels.QuerySettled, a.mustRead(t, ref, refunded).Outcome)
}

func TestQueryRequests(t *testing.T) {
	t.Parallel()
	creds := wechat.Credentials{TenantID: 1001, MerchantID: "1230000109", SerialNo: a3Serial, PrivateKey: a3PrivateKey(t)}
	at := time.Unix(a3Timestamp, 0)
	byID := paymentTarget("1230000109", "POS1")
	byID.TradeNo = "4200000891202103228088184743"
	for _, c := range []struct {
		name   string
		target channels.QueryTarget
		base   string
		url    string
	}{
		{"by transaction_id", byID, "https://api.mch.weixin.qq.com/", "https://api.mch.weixin.qq.com/v3/pay/transactions/id/4200000891202103228088184743?mchid=1230000109"},
		{"by out_trade_no, escaped", paymentTarget("1230000109", "订单/1 a?b"), "http://127.0.0.1:8443", "http://127.0.0.1:8443/v3/pay/transactions/out-trade-no/%E8%AE%A2%E5%8D%95%2F1%20a%3Fb?mchid=1230000109"},
		{"a refund", refundTarget("1230000109", "RF 1/2"), wechat.QueryBaseURL, "https://api.mch.weixin.qq.com/v3/refund/domestic/refunds/RF%201%2F2"},
	} {
		req, err := wechat.NewQueryRequest(c.target, creds, c.base, at, a3Nonce)
		require.NoError(t, err, c.name)
		require.Equal(t, c.url, req.URL, c.name)
		// The signature covers the path and query exactly as sent.
		pathAndQuery := strings.TrimPrefix(strings.TrimPrefix(req.URL, "https://api.mch.weixin.qq.com"), "http://127.0.0.1:8443")
		auth, err := wechat.Authorization(creds, "GET", pathAndQuery, nil, at, a3Nonce)
		require.NoError(t, err)
		require.Equal(t, auth, req.Header.Get("Authorization"), c.name)
		require.Equal(t, "application/json", req.Header.Get("Accept"))
		require.NotEmpty(t, req.Header.Get("User-Agent"))
	}

	for _, c := range []struct {
		name   string
		edit   func(t *channels.QueryTarget, c *wechat.Credentials)
		base   string
		nonce  string
		reason string
	}{
		{"a merchant the credentials are not for", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.MerchantID = "1900000109" }, "", "", "not the credentials' merchant"},
		{"a service provider that is the merchant", func(_ *channels.QueryTarget, c *wechat.Credentials) { c.ServiceProviderID = c.MerchantID }, "", "", "sp_mchid is the merchant itself"},
		{"a quote in sp_mchid", func(_ *channels.QueryTarget, c *wechat.Credentials) { c.ServiceProviderID = `1"` }, "", "", "quotes"},
		{"another tenant", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.TenantID = 1002 }, "", "", "tenant"},
		{"another channel", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.Channel = "ALIPAY" }, "", "", "channel"},
		{"no kind", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.Kind = "" }, "", "", "kind"},
		{"no order number", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.MerchantOrderNo = "" }, "", "", "out_trade_no is missing"},
		{"an order number too long", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.MerchantOrderNo = strings.Repeat("9", 65) }, "", "", "out_trade_no"},
		{"a control character", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.MerchantOrderNo = "a\nb" }, "", "", "control"},
		{"a refund without its number", func(t *channels.QueryTarget, _ *wechat.Credentials) { t.Kind = channels.QueryRefund }, "", "", "out_refund_no is missing"},
		{"no private key", func(_ *channels.QueryTarget, c *wechat.Credentials) { c.PrivateKey = nil }, "", "", "no private key"},
		{"no serial", func(_ *channels.QueryTarget, c *wechat.Credentials) { c.SerialNo = "" }, "", "", "serial_no"},
		{"a quote in the serial", func(_ *channels.QueryTarget, c *wechat.Credentials) { c.SerialNo = `9A",x="` }, "", "", "quotes"},
		{"a base URL with a path", nil, "https://api.mch.weixin.qq.com/v3", "", "base URL"},
		{"a base URL without a scheme", nil, "api.mch.weixin.qq.com", "", "base URL"},
		{"a base URL with a query", nil, "https://api.mch.weixin.qq.com?x=1", "", "base URL"},
		{"an empty nonce", nil, "", "-", "nonce"},
		{"a nonce with a quote", nil, "", `a"b`, "nonce"},
		{"a nonce too long", nil, "", strings.Repeat("a", 65), "nonce"},
	} {
		target, cr := paymentTarget("1230000109", "POS1"), creds
		if c.edit != nil {
			c.edit(&target, &cr)
		}
		base, nonce := wechat.QueryBaseURL, a3Nonce
		if c.base != "" {
			base = c.base
		}
		switch c.nonce {
		case "":
		case "-":
			nonce = ""
		default:
			nonce = c.nonce
		}
		_, err := wechat.NewQueryRequest(target, cr, base, at, nonce)
		require.ErrorContains(t, err, c.reason, c.name)
	}
}

// TestPartnerModeRequests: with sp_mchid the service provider's key asks
// about its sub-merchant: the partner paths with sp_mchid and sub_mchid
// (sub_mchid alone for a refund), and an Authorization naming the service
// provider, signed over the path and query as sent; the credentials are
// read from an entry with sp_mchid, and the entry's merchant is the
// sub-merchant.
func TestPartnerModeRequests(t *testing.T) {
	t.Parallel()
	key := a3PrivateKey(t)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	creds, err := wechat.Spec().ParseQueryCredentials(channels.QueryCredentialsEntry{
		TenantID: 1001, Channel: wechat.Code, MerchantID: "1900000109",
		Fields: map[string]string{"serial_no": a3Serial, "private_key_file": "sp.pem", "sp_mchid": "1230000109"},
		ReadFile: func(string) ([]byte, error) {
			return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
		},
	})
	require.NoError(t, err)
	c := creds.(wechat.Credentials)
	require.Equal(t, "1230000109", c.ServiceProviderID)
	require.Equal(t, "1900000109", c.QueryMerchantID(), "the merchant binding names the sub-merchant")
	at := time.Unix(a3Timestamp, 0)
	byID := paymentTarget("1900000109", "POS1")
	byID.TradeNo = "4200000891202103228088184743"
	for _, tc := range []struct {
		name   string
		target channels.QueryTarget
		path   string
	}{
		{"by transaction_id", byID, "/v3/pay/partner/transactions/id/4200000891202103228088184743?sp_mchid=1230000109&sub_mchid=1900000109"},
		{"by out_trade_no", paymentTarget("1900000109", "POS1"), "/v3/pay/partner/transactions/out-trade-no/POS1?sp_mchid=1230000109&sub_mchid=1900000109"},
		{"a refund", refundTarget("1900000109", "RF1"), "/v3/refund/domestic/refunds/RF1?sub_mchid=1900000109"},
	} {
		req, err := wechat.NewQueryRequest(tc.target, c, wechat.QueryBaseURL, at, a3Nonce)
		require.NoError(t, err, tc.name)
		require.Equal(t, wechat.QueryBaseURL+tc.path, req.URL, tc.name)
		auth := req.Header.Get("Authorization")
		require.Contains(t, auth, `mchid="1230000109"`, tc.name)
		sig := between(t, auth, `signature="`, `"`)
		raw, err := base64.StdEncoding.DecodeString(sig)
		require.NoError(t, err)
		digest := sha256.Sum256(wechat.RequestMessage("GET", tc.path, strconv.FormatInt(a3Timestamp, 10), a3Nonce, nil))
		require.NoError(t, rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, digest[:], raw), "%s: signed over the partner path", tc.name)
	}
	_, err = wechat.NewQueryRequest(paymentTarget("1230000109", "POS1"), c, wechat.QueryBaseURL, at, a3Nonce)
	require.ErrorContains(t, err, "not the credentials' merchant", "the service provider's own orders need direct-mode credentials")
}

// between returns the text of s after start up to the next end.
func between(t *testing.T, s, start, end string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, start)
	require.True(t, ok, "%q in %q", start, s)
	v, _, ok := strings.Cut(after, end)
	require.True(t, ok)
	return v
}

// TestPartnerModeAnswers: a partner-mode answer (sp_mchid, sub_mchid in
// place of mchid) verifies with the service provider's platform key as
// the public-keys file lists it for the sub-merchant, and its event is the
// partner callback's; an answer about another sub-merchant is refused, and
// the same answer is unauthenticated where the key is listed only for the
// service provider (nothing says it answers for the sub-merchant).
func TestPartnerModeAnswers(t *testing.T) {
	t.Parallel()
	const sp, sub = "1900000100", "1900000109"
	a := newAnswerer(t, sub)
	tr := sample.NewTrade(wechat.Code, 7)
	tr.MerchantOrderNo = "POS-PARTNER-7"
	cb := mustDecode(t, wechat.SamplePayment(tr, sample.Delivery{Partner: true})).Event
	partner := func(subMchID string) []byte {
		return editJSON(t, wechat.SamplePaymentAnswer(tr, "SUCCESS"), func(m map[string]any) {
			appid := m["appid"]
			delete(m, "mchid")
			delete(m, "appid")
			m["sp_mchid"], m["sub_mchid"], m["sp_appid"], m["sub_appid"] = sp, subMchID, appid, appid
		})
	}
	ans := a.mustRead(t, paymentTarget(sub, tr.MerchantOrderNo), partner(sub))
	require.Equal(t, sub, ans.MerchantID)
	requireSameEvent(t, cb, ans.Events[0])

	_, err := a.read(t, paymentTarget(sub, tr.MerchantOrderNo), a.signed(t, 200, partner("1900000999")))
	requireKind(t, err, channels.KindMalformed)

	spOnly := answerer{key: a.key, merchant: sp, keys: []wechat.PublicKey{a3PlatformKey(t, sp)}}
	_, err = spOnly.read(t, paymentTarget(sub, tr.MerchantOrderNo), spOnly.signed(t, 200, partner(sub)))
	requireKind(t, err, channels.KindUnauthenticated)
}
