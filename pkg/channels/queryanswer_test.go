package channels_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/querytest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// querierSignature is the statement signature the tests' querier gives
// every message; statementSignatures accepts it alone (statementauth has
// the real keys' tests, the pipeline's tests use them end to end).
const querierSignature = "k1:querier"

type statementSignatures struct{}

func (statementSignatures) Verify(_ []byte, signature string) error {
	if signature != querierSignature {
		return errors.New("not the querier's signature")
	}
	return nil
}

// queryDecoder decodes as the worker does: statement signatures checked,
// answers verified with keys.
func queryDecoder(_ querytest.Kit, keys *channels.ChannelPublicKeys) *channels.Decoder {
	opts := []channels.DecoderOption{channels.VerifyStatements(statementSignatures{})}
	if keys != nil {
		opts = append(opts, channels.VerifyQueryAnswers(channels.FixedQueryKeys(*keys)))
	}
	return channels.NewDecoder(channelstest.Keys(), opts...)
}

// decodeSigned decodes a's query message signed with the statement key.
func decodeSigned(t *testing.T, _ querytest.Kit, dec *channels.Decoder, a querytest.Answer) (channels.Result, error) {
	t.Helper()
	return dec.DecodeMessage(a.Value(t), querierSignature)
}

func requireKindOf(t *testing.T, err error, want channels.ErrorKind) {
	t.Helper()
	require.Error(t, err)
	kind, _ := channels.KindOf(err)
	require.Equal(t, want, kind, "%v", err)
}

// TestQueryAnswersDecodeToTheCallbacksEvents: a paid answer of each channel,
// verified with the configured keys, decodes to the event the trade's
// callback decodes to (same key, same fingerprint), flagged FromQuery, its
// merchant (and Alipay application) set for the merchant check.
func TestQueryAnswersDecodeToTheCallbacksEvents(t *testing.T) {
	kit := querytest.New(t)
	dec := queryDecoder(kit, &kit.Keys)
	at := channelstest.BaseTime.Add(time.Hour)

	wt := channelstest.NewTrade(channels.WeChat, 61)
	at1 := kit.AlipayPayment(t, channelstest.NewTrade(channels.Alipay, 62), "TRADE_SUCCESS", kit.Trusted, at)
	st := channelstest.NewTrade(channels.SQB, 63)
	for _, tc := range []struct {
		name     string
		answer   querytest.Answer
		callback []byte
		merchant string
		app      string
	}{
		{"WECHAT", kit.WeChatPayment(t, wt, "SUCCESS", kit.Trusted, at, at), channelstest.PaymentEnvelope(wt, channelstest.Delivery{}), wechat.SampleMerchantID, ""},
		{"ALIPAY", at1, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 62), channelstest.Delivery{}), querytest.AlipayMerchant, querytest.AlipayAppID},
		{"SQB", kit.SQBOrder(st, channels.QueryPayment, "", sqbOrder(t, st), at), channelstest.PaymentEnvelope(st, channelstest.Delivery{}), querytest.SQBTerminal, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := decodeSigned(t, kit, dec, tc.answer)
			require.NoError(t, err)
			cb := mustDecode(t, tc.callback)
			require.False(t, res.Ignored, res.IgnoreReason)
			assert.True(t, res.FromQuery)
			assert.False(t, res.FromStatement)
			assert.Equal(t, cb.Event.Key, res.Event.Key)
			assert.Equal(t, cb.Event.Fingerprint, res.Event.Fingerprint)
			assert.True(t, at.Equal(res.Event.ReceivedAt), "received at the envelope's received_at")
			assert.Equal(t, tc.merchant, res.MerchantID)
			assert.Equal(t, tc.app, res.AppID)
			require.NotNil(t, res.Query)
			assert.Equal(t, channels.QuerySettled, res.Query.Answer.Outcome)
			assert.Empty(t, res.More)
		})
	}
}

// sqbOrder is the body of tr's Shouqianba payment callback: the order as
// Shouqianba's query answer carries it.
func sqbOrder(t *testing.T, tr channelstest.Trade) []byte {
	t.Helper()
	env, err := channels.ParseEnvelope(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
	require.NoError(t, err)
	return []byte(env.Body)
}

// TestQueryAnswerTimeIsTheEnvelopes: WeChat's timestamp window is judged
// at the envelope's received_at, never at the worker's clock: an answer
// received in its window decodes however long after it is consumed (the
// sample trades are from 2024), and an old answer re-sent as if received
// later (timestamp 300 s or more from received_at) is unauthenticated.
func TestQueryAnswerTimeIsTheEnvelopes(t *testing.T) {
	kit := querytest.New(t)
	dec := queryDecoder(kit, &kit.Keys)
	tr := channelstest.NewTrade(channels.WeChat, 64)
	signed := channelstest.BaseTime.Add(time.Minute)
	for _, tc := range []struct {
		name  string
		delay time.Duration
		ok    bool
	}{
		{"received at once", 0, true},
		{"received 299 s later", 299 * time.Second, true},
		{"replayed 300 s later", 300 * time.Second, false},
		{"replayed a day later", 24 * time.Hour, false},
		{"received before it was signed", -300 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := decodeSigned(t, kit, dec, kit.WeChatPayment(t, tr, "SUCCESS", kit.Trusted, signed, signed.Add(tc.delay)))
			if tc.ok {
				require.NoError(t, err)
				assert.NotEmpty(t, res.Event.Key)
				return
			}
			requireKindOf(t, err, channels.KindUnauthenticated)
			assert.Contains(t, err.Error(), "Wechatpay-Timestamp")
			assert.Empty(t, res.Event.Key)
		})
	}
}

// TestQueryAnswersNeedBothSignatures: an answer without the statement
// signature, one signed by a key no entry trusts (WeChat, Alipay), an
// unsigned Alipay answer, and any WeChat or Alipay answer while no public
// keys are configured are unauthenticated, with nothing of the answer in
// the result; a Shouqianba answer, unsigned by its channel, needs the
// statement signature alone.
func TestQueryAnswersNeedBothSignatures(t *testing.T) {
	kit := querytest.New(t)
	at := channelstest.BaseTime.Add(time.Hour)
	wt := channelstest.NewTrade(channels.WeChat, 65)
	at2 := channelstest.NewTrade(channels.Alipay, 66)
	st := channelstest.NewTrade(channels.SQB, 67)
	good := []querytest.Answer{
		kit.WeChatPayment(t, wt, "SUCCESS", kit.Trusted, at, at),
		kit.AlipayPayment(t, at2, "TRADE_SUCCESS", kit.Trusted, at),
	}
	dec := queryDecoder(kit, &kit.Keys)
	for _, a := range good {
		_, err := decodeSigned(t, kit, dec, a)
		require.NoError(t, err, "the positive case, %s", a.Target.Channel)
	}

	t.Run("no statement signature", func(t *testing.T) {
		for _, a := range append(good, kit.SQBOrder(st, channels.QueryPayment, "", sqbOrder(t, st), at)) {
			_, err := dec.DecodeMessage(a.Value(t), "")
			requireKindOf(t, err, channels.KindUnauthenticated)
		}
	})
	t.Run("forged", func(t *testing.T) {
		for _, a := range []querytest.Answer{
			kit.WeChatPayment(t, wt, "SUCCESS", kit.Forger, at, at),
			kit.AlipayPayment(t, at2, "TRADE_SUCCESS", kit.Forger, at),
			kit.AlipayPayment(t, at2, "TRADE_SUCCESS", nil, at),
		} {
			res, err := decodeSigned(t, kit, dec, a)
			requireKindOf(t, err, channels.KindUnauthenticated)
			assert.Empty(t, res.Event.Key)
			assert.Equal(t, a.Target.TenantID, res.Event.TenantID, "tenant kept for the record")
		}
	})
	t.Run("a body edited after signing", func(t *testing.T) {
		a := good[0]
		a.Body = []byte(string(a.Body[:len(a.Body)-1]) + ` }`)
		_, err := decodeSigned(t, kit, dec, a)
		requireKindOf(t, err, channels.KindUnauthenticated)
	})
	t.Run("no keys configured", func(t *testing.T) {
		for _, d := range []*channels.Decoder{queryDecoder(kit, nil), queryDecoder(kit, &channels.ChannelPublicKeys{})} {
			for _, a := range good {
				_, err := decodeSigned(t, kit, d, a)
				requireKindOf(t, err, channels.KindUnauthenticated)
			}
			res, err := decodeSigned(t, kit, d, kit.SQBOrder(st, channels.QueryPayment, "", sqbOrder(t, st), at))
			require.NoError(t, err, "Shouqianba answers are unsigned: the statement signature is all there is")
			assert.Equal(t, sqb.Code, res.Event.Channel)
		}
	})
}

// TestQueryAnswersThatPostNothing: an answer that is not settled decodes
// to an ignored result that says why, carries the outcome for the
// pipeline, and names the merchant for its check.
func TestQueryAnswersThatPostNothing(t *testing.T) {
	kit := querytest.New(t)
	dec := queryDecoder(kit, &kit.Keys)
	at := channelstest.BaseTime.Add(time.Hour)
	tr := channelstest.NewTrade(channels.WeChat, 68)
	for state, want := range map[string]channels.QueryOutcome{
		"NOTPAY": channels.QueryPending, "CLOSED": channels.QueryClosed, "PAYERROR": channels.QueryUncertain,
	} {
		res, err := decodeSigned(t, kit, dec, kit.WeChatPayment(t, tr, state, kit.Trusted, at, at))
		require.NoError(t, err, state)
		assert.True(t, res.Ignored, state)
		assert.Contains(t, res.IgnoreReason, string(want))
		assert.Contains(t, res.IgnoreReason, state)
		assert.Empty(t, res.Event.Key)
		assert.Equal(t, want, res.Query.Answer.Outcome)
		assert.Equal(t, wechat.SampleMerchantID, res.MerchantID)
		assert.Equal(t, tr.MerchantOrderNo, res.Event.MerchantOrderNo)
	}
}

// TestQueryAnswerOfAChannelWithoutReader: a channel registered without
// ReadQueryAnswer (a test channel) cannot read answers: unsupported, which
// a later version may redrive, not unauthenticated: the statement
// signature vouched for the message.
func TestQueryAnswerOfAChannelWithoutReader(t *testing.T) {
	kit := querytest.New(t)
	spec, ok := channels.Lookup(channels.SQB)
	require.True(t, ok)
	spec.Code, spec.Name, spec.ReadQueryAnswer, spec.CancelRefundNo = "NOQUERY", "No query", nil, ""
	b, ok := channelstest.BodiesOf(channels.SQB)
	require.True(t, ok)
	channelstest.Register(t, spec, b)
	a := querytest.Answer{
		Target: channels.QueryTarget{
			TenantID: 1001, Channel: "NOQUERY", Kind: channels.QueryPayment, MerchantID: "M1", MerchantOrderNo: "O1",
		},
		Body: []byte(`{}`), ReceivedAt: channelstest.BaseTime,
	}
	_, err := decodeSigned(t, kit, queryDecoder(kit, &kit.Keys), a)
	requireKindOf(t, err, channels.KindUnsupported)
}
