package channels_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
)

func TestQueryEnvelopeCarriesTheAnswerBytesUnchanged(t *testing.T) {
	target := channels.QueryTarget{
		TenantID: 1001, Channel: channels.WeChat, Kind: channels.QueryPayment,
		MerchantID: "1900000100", MerchantOrderNo: "P1",
	}
	body := "{\"trade_state\":\"SUCCESS\",\"note\":\"\\u00e9 é <&> \\\"x\\\"\"}\n"
	h := http.Header{}
	h.Add("Wechatpay-Signature", "sig1")
	h.Add("Wechatpay-Signature", "sig2")
	h.Set("Wechatpay-Serial", "S")
	h.Set("Set-Cookie", "not carried")
	asked := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	resp := channels.QueryResponse{StatusCode: 200, Header: h, Body: []byte(body), ReceivedAt: asked.Add(time.Second)}

	value, err := channels.QueryEnvelope(target, asked, resp, []string{"wechatpay-signature", "Wechatpay-Serial", "Wechatpay-Nonce"})
	require.NoError(t, err)
	env, err := channels.ParseEnvelope(value)
	require.NoError(t, err)
	assert.Equal(t, channels.ContentTypeQuery, env.ContentType)
	msg, err := channels.ParseQueryMessage(env)
	require.NoError(t, err)
	assert.Equal(t, target, msg.Target(env.TenantID, channels.Channel(env.Channel)))
	got := msg.Response(env.ReceivedAt)
	assert.Equal(t, body, string(got.Body))
	assert.Equal(t, []string{"sig1", "sig2"}, got.Header.Values("Wechatpay-Signature"))
	assert.Equal(t, "S", got.Header.Get("Wechatpay-Serial"))
	assert.Empty(t, got.Header.Values("Set-Cookie"))
	assert.Equal(t, resp.ReceivedAt, got.ReceivedAt)
	assert.True(t, asked.Equal(msg.AskedAt))
}

func TestQueryEnvelopeRefuses(t *testing.T) {
	ok := channels.QueryTarget{
		TenantID: 1001, Channel: channels.SQB, Kind: channels.QueryRefund,
		MerchantID: "T1", TradeNo: "789", RefundNo: "R1",
	}
	resp := channels.QueryResponse{StatusCode: 200, Body: []byte("{}"), ReceivedAt: time.Now()}
	for name, tc := range map[string]struct {
		mutate func(*channels.QueryTarget, *channels.QueryResponse)
		want   channels.ErrorKind
	}{
		"tenant":       {func(t *channels.QueryTarget, _ *channels.QueryResponse) { t.TenantID = 0 }, channels.KindMalformed},
		"channel":      {func(t *channels.QueryTarget, _ *channels.QueryResponse) { t.Channel = "PAYPAL" }, channels.KindUnknownChannel},
		"no order":     {func(t *channels.QueryTarget, _ *channels.QueryResponse) { t.TradeNo = "" }, channels.KindMalformed},
		"no refund no": {func(t *channels.QueryTarget, _ *channels.QueryResponse) { t.RefundNo = "" }, channels.KindMalformed},
		"kind":         {func(t *channels.QueryTarget, _ *channels.QueryResponse) { t.Kind = "BOTH" }, channels.KindMalformed},
		"control":      {func(t *channels.QueryTarget, _ *channels.QueryResponse) { t.MerchantID = "T\n1" }, channels.KindMalformed},
		"not utf-8":    {func(_ *channels.QueryTarget, r *channels.QueryResponse) { r.Body = []byte{0xff} }, channels.KindMalformed},
		"too large": {func(_ *channels.QueryTarget, r *channels.QueryResponse) {
			r.Body = []byte(strings.Repeat("a", channels.MaxEnvelopeBytes))
		}, channels.KindMalformed},
		"refund on pay": {func(t *channels.QueryTarget, _ *channels.QueryResponse) { t.Kind = channels.QueryPayment }, channels.KindMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			target, r := ok, resp
			tc.mutate(&target, &r)
			_, err := channels.QueryEnvelope(target, time.Now(), r, nil)
			require.Error(t, err)
			kind, _ := channels.KindOf(err)
			assert.Equal(t, tc.want, kind)
		})
	}
}

func TestParseQueryMessageIsStrict(t *testing.T) {
	env := channels.Envelope{TenantID: 1001, Channel: "SQB", ReceivedAt: time.Now(), ContentType: channels.ContentTypeQuery}
	good := `{"kind":"PAYMENT","merchant_id":"T1","merchant_order_no":"C1","asked_at":"2026-12-05T02:00:00Z","status":200,"answer_body":"{}"}`
	env.Body = good
	_, err := channels.ParseQueryMessage(env)
	require.NoError(t, err)
	for name, body := range map[string]string{
		"unknown member":  strings.Replace(good, `"status"`, `"extra":1,"status"`, 1),
		"repeated member": strings.Replace(good, `"status":200`, `"status":200,"Status":500`, 1),
		"trailing":        good + `{}`,
		"status":          strings.Replace(good, `200`, `42`, 1),
		"no asked_at":     strings.Replace(good, `"asked_at":"2026-12-05T02:00:00Z",`, ``, 1),
		"not json":        `{`,
	} {
		t.Run(name, func(t *testing.T) {
			env.Body = body
			_, err := channels.ParseQueryMessage(env)
			require.Error(t, err)
			kind, _ := channels.KindOf(err)
			assert.Equal(t, channels.KindMalformed, kind)
		})
	}
}

// TestDecodeMessageRefusesQueryAnswersItCannotVerify: a query answer must
// carry the statement key's signature, and even signed it posts nothing
// while the decoder has no channel keys to verify the answer with.
func TestDecodeMessageRefusesQueryAnswersItCannotVerify(t *testing.T) {
	target := channels.QueryTarget{
		TenantID: 1001, Channel: channels.WeChat, Kind: channels.QueryPayment,
		MerchantID: "1900000100", MerchantOrderNo: "P1",
	}
	now := time.Now()
	value, err := channels.QueryEnvelope(target, now, channels.QueryResponse{StatusCode: 200, Body: []byte(`{}`), ReceivedAt: now}, nil)
	require.NoError(t, err)
	v := &oneSignature{value: string(value), signature: "k1:good"}
	dec := channels.NewDecoder(nil, channels.VerifyStatements(v))
	for name, sig := range map[string]string{"unsigned": "", "signed": "k1:good"} {
		t.Run(name, func(t *testing.T) {
			calls := v.calls
			res, err := dec.DecodeMessage(value, sig)
			require.Error(t, err)
			kind, _ := channels.KindOf(err)
			assert.Equal(t, channels.KindUnauthenticated, kind)
			assert.Equal(t, calls+1, v.calls, "the statement signature is checked first")
			assert.Equal(t, int64(1001), res.Event.TenantID)
			assert.Empty(t, res.Event.Key)
		})
	}
	_, err = channels.NewDecoder(nil).DecodeMessage(value, "k1:good")
	kind, _ := channels.KindOf(err)
	assert.Equal(t, channels.KindUnauthenticated, kind, "without a statement verifier")
}
