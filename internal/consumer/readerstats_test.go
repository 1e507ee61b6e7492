package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
)

func TestReaderStatsAreMonotonicAndLintClean(t *testing.T) {
	cluster, brokers, err := inprocess.Start(map[string]int32{"t": 1})
	require.NoError(t, err)
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, kafkaops.Produce(ctx, brokers, "t", []kafkaops.Message{{Value: []byte("a")}, {Value: []byte("b")}}))

	stats := newReaderStats()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "t", Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	stats.add(0, r)
	_, err = r.FetchMessage(ctx)
	require.NoError(t, err)
	_, err = r.FetchMessage(ctx)
	require.NoError(t, err)

	// Two scrapes: kafka-go hands out deltas, the collector keeps totals.
	const messages = `# HELP paycb_kafka_reader_messages_total Messages the partition readers received.
# TYPE paycb_kafka_reader_messages_total counter
paycb_kafka_reader_messages_total{partition="0"} 2
`
	require.NoError(t, testutil.CollectAndCompare(stats, strings.NewReader(messages), "paycb_kafka_reader_messages_total"))
	require.NoError(t, testutil.CollectAndCompare(stats, strings.NewReader(messages), "paycb_kafka_reader_messages_total"),
		"a second scrape does not lose the first one's counts")
	stats.remove(0, r)
	require.NoError(t, testutil.CollectAndCompare(stats, strings.NewReader(messages), "paycb_kafka_reader_messages_total"),
		"totals survive the reader")
	assert.Zero(t, testutil.CollectAndCount(stats, "paycb_kafka_reader_queue_length"), "the queue series goes with the reader")

	problems, err := testutil.CollectAndLint(stats)
	require.NoError(t, err)
	assert.Empty(t, problems)
}
