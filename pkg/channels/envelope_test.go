package channels_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

func TestEnvelopeValidation(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123e6, channelstest.Beijing)
	base := channels.Envelope{TenantID: 1001, Channel: "SQB", ReceivedAt: at, ContentType: "application/json", Body: sqbDocPayment}
	with := func(f func(*channels.Envelope)) []byte {
		e := base
		f(&e)
		return channelstest.EnvelopeWith(e)
	}
	tests := []struct {
		name  string
		value []byte
		want  channels.ErrorKind
	}{
		{"valid", with(func(*channels.Envelope) {}), ""},
		{"content type with charset", with(func(e *channels.Envelope) { e.ContentType = "Application/JSON; charset=UTF-8" }), ""},
		{"zero tenant", with(func(e *channels.Envelope) { e.TenantID = 0 }), channels.KindMalformed},
		{"negative tenant", with(func(e *channels.Envelope) { e.TenantID = -5 }), channels.KindMalformed},
		{"unknown channel", with(func(e *channels.Envelope) { e.Channel = "UNIONPAY" }), channels.KindUnknownChannel},
		{"lower-case channel", with(func(e *channels.Envelope) { e.Channel = "sqb" }), channels.KindUnknownChannel},
		{"no channel", with(func(e *channels.Envelope) { e.Channel = "" }), channels.KindMalformed},
		{"empty body", with(func(e *channels.Envelope) { e.Body = "" }), channels.KindMalformed},
		{"no received_at", with(func(e *channels.Envelope) { e.ReceivedAt = time.Time{} }), channels.KindMalformed},
		{"form content type for JSON channel", with(func(e *channels.Envelope) { e.ContentType = channels.ContentTypeForm }), channels.KindMalformed},
		{"JSON content type for Alipay", with(func(e *channels.Envelope) { e.Channel = "ALIPAY" }), channels.KindMalformed},
		{"no content type", with(func(e *channels.Envelope) { e.ContentType = "" }), channels.KindMalformed},
		{"over the size cap", with(func(e *channels.Envelope) { e.Body = strings.Repeat("x", channels.MaxEnvelopeBytes) }), channels.KindMalformed},
		{"not JSON", []byte("tenant_id=1001"), channels.KindMalformed},
		{"tenant as string", []byte(`{"tenant_id":"1001","channel":"SQB","received_at":"2026-12-02T10:00:00.123+08:00","content_type":"application/json","body":"{}"}`), channels.KindMalformed},
		{"tenant as float", []byte(`{"tenant_id":1001.5,"channel":"SQB","received_at":"2026-12-02T10:00:00.123+08:00","content_type":"application/json","body":"{}"}`), channels.KindMalformed},
		{"received_at not RFC 3339", []byte(`{"tenant_id":1001,"channel":"SQB","received_at":"2026-12-02 10:00:00","content_type":"application/json","body":"{}"}`), channels.KindMalformed},
		{"received_at before 2000", []byte(`{"tenant_id":1001,"channel":"SQB","received_at":"0000-01-01T00:00:00+08:00","content_type":"application/json","body":"{}"}`), channels.KindMalformed},
		{"JSON null", []byte("null"), channels.KindMalformed},
		{"empty value", nil, channels.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" {
				env, err := channels.ParseEnvelope(tt.value)
				require.NoError(t, err)
				require.Equal(t, time.Date(2026, 12, 2, 2, 0, 0, 123e6, time.UTC), env.ReceivedAt)
				require.Equal(t, time.UTC, env.ReceivedAt.Location())
				res := mustDecode(t, tt.value)
				require.Equal(t, env.ReceivedAt, res.Event.ReceivedAt)
				return
			}
			mustFail(t, tt.value, tt.want)
		})
	}
}

func TestUnknownChannelKeepsTenantOnly(t *testing.T) {
	v := channelstest.EnvelopeWith(channels.Envelope{TenantID: 7, Channel: "PAYPAL", ReceivedAt: time.Now(), ContentType: "application/json", Body: "{}"})
	res, err := testDecoder().Decode(v)
	kind, _ := channels.KindOf(err)
	require.Equal(t, channels.KindUnknownChannel, kind)
	require.Equal(t, int64(7), res.Event.TenantID)
	require.Empty(t, res.Event.Channel)
}

func TestDecodeEnvelope(t *testing.T) {
	env := channels.Envelope{
		TenantID: 1001, Channel: "ALIPAY", ContentType: channels.ContentTypeForm, Body: alipayRealPayment,
		ReceivedAt: time.Date(2023, 5, 29, 15, 28, 54, 0, channelstest.Beijing),
	}
	res, err := testDecoder().DecodeEnvelope(env)
	require.NoError(t, err)
	checkResult(t, res, nil)
	require.Equal(t, time.Date(2023, 5, 29, 7, 28, 54, 0, time.UTC), res.Event.ReceivedAt)

	env.TenantID = 0
	_, err = testDecoder().DecodeEnvelope(env)
	kind, _ := channels.KindOf(err)
	require.Equal(t, channels.KindMalformed, kind)
}
