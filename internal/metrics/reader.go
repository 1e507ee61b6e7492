package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// ReaderSample is what one partition reader reports since its previous
// sample: the counters as deltas (kafka-go's Reader.Stats hands them out
// that way) and the queue length as it is now.
type ReaderSample struct {
	Dials, Fetches, Messages, Bytes, Errors, Timeouts int64
	QueueLength                                       int64
}

// ReaderStats exports the partition readers' statistics
// (paycb_kafka_reader_*{partition}): counters that add up the samples, so
// they stay monotonic across scrapes and readers, and the queue length.
// Build it with NewReaderStats; it is a prometheus.Collector the caller
// registers. All methods are safe for concurrent use. The partition label
// is bounded by the topic's partition count.
type ReaderStats struct {
	dials, fetches, messages, bytes, errors, timeouts *prometheus.CounterVec
	queue                                             *prometheus.GaugeVec
}

// NewReaderStats returns the partition readers' metrics, registered
// nowhere.
func NewReaderStats() *ReaderStats {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"partition"})
	}
	return &ReaderStats{
		dials:    counter("paycb_kafka_reader_dials_total", "Connections the partition readers opened to brokers."),
		fetches:  counter("paycb_kafka_reader_fetches_total", "Fetch requests the partition readers sent."),
		messages: counter("paycb_kafka_reader_messages_total", "Messages the partition readers received."),
		bytes:    counter("paycb_kafka_reader_bytes_total", "Message bytes the partition readers received."),
		errors:   counter("paycb_kafka_reader_errors_total", "Errors the partition readers met (they retry by themselves)."),
		timeouts: counter("paycb_kafka_reader_timeouts_total", "Fetches that timed out waiting for data."),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paycb_kafka_reader_queue_length",
			Help: "Messages fetched and waiting in a partition reader's queue.",
		}, []string{"partition"}),
	}
}

// Add adds one sample of partition's reader: its deltas to the counters,
// its queue length to the gauge.
func (s *ReaderStats) Add(partition int, d ReaderSample) {
	p := strconv.Itoa(partition)
	s.dials.WithLabelValues(p).Add(float64(d.Dials))
	s.fetches.WithLabelValues(p).Add(float64(d.Fetches))
	s.messages.WithLabelValues(p).Add(float64(d.Messages))
	s.bytes.WithLabelValues(p).Add(float64(d.Bytes))
	s.errors.WithLabelValues(p).Add(float64(d.Errors))
	s.timeouts.WithLabelValues(p).Add(float64(d.Timeouts))
	s.queue.WithLabelValues(p).Set(float64(d.QueueLength))
}

// DeleteQueue removes partition's queue-length series (its reader is
// gone); the counters keep their totals.
func (s *ReaderStats) DeleteQueue(partition int) {
	s.queue.DeleteLabelValues(strconv.Itoa(partition))
}

func (s *ReaderStats) vecs() []prometheus.Collector {
	return []prometheus.Collector{s.dials, s.fetches, s.messages, s.bytes, s.errors, s.timeouts, s.queue}
}

// Describe implements prometheus.Collector.
func (s *ReaderStats) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.vecs() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *ReaderStats) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s.vecs() {
		c.Collect(ch)
	}
}
