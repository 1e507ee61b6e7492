package pipeline

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// statementMessage is a statement event of tr's payment at offset, signed
// with keys when they are given.
func statementMessage(t *testing.T, tr channelstest.Trade, offset int64, keys *statementauth.Keys) (kafka.Message, channels.Event) {
	t.Helper()
	ev, value := channelstest.StatementPayment(tr)
	msg := kafka.Message{Topic: "channel-events", Offset: offset, Value: value}
	if keys != nil {
		sig, err := keys.Sign(value)
		require.NoError(t, err)
		msg.Headers = []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}}
	}
	return msg, ev
}

// TestStatementEventsNeedTheirSignature: in a batch of many and in batches
// of one, the pipeline claims and settles a signed statement event and a
// callback, and dead-letters an unsigned statement event and one signed
// with another secret as unauthenticated, claiming nothing for them.
func TestStatementEventsNeedTheirSignature(t *testing.T) {
	keys, err := statementauth.Parse([]byte("k1=0123456789abcdef0123456789abcdef\n"))
	require.NoError(t, err)
	other, err := statementauth.Parse([]byte("k1=fedcba9876543210fedcba9876543210\n"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		batch bool
	}{{"one batch", true}, {"batches of one", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPipelineEnv(t)
			e.p.Decoder = channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(keys))
			signed, signedEv := statementMessage(t, channelstest.NewTrade(channels.WeChat, 41), 0, &keys)
			unsigned, unsignedEv := statementMessage(t, channelstest.NewTrade(channels.Alipay, 42), 1, nil)
			forged, forgedEv := statementMessage(t, channelstest.NewTrade(channels.SQB, 43), 2, &other)
			cbTrade := channelstest.NewTrade(channels.WeChat, 44)
			callback := kafka.Message{Topic: "channel-events", Offset: 3, Value: channelstest.PaymentEnvelope(cbTrade, channelstest.Delivery{})}
			msgs := []kafka.Message{signed, unsigned, forged, callback}
			if tc.batch {
				states := make([]MessageState, len(msgs))
				require.NoError(t, e.p.Handle(context.Background(), msgs, states))
			} else {
				for _, m := range msgs {
					require.NoError(t, e.p.Handle(context.Background(), []kafka.Message{m}, make([]MessageState, 1)))
				}
			}
			assert.Equal(t, []deadLetterAt{{1, channels.KindUnauthenticated}, {2, channels.KindUnauthenticated}}, e.dl.letters())
			for _, ev := range []channels.Event{unsignedEv, forgedEv} {
				_, err := e.claims.Get(context.Background(), ev.TenantID, ev.Key)
				require.Error(t, err, "%s: nothing claimed", ev.Key)
			}
			for _, ev := range []channels.Event{signedEv, e.decode(t, callback.Value)} {
				assert.Equal(t, "SETTLED", string(e.claim(t, ev).Status), "%s settled", ev.Key)
			}
		})
	}
}
