package deadletters_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/pkg/channels"
)

const (
	dlTopic = "channel-events"
	dlDLQ   = dlTopic + ".dlq"
)

// mustSizedKafka starts an in-process broker with the input topic and the
// dead-letter topic, each accepting messages up to the given
// max.message.bytes.
func mustSizedKafka(t *testing.T, inputMax, dlqMax int) []string {
	t.Helper()
	cluster, brokers, err := inprocess.Start(map[string]int32{dlTopic: 1, dlDLQ: 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	setMaxMessageBytes(t, brokers, dlTopic, inputMax)
	setMaxMessageBytes(t, brokers, dlDLQ, dlqMax)
	return brokers
}

// setMaxMessageBytes sets topic's max.message.bytes.
func setMaxMessageBytes(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := client.AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{
		Resources: []kafka.AlterConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: strconv.Itoa(n)}},
		}},
	})
	require.NoError(t, err)
	for _, e := range res.Errors {
		require.NoError(t, e)
	}
}

// consumeOne produces value under key to the input topic and reads it back
// as the worker would, with a fetch limit of maxBytes: the message the
// input delivered.
func consumeOne(t *testing.T, brokers []string, key, value []byte, maxBytes int) kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: dlTopic, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, BatchBytes: int64(maxBytes),
	}
	require.NoError(t, w.WriteMessages(ctx, kafka.Message{Key: key, Value: value}))
	require.NoError(t, w.Close())
	return readOne(t, brokers, dlTopic, maxBytes)
}

// readOne reads the first message of partition 0 of topic.
func readOne(t *testing.T, brokers []string, topic string, maxBytes int) kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 50 * time.Millisecond, MaxBytes: maxBytes})
	defer func() { _ = r.Close() }()
	m, err := r.FetchMessage(ctx)
	require.NoError(t, err)
	return m
}

// endOffset is the next offset partition 0 of topic will be given.
func endOffset(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := client.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}},
	})
	require.NoError(t, err)
	require.Len(t, res.Topics[topic], 1)
	require.NoError(t, res.Topics[topic][0].Error)
	return res.Topics[topic][0].LastOffset
}

func headerMap(m kafka.Message) map[string]string {
	out := map[string]string{}
	for _, h := range m.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

func TestDeadLetterOfALargeMessageIsIntact(t *testing.T) {
	// The broker accepts 3 MiB messages on both topics; a 2 MiB message is
	// over kafka-go's default writer limit (1 MiB).
	const limit = 3 << 20
	brokers := mustSizedKafka(t, limit, limit)
	value := bytes.Repeat([]byte("v"), 2<<20)
	in := consumeOne(t, brokers, []byte("WECHAT:T-large"), value, limit)
	require.Len(t, in.Value, len(value), "the input delivered the whole message")

	dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 0, deadletters.WithMaxMessageBytes(limit))
	t.Cleanup(func() { _ = dl.Close() })
	require.NoError(t, dl.DeadLetter(context.Background(), in, channels.KindMalformed, "bad json"))

	out := readOne(t, brokers, dlDLQ, limit)
	assert.Equal(t, "WECHAT:T-large", string(out.Key))
	assert.True(t, bytes.Equal(value, out.Value), "the value is unchanged (%d bytes read)", len(out.Value))
	assert.Equal(t, map[string]string{
		deadletters.HeaderErrorKind:       "malformed",
		deadletters.HeaderError:           "bad json",
		deadletters.HeaderSourceTopic:     dlTopic,
		deadletters.HeaderSourcePartition: "0",
		deadletters.HeaderSourceOffset:    strconv.FormatInt(in.Offset, 10),
	}, headerMap(out))
}

func TestDeadLetterTooLargeForTheDeadLetterTopicOmitsTheValue(t *testing.T) {
	// The input accepts the default 1 MiB; the dead-letter topic only 64 KiB.
	brokers := mustSizedKafka(t, 1<<20, 64<<10)
	value := bytes.Repeat([]byte("v"), 200<<10)
	in := consumeOne(t, brokers, []byte("ALIPAY:T-omitted"), value, 1<<20)

	dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 0, deadletters.WithMaxMessageBytes(1<<20))
	t.Cleanup(func() { _ = dl.Close() })
	require.NoError(t, dl.DeadLetter(context.Background(), in, channels.KindUnsupported, "unknown event type"))

	require.Equal(t, int64(1), endOffset(t, brokers, dlDLQ), "one dead letter, written once")
	out := readOne(t, brokers, dlDLQ, 1<<20)
	assert.Equal(t, "ALIPAY:T-omitted", string(out.Key), "the original key")
	assert.Empty(t, out.Value)
	assert.Equal(t, map[string]string{
		deadletters.HeaderErrorKind:       "unsupported",
		deadletters.HeaderError:           "unknown event type",
		deadletters.HeaderSourceTopic:     dlTopic,
		deadletters.HeaderSourcePartition: "0",
		deadletters.HeaderSourceOffset:    strconv.FormatInt(in.Offset, 10),
		deadletters.HeaderValueOmitted:    "204800",
	}, headerMap(out))
}

func TestDeadLetterOverTheWritersOwnLimitOmitsTheValue(t *testing.T) {
	// A message larger than the input's limit as configured (a fetch returns
	// a first record larger than its limit): the writer refuses it itself.
	const limit = 3 << 20
	brokers := mustSizedKafka(t, limit, limit)
	msg := kafka.Message{Topic: dlTopic, Partition: 0, Offset: 7, Key: []byte("SQB:T-local"), Value: bytes.Repeat([]byte("v"), 2<<20)}

	dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 0, deadletters.WithMaxMessageBytes(1<<20))
	t.Cleanup(func() { _ = dl.Close() })
	require.NoError(t, dl.DeadLetter(context.Background(), msg, channels.KindMalformed, "bad json"))

	out := readOne(t, brokers, dlDLQ, limit)
	assert.Equal(t, "SQB:T-local", string(out.Key))
	assert.Empty(t, out.Value)
	assert.Equal(t, strconv.Itoa(2<<20), headerMap(out)[deadletters.HeaderValueOmitted])
	assert.Equal(t, "7", headerMap(out)[deadletters.HeaderSourceOffset])
}

func TestDeadLetterWhoseKeyAloneIsTooLargeFailsAndSaysSo(t *testing.T) {
	brokers := mustSizedKafka(t, 1<<20, 64<<10)
	msg := kafka.Message{Topic: dlTopic, Partition: 0, Offset: 3, Key: bytes.Repeat([]byte("k"), 100<<10), Value: []byte("{}")}

	dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 0, deadletters.WithMaxMessageBytes(1<<20))
	t.Cleanup(func() { _ = dl.Close() })
	err := dl.DeadLetter(context.Background(), msg, channels.KindMalformed, "bad json")
	require.ErrorIs(t, err, deadletters.ErrTooLarge)
	assert.Contains(t, err.Error(), "key of 102400 bytes")
	assert.Equal(t, int64(0), endOffset(t, brokers, dlDLQ), "nothing written")
}

func TestDeadLetterOtherErrorsAreReturnedAsTheyAre(t *testing.T) {
	cluster, brokers, err := inprocess.Start(map[string]int32{dlTopic: 1, dlDLQ: 1})
	require.NoError(t, err)
	dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 2*time.Second)
	t.Cleanup(func() { _ = dl.Close() })
	cluster.Close()

	msg := kafka.Message{Topic: dlTopic, Partition: 0, Offset: 1, Key: []byte("k"), Value: []byte("{}")}
	err = dl.DeadLetter(context.Background(), msg, channels.KindMalformed, "bad json")
	require.Error(t, err)
	require.NotErrorIs(t, err, deadletters.ErrTooLarge)
	require.NotErrorIs(t, err, kafka.MessageSizeTooLarge)
}
