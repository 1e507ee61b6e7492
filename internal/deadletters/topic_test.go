package deadletters_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
)

func TestDeadLettersListAndRedrive(t *testing.T) {
	ctx := context.Background()
	k, cluster := mustCluster(t, 2)
	// A dead letter from three days ago that retention removes: the topic's
	// first retained offset is then 1, not 0.
	produceAt(t, k, testDLQ, 0, 1, time.Now().Add(-72*time.Hour))
	_, err := (&kafka.Client{Addr: kafka.TCP(k.Brokers...)}).AlterConfigs(ctx, &kafka.AlterConfigsRequest{
		Resources: []kafka.AlterConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: testDLQ,
			Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: "86400000"}},
		}},
	})
	require.NoError(t, err)
	cluster.ApplyRetention()
	first, err := (&kafka.Client{Addr: kafka.TCP(k.Brokers...)}).ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{testDLQ: {kafka.FirstOffsetOf(0)}},
	})
	require.NoError(t, err)
	// kafka-go files an earliest-offset answer by the timestamp the broker
	// returns: under FirstOffset from kfake, under LastOffset from Kafka.
	po := first.Topics[testDLQ][0]
	require.Equal(t, int64(1), max(po.FirstOffset, po.LastOffset), "retention removed the old dead letter")

	dl := deadletters.NewKafkaWriter(k.Brokers, testDLQ, 0)
	t.Cleanup(func() { _ = dl.Close() })
	for i, c := range []struct {
		key, value string
		kind       channels.ErrorKind
	}{
		{"WECHAT:T1", `{"n":1}`, channels.KindNoKey},
		{"WECHAT:T2", `{"n":2}`, channels.KindNoKey},
		{"ALIPAY:T3", `not json`, channels.KindMalformed},
	} {
		msg := kafka.Message{Topic: testTopic, Partition: 1, Offset: int64(10 + i), Key: []byte(c.key), Value: []byte(c.value)}
		require.NoError(t, dl.DeadLetter(ctx, msg, c.kind, "because"))
	}

	tests := []struct {
		name   string
		filter deadletters.Filter
		want   int
	}{
		{"everything", deadletters.Filter{}, 3},
		{"one kind", deadletters.Filter{Kind: "no_key"}, 2},
		{"unknown kind", deadletters.Filter{Kind: "conflict"}, 0},
		{"since the past", deadletters.Filter{Since: time.Now().Add(-time.Hour)}, 3},
		{"since the future", deadletters.Filter{Since: time.Now().Add(time.Hour)}, 0},
		{"until the past", deadletters.Filter{Until: time.Now().Add(-time.Hour)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := deadletters.ReadTopic(ctx, k, tt.filter)
			require.NoError(t, err)
			assert.Len(t, ds, tt.want)
		})
	}

	all, err := deadletters.ReadTopic(ctx, k, deadletters.Filter{})
	require.NoError(t, err)
	sum := deadletters.Summarize(all)
	require.Len(t, sum, 2)
	assert.Equal(t, "no_key", sum[0].Kind)
	assert.Equal(t, 2, sum[0].Count)
	assert.Equal(t, "malformed", sum[1].Kind)
	assert.Equal(t, testTopic+"/1@12", all[2].Source)
	assert.Equal(t, "because", all[2].Error)

	noKey, err := deadletters.ReadTopic(ctx, k, deadletters.Filter{Kind: "no_key"})
	require.NoError(t, err)
	require.NoError(t, deadletters.Redrive(ctx, k, noKey))
	in, err := kafkaops.ReadAll(ctx, k.Brokers, testTopic)
	require.NoError(t, err)
	require.Len(t, in, 2)
	got := map[string]string{}
	for _, m := range in {
		got[string(m.Key)] = string(m.Value)
		require.Len(t, m.Headers, 1)
		assert.Equal(t, deadletters.HeaderRedrivenFrom, m.Headers[0].Key)
	}
	assert.Equal(t, map[string]string{"WECHAT:T1": `{"n":1}`, "WECHAT:T2": `{"n":2}`}, got, "original key and value, unchanged")
}

func TestRedriveRefusesADeadLetterWithoutItsValue(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 1)
	setMaxMessageBytes(t, k.Brokers, testDLQ, 64<<10)
	dl := deadletters.NewKafkaWriter(k.Brokers, testDLQ, 0)
	t.Cleanup(func() { _ = dl.Close() })
	big := kafka.Message{Topic: testTopic, Partition: 0, Offset: 41, Key: []byte("WECHAT:T-big"), Value: bytes.Repeat([]byte("v"), 200<<10)}
	small := kafka.Message{Topic: testTopic, Partition: 0, Offset: 42, Key: []byte("WECHAT:T-small"), Value: []byte(`{"n":1}`)}
	require.NoError(t, dl.DeadLetter(ctx, big, channels.KindNoKey, "no key"))
	require.NoError(t, dl.DeadLetter(ctx, small, channels.KindNoKey, "no key"))

	ds, err := deadletters.ReadTopic(ctx, k, deadletters.Filter{Kind: "no_key"})
	require.NoError(t, err)
	require.Len(t, ds, 2)
	assert.True(t, ds[0].ValueOmitted)
	assert.Equal(t, int64(200<<10), ds[0].OmittedBytes)
	assert.Empty(t, ds[0].Value)
	assert.False(t, ds[1].ValueOmitted)
	assert.Zero(t, ds[1].OmittedBytes)

	ok, refused := deadletters.SplitRedrive(ds)
	require.Len(t, ok, 1)
	assert.Equal(t, "WECHAT:T-small", string(ok[0].Key))
	require.Len(t, refused, 1)
	assert.Equal(t, "WECHAT:T-big", string(refused[0].Message.Key))
	require.ErrorIs(t, refused[0].Reason, deadletters.ErrValueOmitted)
	assert.Contains(t, refused[0].Reason.Error(), "204800 bytes")
	assert.Contains(t, refused[0].Reason.Error(), testTopic+"/0@41", "says where the original is")

	// Given the refused one, Redrive publishes nothing at all.
	err = deadletters.Redrive(ctx, k, ds)
	require.ErrorIs(t, err, deadletters.ErrValueOmitted)
	in, err := kafkaops.ReadAll(ctx, k.Brokers, testTopic)
	require.NoError(t, err)
	assert.Empty(t, in)

	require.NoError(t, deadletters.Redrive(ctx, k, ok))
	in, err = kafkaops.ReadAll(ctx, k.Brokers, testTopic)
	require.NoError(t, err)
	require.Len(t, in, 1)
	assert.Equal(t, `{"n":1}`, string(in[0].Value))
}

func TestLargeDeadLetterIsListedAndRedrivenWhole(t *testing.T) {
	ctx := context.Background()
	const limit = 3 << 20
	k := mustKafka(t, 1)
	setMaxMessageBytes(t, k.Brokers, testTopic, limit)
	setMaxMessageBytes(t, k.Brokers, testDLQ, limit)
	dl := deadletters.NewKafkaWriter(k.Brokers, testDLQ, 0, deadletters.WithMaxMessageBytes(limit))
	t.Cleanup(func() { _ = dl.Close() })
	value := bytes.Repeat([]byte("v"), 2<<20)
	msgs := []kafka.Message{
		{Topic: testTopic, Partition: 0, Offset: 5, Key: []byte("SQB:T-large"), Value: value},
		{Topic: testTopic, Partition: 0, Offset: 6, Key: []byte("SQB:T-small"), Value: []byte(`{}`)},
	}
	for _, m := range msgs {
		require.NoError(t, dl.DeadLetter(ctx, m, channels.KindNoKey, "no key"))
	}

	ds, err := deadletters.ReadTopic(ctx, k, deadletters.Filter{})
	require.NoError(t, err)
	require.Len(t, ds, 2)
	assert.False(t, ds[0].ValueOmitted)
	assert.True(t, bytes.Equal(value, ds[0].Value), "read %d bytes", len(ds[0].Value))

	require.NoError(t, deadletters.Redrive(ctx, k, ds))
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: testTopic, Partition: 0, MaxWait: 50 * time.Millisecond, MaxBytes: limit})
	t.Cleanup(func() { _ = r.Close() })
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got := map[string]int{}
	for range 2 {
		m, err := r.FetchMessage(rctx)
		require.NoError(t, err)
		got[string(m.Key)] = len(m.Value)
	}
	assert.Equal(t, map[string]int{"SQB:T-large": len(value), "SQB:T-small": 2}, got)
}
