package consumer

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
)

// readerStats exports the partition readers' kafka-go statistics through
// metrics.ReaderStats. kafka-go's Reader.Stats returns counters as deltas
// since the previous call, so they are added up there on every scrape (and
// once more when a reader closes) to keep them monotonic.
type readerStats struct {
	mu      sync.Mutex
	readers map[int]*kafka.Reader
	m       *metrics.ReaderStats
}

func newReaderStats() *readerStats {
	return &readerStats{readers: map[int]*kafka.Reader{}, m: metrics.NewReaderStats()}
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
		s.m.DeleteQueue(partition)
	}
}

func (s *readerStats) absorb(partition int, r *kafka.Reader) {
	st := r.Stats()
	s.m.Add(partition, metrics.ReaderSample{
		Dials: st.Dials, Fetches: st.Fetches, Messages: st.Messages, Bytes: st.Bytes,
		Errors: st.Errors, Timeouts: st.Timeouts, QueueLength: st.QueueLength,
	})
}

// Describe implements prometheus.Collector.
func (s *readerStats) Describe(ch chan<- *prometheus.Desc) { s.m.Describe(ch) }

// Collect implements prometheus.Collector: it first takes every live
// reader's deltas.
func (s *readerStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	for p, r := range s.readers {
		s.absorb(p, r)
	}
	s.mu.Unlock()
	s.m.Collect(ch)
}
