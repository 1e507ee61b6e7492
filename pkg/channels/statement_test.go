package channels_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// publishedAt is when the statement events of these tests are published.
var publishedAt = time.Date(2024, 6, 2, 10, 30, 0, 0, channelstest.Beijing)

// fromStatement rebuilds ev the way a statement line describes it: the
// identifiers and amounts, the statement's own time (not the callback's)
// and status, nothing else of the callback.
func fromStatement(t *testing.T, ev channels.Event) channels.Event {
	t.Helper()
	rebuilt, err := channels.NewStatementEvent(channels.Event{
		TenantID: ev.TenantID, Channel: ev.Channel, Type: ev.Type, TradeNo: ev.TradeNo,
		MerchantOrderNo: ev.MerchantOrderNo, RefundNo: ev.RefundNo, OrderTotal: ev.OrderTotal,
		RefundAmount: ev.RefundAmount, OccurredAt: ev.OccurredAt.Add(-3 * time.Second).In(channelstest.Beijing),
		ReceivedAt: publishedAt, RawStatus: "SUCCESS",
	})
	require.NoError(t, err)
	return rebuilt
}

// statementValue is the Kafka value publishing ev gives.
func statementValue(t *testing.T, ev channels.Event) []byte {
	t.Helper()
	v, err := channels.StatementEnvelope(ev, publishedAt)
	require.NoError(t, err)
	return v
}

// TestStatementEventHasTheCallbacksKeyAndFingerprint: for every event a
// statement describes exactly, the rebuilt event, and what the decoder
// reads from its envelope, carry the key and fingerprint the channel's
// callback decodes to, so the unique index sees a channel retry.
func TestStatementEventHasTheCallbacksKeyAndFingerprint(t *testing.T) {
	wechat := channelstest.NewTrade(channels.WeChat, 11)
	cases := []struct {
		name     string
		callback []byte
	}{
		{"wechat payment", channelstest.PaymentEnvelope(wechat, channelstest.Delivery{})},
		{"wechat partner-mode payment", channelstest.PaymentEnvelope(channelstest.NewTrade(channels.WeChat, 12), channelstest.Delivery{Partner: true})},
		{"wechat refund", channelstest.RefundEnvelope(wechat, channelstest.Refund{No: "RF-11-a", Amount: 800}, channelstest.Delivery{})},
		{"alipay payment", channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 13), channelstest.Delivery{})},
		{"alipay finished", channelstest.AlipayFinished(channelstest.NewTrade(channels.Alipay, 13), channelstest.Delivery{})},
		{"sqb payment", channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 14), channelstest.Delivery{})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cb := mustDecode(t, tc.callback).Event
			rebuilt := fromStatement(t, cb)
			assert.Equal(t, cb.Key, rebuilt.Key)
			assert.Equal(t, cb.Fingerprint, rebuilt.Fingerprint)

			value := statementValue(t, rebuilt)
			env, err := channels.ParseEnvelope(value)
			require.NoError(t, err)
			assert.Equal(t, channels.ContentTypeStatement, env.ContentType)
			assert.True(t, env.FromStatement())
			res := mustDecode(t, value)
			require.False(t, res.Ignored)
			assert.Equal(t, cb.Key, res.Event.Key)
			assert.Equal(t, cb.Fingerprint, res.Event.Fingerprint)
			assert.Equal(t, cb.Type, res.Event.Type)
			assert.Equal(t, rebuilt.OccurredAt, res.Event.OccurredAt, "the statement's time")
			assert.Equal(t, publishedAt.UTC(), res.Event.ReceivedAt, "the envelope's received_at")
			if cb.Type == eventkey.RefundSucceeded {
				assert.Equal(t, channels.RefundSuccess, res.RefundStatus)
			}
		})
	}
}

// TestNewStatementEventRefusesWhatAStatementCannotRebuild: a refund of a
// cumulative channel, and events that do not validate.
func TestNewStatementEventRefusesWhatAStatementCannotRebuild(t *testing.T) {
	at := channelstest.BaseTime
	base := channels.Event{
		TenantID: 1001, Channel: channels.WeChat, Type: eventkey.PaymentReceived, TradeNo: "4200002211",
		MerchantOrderNo: "POS-1", OrderTotal: 2580, OccurredAt: at, ReceivedAt: at,
	}
	cases := []struct {
		name string
		edit func(*channels.Event)
		want channels.ErrorKind
	}{
		{"alipay refund", func(e *channels.Event) {
			e.Channel, e.Type, e.RefundNo, e.CumulativeRefunded = channels.Alipay, eventkey.RefundSucceeded, "RF-1", 100
		}, channels.KindUnsupported},
		{"sqb refund", func(e *channels.Event) {
			e.Channel, e.Type, e.RefundNo, e.RefundAmount = channels.SQB, eventkey.RefundSucceeded, "RF-1", 100
		}, channels.KindUnsupported},
		{"no type", func(e *channels.Event) { e.Type = "" }, channels.KindMalformed},
		{"unknown channel", func(e *channels.Event) { e.Channel = "PAYPAL" }, channels.KindMalformed},
		{"no tenant", func(e *channels.Event) { e.TenantID = 0 }, channels.KindMalformed},
		{"no merchant order", func(e *channels.Event) { e.MerchantOrderNo = "" }, channels.KindMalformed},
		{"trade number with a space", func(e *channels.Event) { e.TradeNo = "4200 2211" }, channels.KindMalformed},
		{"zero total", func(e *channels.Event) { e.OrderTotal = 0 }, channels.KindInvalidAmount},
		{"total over the cap", func(e *channels.Event) { e.OrderTotal = channels.MaxAmount + 1 }, channels.KindInvalidAmount},
		{"wechat refund without amount", func(e *channels.Event) {
			e.Type, e.RefundNo = eventkey.RefundSucceeded, "RF-1"
		}, channels.KindInvalidAmount},
		{"wechat refund without refund number", func(e *channels.Event) {
			e.Type, e.RefundAmount = eventkey.RefundSucceeded, 100
		}, channels.KindMalformed},
		{"payment with a refund amount", func(e *channels.Event) { e.RefundAmount = 5 }, channels.KindMalformed},
		{"no time", func(e *channels.Event) { e.OccurredAt = time.Time{} }, channels.KindMalformed},
		{"raw status with a newline", func(e *channels.Event) { e.RawStatus = "SUCCESS\n" }, channels.KindMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := base
			tc.edit(&ev)
			_, err := channels.NewStatementEvent(ev)
			require.Error(t, err)
			kind, ok := channels.KindOf(err)
			require.True(t, ok, "untyped error %v", err)
			assert.Equal(t, tc.want, kind, "%v", err)
		})
	}
	ok, err := channels.NewStatementEvent(base)
	require.NoError(t, err)
	assert.Equal(t, eventkey.Key("WECHAT:4200002211:PAYMENT_RECEIVED"), ok.Key)
	assert.Equal(t, time.UTC, ok.OccurredAt.Location())
}

// TestStatementEnvelopeIsCheckedLikeAnyInput: a statement envelope whose
// event disagrees with the envelope, with itself or with the bounds every
// callback is held to is dead-lettered with its reason.
func TestStatementEnvelopeIsCheckedLikeAnyInput(t *testing.T) {
	tr := channelstest.NewTrade(channels.WeChat, 21)
	good := fromStatement(t, mustDecode(t, channelstest.RefundEnvelope(tr, channelstest.Refund{No: "RF-21", Amount: 500}, channelstest.Delivery{})).Event)
	// body edits the event's JSON as a map, then wraps it.
	body := func(edit func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good.AppendJSON(nil), &m))
		edit(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return channelstest.EnvelopeWith(channels.Envelope{
			TenantID: good.TenantID, Channel: string(good.Channel), ReceivedAt: publishedAt,
			ContentType: channels.ContentTypeStatement, Body: string(b),
		})
	}
	raw := func(tenant int64, ch channels.Channel, b string) []byte {
		return channelstest.EnvelopeWith(channels.Envelope{
			TenantID: tenant, Channel: string(ch), ReceivedAt: publishedAt, ContentType: channels.ContentTypeStatement, Body: b,
		})
	}
	goodBody := string(good.AppendJSON(nil))
	alipay := fromStatement(t, mustDecode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 22), channelstest.Delivery{})).Event)
	alipayRefund := alipay
	alipayRefund.Type, alipayRefund.RefundNo, alipayRefund.CumulativeRefunded = eventkey.RefundSucceeded, "RF-22", 100
	alipayRefund.Key = eventkey.Key("ALIPAY:" + alipay.TradeNo + ":REFUND_SUCCEEDED:RF-22")
	alipayRefund.Fingerprint = channels.Fingerprint(alipayRefund)

	cases := []struct {
		name  string
		value []byte
		want  channels.ErrorKind
	}{
		{"the event as built", raw(good.TenantID, good.Channel, goodBody), ""},
		{"another tenant's event", raw(1002, good.Channel, goodBody), channels.KindMalformed},
		{"another channel's event", raw(good.TenantID, channels.SQB, goodBody), channels.KindMalformed},
		{"not JSON", raw(good.TenantID, good.Channel, "refund_no=RF-21"), channels.KindMalformed},
		{"trailing data", raw(good.TenantID, good.Channel, goodBody+"{}"), channels.KindMalformed},
		{"a callback body under the statement type", raw(tr.TenantID, channels.SQB, sqbDocPayment), channels.KindMalformed},
		{"fingerprint of other fields", body(func(m map[string]any) { m["refund_amount"] = 501 }), channels.KindMalformed},
		{"no fingerprint", body(func(m map[string]any) { delete(m, "fingerprint") }), channels.KindMalformed},
		{"key of another refund", body(func(m map[string]any) { m["refund_no"] = "RF-22" }), channels.KindMalformed},
		{"negative amount", body(func(m map[string]any) { m["refund_amount"] = -500 }), channels.KindInvalidAmount},
		{"amount over the cap", body(func(m map[string]any) { m["order_total"] = channels.MaxAmount + 1 }), channels.KindInvalidAmount},
		{"fractional amount", body(func(m map[string]any) { m["order_total"] = 25.8 }), channels.KindInvalidAmount},
		{"amount as a string", body(func(m map[string]any) { m["refund_amount"] = "500" }), channels.KindInvalidAmount},
		{"another currency", body(func(m map[string]any) { m["currency"] = "USD" }), channels.KindMalformed},
		{"no time", body(func(m map[string]any) { delete(m, "occurred_at") }), channels.KindMalformed},
		{"time after 2100", body(func(m map[string]any) { m["occurred_at"] = "2100-01-01T00:00:00Z" }), channels.KindMalformed},
		{"unknown type", body(func(m map[string]any) { m["type"] = "REFUND_ABNORMAL" }), channels.KindMalformed},
		{"an identifier too long", body(func(m map[string]any) { m["merchant_order_no"] = strings.Repeat("P", channels.MaxIDLen+1) }), channels.KindMalformed},
		{"a bound merchant, which only the worker's check sets", body(func(m map[string]any) { m["bound_merchant"] = "1230000109" }), channels.KindMalformed},
		{"a cumulative channel's refund", raw(alipayRefund.TenantID, channels.Alipay, string(alipayRefund.AppendJSON(nil))), channels.KindUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				res := mustDecode(t, tc.value)
				assert.Equal(t, good.Key, res.Event.Key)
				return
			}
			mustFail(t, tc.value, tc.want)
			res, err := testDecoder().Decode(tc.value)
			require.Error(t, err)
			assert.Empty(t, res.Event.Key, "nothing to claim")
		})
	}

	// An instance that does not accept the channel refuses its statement
	// events as it refuses its callbacks.
	wechatOnly := channels.NewDecoder(channelstest.Keys(), channels.Accept("PAYCB_CHANNELS", channels.WeChat))
	_, err := wechatOnly.Decode(statementValue(t, alipay))
	kind, _ := channels.KindOf(err)
	assert.Equal(t, channels.KindUnknownChannel, kind, "%v", err)
	_, err = channels.StatementEnvelope(alipayRefund, publishedAt)
	kind, _ = channels.KindOf(err)
	assert.Equal(t, channels.KindUnsupported, kind, "%v", err)
}
