package deadletters_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// TestDeadLettersThroughTheWorker follows dead letters through the real
// worker: a WeChat payment without a key (no_key), a conflicting Alipay
// payment (conflict) and a malformed message are dead-lettered once; a
// replay of the whole topic writes none again; once the key is configured
// and the no_key dead letter redriven by its position, it is resolved while
// the conflict stays open until an operator closes it with a note.
func TestDeadLettersThroughTheWorker(t *testing.T) {
	ctx := context.Background()
	k, group := mustKafkaAndGroup(t, 2)
	cfg, db := migratedWorker(t, group)
	// A key for another tenant only: the WeChat payment has none (no_key).
	cfg.WeChat.APIv3Key = ""
	cfg.WeChat.APIv3Keys = map[int64]config.Keys{999_999: {config.Secret(channelstest.APIv3Key)}}
	require.NoError(t, cfg.ValidateFor("run", app.FileChecks()))

	wechat := channelstest.NewTrade(channels.WeChat, 1)
	alipay := channelstest.NewTrade(channels.Alipay, 2)
	conflicting := alipay
	conflicting.Total = alipay.Total + 100
	require.NoError(t, kafkaops.Produce(ctx, k.Brokers, k.Topic, []kafkaops.Message{
		{Key: []byte("WECHAT:" + wechat.TradeNo), Value: channelstest.PaymentEnvelope(wechat, channelstest.Delivery{})},
		{Key: []byte("ALIPAY:" + alipay.TradeNo), Value: channelstest.PaymentEnvelope(alipay, channelstest.Delivery{})},
		{Key: []byte("ALIPAY:" + alipay.TradeNo), Value: channelstest.PaymentEnvelope(conflicting, channelstest.Delivery{})},
		{Key: []byte("junk"), Value: []byte("not an envelope")},
	}))
	waitConsumed := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		require.NoError(t, kafkaops.WaitConsumed(wctx, k.Brokers, group.Group, k.Topic, 50*time.Millisecond, nil))
	}
	groupEmpty := func() {
		t.Helper()
		eventually(t, 20*time.Second, "the group to be empty", func() bool {
			st, err := group.DescribeGroup(ctx)
			return err == nil && len(st.Members) == 0
		})
	}
	// The operator's decoder has the key: the one configured since.
	dec := channels.NewDecoder(channelstest.Keys())
	byKind := func() map[string]deadletters.State {
		t.Helper()
		ds, err := deadletters.ReadTopic(ctx, k, deadletters.Filter{})
		require.NoError(t, err)
		states, err := deadletters.States(ctx, db, dec, ds)
		require.NoError(t, err)
		out := map[string]deadletters.State{}
		for _, st := range states {
			out[st.Message.Kind] = st
		}
		require.Len(t, out, len(states), "one dead letter per kind")
		return out
	}

	stop := runWorker(t, cfg)
	waitConsumed()
	stop()
	first := byKind()
	require.Len(t, first, 3)
	for kind, st := range first {
		assert.Equal(t, deadletters.StatusOpen, st.Status, kind)
		require.NotNil(t, st.Record, "%s is recorded", kind)
	}
	assert.Equal(t, wechat.TenantID, first["no_key"].Record.TenantID, "the envelope decoded that far")
	assert.Equal(t, "WECHAT", first["no_key"].Record.Channel)
	assert.Empty(t, first["no_key"].Record.Key, "the body did not decode")
	assert.NotEmpty(t, first["no_key"].Key, "the operator's decoder, with the key, finds the event's key")
	assert.Equal(t, alipay.TradeNo, first["conflict"].Record.TradeNo)
	assert.NotEmpty(t, first["conflict"].Record.Fingerprint)

	// A replay of everything, still without the key: no dead letter again.
	groupEmpty()
	plan, err := ops.PlanReplay(ctx, group, ops.ReplayTarget{Earliest: true})
	require.NoError(t, err)
	require.Equal(t, int64(4), plan.TotalReplay())
	require.NoError(t, ops.ApplyReplay(ctx, group, plan))
	stop = runWorker(t, cfg)
	waitConsumed()
	second := outcomes(t, stop())
	assert.InDelta(t, 3, second["dead_lettered"]+second["conflict"], 0, "the replayed messages are judged again")
	ds, err := deadletters.ReadTopic(ctx, k, deadletters.Filter{})
	require.NoError(t, err)
	assert.Len(t, ds, 3, "the replay wrote no dead letter")

	// The key configured, the no_key dead letter redriven by its position.
	groupEmpty()
	cfg.WeChat.APIv3Key = config.Secret(channelstest.APIv3Key)
	stop = runWorker(t, cfg)
	nokey := first["no_key"].Message
	d, err := deadletters.ReadAt(ctx, k, deadletters.At{Partition: nokey.Partition, Offset: nokey.Offset})
	require.NoError(t, err)
	require.Equal(t, "no_key", d.Kind)
	require.NoError(t, deadletters.Redrive(ctx, k, []deadletters.Message{d}))
	waitConsumed()
	stop()
	third := byKind()
	assert.Equal(t, deadletters.StatusResolved, third["no_key"].Status)
	assert.Equal(t, "POSTED", third["no_key"].Outcome)
	assert.Equal(t, deadletters.StatusOpen, third["conflict"].Status, "a conflict stays open until closed")
	assert.Equal(t, deadletters.StatusOpen, third["malformed"].Status)

	conflict := third["conflict"].Message
	_, _, err = deadletters.CloseMessage(ctx, db, dec, conflict, "ops@host", " ")
	require.ErrorIs(t, err, deadletters.ErrEmptyNote)
	rec, changed, err := deadletters.CloseMessage(ctx, db, dec, conflict, "ops@host", "merchant confirmed the first amount")
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "merchant confirmed the first amount", rec.CloseNote)
	_, changed, err = deadletters.CloseMessage(ctx, db, dec, conflict, "other@host", "again")
	require.NoError(t, err)
	assert.False(t, changed, "already closed")
	fourth := byKind()
	assert.Equal(t, deadletters.StatusClosed, fourth["conflict"].Status)
	assert.Equal(t, "ops@host", fourth["conflict"].Record.ClosedBy)
	assert.Equal(t, "merchant confirmed the first amount", fourth["conflict"].Record.CloseNote)
}

// TestViewDeadLetterDecryptsOnlyWhenAsked: a WeChat dead letter's resource
// shows its algorithm, nonce and associated data, never its plaintext (the
// payer's openid) unless decryption is asked for.
func TestViewDeadLetterDecryptsOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 1)
	tr := channelstest.NewTrade(channels.WeChat, 5)
	value := channelstest.PaymentEnvelope(tr, channelstest.Delivery{})
	writeDeadLetter(t, k, "channel-events", 0, 17, []byte("WECHAT:"+tr.TradeNo), value, channels.KindNoKey)

	_, err := deadletters.ReadAt(ctx, k, deadletters.At{Partition: 0, Offset: 1})
	require.ErrorIs(t, err, deadletters.ErrNoDeadLetter)
	_, err = deadletters.ReadAt(ctx, k, deadletters.At{Partition: 3, Offset: 0})
	require.ErrorIs(t, err, deadletters.ErrNoDeadLetter)
	d, err := deadletters.ReadAt(ctx, k, deadletters.At{Partition: 0, Offset: 0})
	require.NoError(t, err)
	assert.Equal(t, "channel-events/0@17", d.Source)

	plain := deadletters.ViewOf(k.DLQTopic, d, nil, nil)
	js, err := json.Marshal(plain)
	require.NoError(t, err)
	assert.NotContains(t, string(js), "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", "no openid without decryption")
	assert.NotContains(t, string(js), "decrypted")
	require.NotNil(t, plain.Envelope)
	assert.Equal(t, tr.TenantID, plain.Envelope.TenantID)
	assert.Equal(t, "WECHAT", plain.Envelope.Channel)
	assert.True(t, plain.Envelope.Valid)
	require.NotNil(t, plain.Resource)
	assert.Equal(t, wechat.Algorithm, plain.Resource.Algorithm)
	assert.Len(t, plain.Resource.Nonce, 12)
	assert.Equal(t, "transaction", plain.Resource.AssociatedData)
	assert.Equal(t, "no_key", plain.Kind)
	assert.Contains(t, headerKeys(plain), "x-source-offset")

	open := deadletters.ViewOf(k.DLQTopic, d, nil, channelstest.Keys())
	require.NotNil(t, open.Resource)
	assert.Empty(t, open.Resource.DecryptError)
	assert.Contains(t, string(open.Resource.Decrypted), "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o")
	assert.Contains(t, string(open.Resource.Decrypted), tr.TradeNo)

	wrong := deadletters.ViewOf(k.DLQTopic, d, nil, channels.StaticKeys{Default: "fedcba9876543210fedcba9876543210"})
	assert.Empty(t, wrong.Resource.Decrypted)
	assert.NotEmpty(t, wrong.Resource.DecryptError)
}

func headerKeys(v deadletters.View) []string {
	var out []string
	for _, h := range v.Headers {
		out = append(out, h.Key)
	}
	return out
}

// writeDeadLetter writes the dead letter of kind for the message at
// topic/partition@offset with the worker's writer.
func writeDeadLetter(t *testing.T, k kafkaops.Kafka, topic string, partition int, offset int64, key, value []byte, kind channels.ErrorKind) {
	t.Helper()
	dl := deadletters.NewKafkaWriter(k.Brokers, k.DLQTopic, 0)
	defer func() { _ = dl.Close() }()
	msg := kafka.Message{Topic: topic, Partition: partition, Offset: offset, Key: key, Value: value}
	require.NoError(t, dl.DeadLetter(context.Background(), msg, kind, "because"))
}
