package worker

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// readerStats exports the partition readers' kafka-go statistics as
// Prometheus metrics. kafka-go's Reader.Stats returns counters as deltas
// since the previous call, so they are added up here on every scrape (and
// once more when a reader closes) to keep them monotonic.
type readerStats struct {
	mu      sync.Mutex
	readers map[int]*kafka.Reader

	dials, fetches, messages, bytes, errors, timeouts *prometheus.CounterVec
	queue                                             *prometheus.GaugeVec
}

func newReaderStats() *readerStats {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"partition"})
	}
	return &readerStats{
		readers:  map[int]*kafka.Reader{},
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

func (s *readerStats) add(partition int, r *kafka.Reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers[partition] = r
}

// remove takes the reader's last deltas and forgets it.
func (s *readerStats) remove(partition int, r *kafka.Reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readers[partition] == r {
		s.absorb(partition, r)
		delete(s.readers, partition)
		s.queue.DeleteLabelValues(strconv.Itoa(partition))
	}
}

func (s *readerStats) absorb(partition int, r *kafka.Reader) {
	st := r.Stats()
	p := strconv.Itoa(partition)
	s.dials.WithLabelValues(p).Add(float64(st.Dials))
	s.fetches.WithLabelValues(p).Add(float64(st.Fetches))
	s.messages.WithLabelValues(p).Add(float64(st.Messages))
	s.bytes.WithLabelValues(p).Add(float64(st.Bytes))
	s.errors.WithLabelValues(p).Add(float64(st.Errors))
	s.timeouts.WithLabelValues(p).Add(float64(st.Timeouts))
	s.queue.WithLabelValues(p).Set(float64(st.QueueLength))
}

func (s *readerStats) vecs() []prometheus.Collector {
	return []prometheus.Collector{s.dials, s.fetches, s.messages, s.bytes, s.errors, s.timeouts, s.queue}
}

// Describe implements prometheus.Collector.
func (s *readerStats) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.vecs() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector: it first takes every live
// reader's deltas.
func (s *readerStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	for p, r := range s.readers {
		s.absorb(p, r)
	}
	s.mu.Unlock()
	for _, c := range s.vecs() {
		c.Collect(ch)
	}
}
