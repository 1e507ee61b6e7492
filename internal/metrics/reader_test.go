package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReaderStats(t *testing.T) {
	s := NewReaderStats()
	s.Add(3, ReaderSample{Messages: 2, Bytes: 10, QueueLength: 5})
	s.Add(3, ReaderSample{Messages: 1, Bytes: 4, QueueLength: 1})
	require.NoError(t, testutil.CollectAndCompare(s, strings.NewReader(`
# HELP paycb_kafka_reader_messages_total Messages the partition readers received.
# TYPE paycb_kafka_reader_messages_total counter
paycb_kafka_reader_messages_total{partition="3"} 3
# HELP paycb_kafka_reader_queue_length Messages fetched and waiting in a partition reader's queue.
# TYPE paycb_kafka_reader_queue_length gauge
paycb_kafka_reader_queue_length{partition="3"} 1
`), "paycb_kafka_reader_messages_total", "paycb_kafka_reader_queue_length"))
	s.DeleteQueue(3)
	assert.Zero(t, testutil.CollectAndCount(s, "paycb_kafka_reader_queue_length"))
	assert.Equal(t, 1, testutil.CollectAndCount(s, "paycb_kafka_reader_bytes_total"), "counters keep their totals")
	problems, err := testutil.CollectAndLint(s)
	require.NoError(t, err)
	assert.Empty(t, problems)
}
