package channels_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// oneSignature accepts exactly one signature of exactly one value: the pure
// logic of DecodeMessage's check, without the key file (statementauth has
// its own tests, and the worker's go end to end).
type oneSignature struct {
	value     string
	signature string
	calls     int
}

func (v *oneSignature) Verify(value []byte, signature string) error {
	v.calls++
	if string(value) != v.value || signature != v.signature {
		return errors.New("signature does not match the message")
	}
	return nil
}

// TestDecodeMessageAuthenticatesStatementEventsFirst: a statement event
// decodes with the signature its value was given, and is unauthenticated
// without it, before its body is read (a body that would be malformed is
// still unauthenticated); without a verifier every statement event is
// unauthenticated, and callbacks never consult one.
func TestDecodeMessageAuthenticatesStatementEventsFirst(t *testing.T) {
	tr := channelstest.NewTrade(channels.WeChat, 31)
	ev := fromStatement(t, mustDecode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})).Event)
	value := statementValue(t, ev)
	badBody := channelstest.EnvelopeWith(channels.Envelope{
		TenantID: ev.TenantID, Channel: string(ev.Channel), ReceivedAt: publishedAt,
		ContentType: channels.ContentTypeStatement, Body: "not the event",
	})
	v := &oneSignature{value: string(value), signature: "k1:good"}
	dec := channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(v))

	res, err := dec.DecodeMessage(value, "k1:good")
	require.NoError(t, err, "the positive case: a signed statement event decodes")
	assert.Equal(t, ev.Key, res.Event.Key)
	assert.Equal(t, ev.Fingerprint, res.Event.Fingerprint)

	for _, tc := range []struct {
		name, signature string
		value           []byte
	}{
		{"unsigned", "", value},
		{"another signature", "k1:other", value},
		{"a malformed body, unsigned", "", badBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := dec.DecodeMessage(tc.value, tc.signature)
			require.Error(t, err)
			kind, _ := channels.KindOf(err)
			assert.Equal(t, channels.KindUnauthenticated, kind)
			assert.Contains(t, err.Error(), "statement event")
			assert.Equal(t, ev.TenantID, res.Event.TenantID, "tenant kept for the record")
			assert.Equal(t, ev.Channel, res.Event.Channel)
			assert.Empty(t, res.Event.Key, "nothing of the body")
		})
	}

	t.Run("no verifier", func(t *testing.T) {
		_, err := channels.NewDecoder(channelstest.Keys()).DecodeMessage(value, "k1:good")
		kind, _ := channels.KindOf(err)
		assert.Equal(t, channels.KindUnauthenticated, kind)
	})

	t.Run("callbacks never consult the verifier", func(t *testing.T) {
		before := v.calls
		for _, cb := range [][]byte{
			channelstest.PaymentEnvelope(tr, channelstest.Delivery{}),
			channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 32), channelstest.Delivery{}),
			channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 33), channelstest.Delivery{}),
		} {
			want := mustDecode(t, cb)
			got, err := channels.NewDecoder(channelstest.Keys()).DecodeMessage(cb, "")
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
		assert.Equal(t, before, v.calls)
	})
	assert.True(t, channels.KindUnauthenticated.Valid())
}
