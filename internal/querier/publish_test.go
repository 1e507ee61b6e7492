package querier_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
)

// TestTopicPublisherWritesASignedAnswerTheWorkerAccepts: on kfake, the
// answer lands keyed by the trade it proves, carrying the statement-key
// signature the worker's decoder checks first, the channel's answer bytes
// and the headers the channel's verification reads, and no other.
func TestTopicPublisherWritesASignedAnswerTheWorkerAccepts(t *testing.T) {
	ctx := context.Background()
	k := kafkaopstest.Start(t, map[string]int32{"channel-events": 3})
	topic := k.Name("channel-events")
	keys, err := statementauth.Parse([]byte("q1=0123456789abcdef0123456789abcdef\n"))
	require.NoError(t, err)
	pub := querier.TopicPublisher{
		Produce: func(ctx context.Context, msgs []kafkaops.Message) error {
			return kafkaops.Produce(ctx, k.Brokers, topic, msgs)
		},
		Keys:    func() statementauth.Keys { return keys },
		Headers: func(channels.Channel) []string { return []string{"Wechatpay-Signature", "Wechatpay-Serial"} },
	}
	target := channels.QueryTarget{TenantID: 1001, Channel: channels.WeChat, Kind: channels.QueryPayment, MerchantID: "1900000100", MerchantOrderNo: "P1"}
	h := http.Header{}
	h.Set("Wechatpay-Signature", "c2ln")
	h.Set("Wechatpay-Serial", "PUB_KEY_ID_1")
	h.Set("Date", "not carried")
	asked := time.Now().UTC().Truncate(time.Millisecond)
	resp := channels.QueryResponse{StatusCode: 200, Header: h, Body: []byte(`{"trade_state":"SUCCESS"}`), ReceivedAt: asked.Add(80 * time.Millisecond)}
	answer := channels.QueryAnswer{Outcome: channels.QuerySettled, Events: []channels.Event{{TradeNo: "4200000001"}}}
	require.NoError(t, pub.Publish(ctx, target, asked, resp, answer))

	msgs, err := kafkaops.ReadAll(ctx, k.Brokers, topic)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, "WECHAT:4200000001", string(m.Key), "keyed by the trade the answer proves, as its callback")
	require.Len(t, m.Headers, 1)
	assert.Equal(t, statementauth.HeaderSignature, m.Headers[0].Key)
	require.NoError(t, keys.Verify(m.Value, string(m.Headers[0].Value)))

	env, err := channels.ParseEnvelope(m.Value)
	require.NoError(t, err)
	msg, err := channels.ParseQueryMessage(env)
	require.NoError(t, err)
	got := msg.Response(env.ReceivedAt)
	assert.Equal(t, resp.Body, got.Body)
	assert.Equal(t, "c2ln", got.Header.Get("Wechatpay-Signature"))
	assert.Empty(t, got.Header.Get("Date"))
	assert.Equal(t, target, msg.Target(env.TenantID, channels.Channel(env.Channel)))

	none := pub
	none.Keys = func() statementauth.Keys { return statementauth.Keys{} }
	require.ErrorIs(t, none.Publish(ctx, target, asked, resp, answer), querier.ErrNothingToSign)
	msgs, err = kafkaops.ReadAll(ctx, k.Brokers, topic)
	require.NoError(t, err)
	assert.Len(t, msgs, 1, "nothing published without a key")
}
