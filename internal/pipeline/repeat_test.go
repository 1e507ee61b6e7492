package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// TestARepeatedMemberIsDeadLetteredMalformed: a callback that names a
// member twice (a Shouqianba total_amount then TOTAL_AMOUNT, an envelope
// with two tenant_id or two body members) is dead-lettered malformed and
// posts nothing: the payment as the receiver checked it then claims and
// settles as new, where a posting of the last total_amount would have made
// it a conflict.
func TestARepeatedMemberIsDeadLetteredMalformed(t *testing.T) {
	e := newPipelineEnv(t)
	tr := channelstest.NewTrade(channels.SQB, 1)
	payment := channelstest.PaymentEnvelope(tr, channelstest.Delivery{})
	env, err := channels.ParseEnvelope(payment)
	require.NoError(t, err)
	withBody := func(body string) []byte {
		e := env
		e.Body = body
		return channelstest.EnvelopeWith(e)
	}
	values := [][]byte{
		withBody(channelstest.WithMembers(env.Body, `"TOTAL_AMOUNT":"999900"`)),
		withBody(channelstest.WithMembers(env.Body, `"total_amount":"999900"`)),
		[]byte(channelstest.WithMembers(string(payment), `"tenant_id":1002`)),
		[]byte(channelstest.WithMembers(string(payment), `"Body":"{}"`)),
	}
	e.handle(t, values...)
	var want []deadLetterAt
	for i := range values {
		want = append(want, deadLetterAt{int64(i), channels.KindMalformed})
	}
	require.Equal(t, want, e.dl.letters())

	e.handle(t, payment)
	require.Len(t, e.dl.letters(), len(values), "the payment as checked is no conflict")
	ev := e.decode(t, payment)
	require.Equal(t, tr.Total, ev.OrderTotal)
	rec := e.claim(t, ev)
	require.Equal(t, ev.Fingerprint, rec.Fingerprint, "claimed with the amount the receiver checked")
	require.Equal(t, idempotent.StatusSettled, rec.Status)
}
