package worker

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// benchBatch is a batch of n distinct payments, a third per channel, at
// trade numbers from seq on.
func benchBatch(n, seq int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	chans := []channels.Channel{channels.WeChat, channels.Alipay, channels.SQB}
	for i := range msgs {
		tr := channelstest.NewTrade(chans[i%3], seq+i)
		msgs[i] = kafka.Message{Topic: "channel-events", Offset: int64(seq + i),
			Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{})}
	}
	return msgs
}

// BenchmarkHandle measures the pipeline's own cost per message against
// MariaDB (the database's CPU is another process's): new events, and a
// replay where every message is a duplicate.
func BenchmarkHandle(b *testing.B) {
	const size = 256
	b.Run("new", func(b *testing.B) {
		env := newPipelineEnv(b)
		seq := 0
		for b.Loop() {
			b.StopTimer()
			msgs := benchBatch(size, seq)
			seq += size
			b.StartTimer()
			require.NoError(b, env.p.Handle(context.Background(), msgs, make([]MessageState, size)))
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/msg")
	})
	b.Run("replay", func(b *testing.B) {
		env := newPipelineEnv(b)
		msgs := benchBatch(size, 0)
		require.NoError(b, env.p.Handle(context.Background(), msgs, make([]MessageState, size)))
		for b.Loop() {
			require.NoError(b, env.p.Handle(context.Background(), msgs, make([]MessageState, size)))
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/msg")
	})
}
