package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The settled-event backlog's gauges (SettledCollector); `consumer status`
// reads them from a member's /metrics.
const (
	SettledPending       = "paycb_settled_pending"
	SettledOldestPending = "paycb_settled_oldest_pending_seconds"
)

// DefaultSettledRefreshInterval is how often SettledCollector.Run reads the
// outbox's backlog.
const DefaultSettledRefreshInterval = 15 * time.Second

// SettledReader reads how many settled events are written and not yet
// published, and when the oldest of them was settled (zero when none is);
// settledpub.Pending is the implementation.
type SettledReader func(ctx context.Context) (pending int64, oldest time.Time, err error)

// SettledCollector exports paycb_settled_pending and
// paycb_settled_oldest_pending_seconds, read from the outbox by Refresh (Run
// calls it at once and then every refresh interval), never by a scrape: a
// scrape serves the last refresh's values. Both are absent until a refresh
// succeeds; a failed refresh is logged at WARN (a recurring failure at most
// about once a minute) and leaves them out until one succeeds, so a stale
// zero never hides a backlog. The age is the oldest pending event's at the
// refresh. Build it with NewSettledCollector and register it on the injected
// registry.
type SettledCollector struct {
	*snapshot[settledBacklog]

	pending, oldest *prometheus.Desc
}

// settledBacklog is one read of the outbox's backlog.
type settledBacklog struct {
	pending int64
	oldest  time.Time
}

// NewSettledCollector returns a collector reading through read every
// interval (zero: DefaultSettledRefreshInterval; at least a millisecond),
// logging to logger (slog.Default() when nil).
func NewSettledCollector(read SettledReader, logger *slog.Logger, interval time.Duration) *SettledCollector {
	backlog := func(ctx context.Context) (settledBacklog, error) {
		n, oldest, err := read(ctx)
		return settledBacklog{pending: n, oldest: oldest}, err
	}
	return &SettledCollector{
		snapshot: newSnapshot(backlog, logger, interval, DefaultSettledRefreshInterval, time.Millisecond, "settled metrics",
			"settled metrics: reading the outbox failed; the settled series are left out until a refresh succeeds"),
		pending: prometheus.NewDesc(SettledPending,
			"Settled events written to the outbox and not yet published to the settled-event topic.", nil, nil),
		oldest: prometheus.NewDesc(SettledOldestPending,
			"Age of the oldest settled event not yet published (0 when none is), at the last refresh.", nil, nil),
	}
}

// Run refreshes at once and then every refresh interval until ctx ends;
// it returns nil then.
func (c *SettledCollector) Run(ctx context.Context) error { return c.run(ctx) }

// Refresh reads the backlog, bounded by the read timeout, and keeps it for
// the scrapes. A failed read is logged and leaves both series out until a
// refresh succeeds; a refresh that ctx ended changes nothing.
func (c *SettledCollector) Refresh(ctx context.Context) { c.refresh(ctx) }

// Describe implements prometheus.Collector.
func (c *SettledCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.oldest
}

// Collect implements prometheus.Collector: it serves the last refresh's
// values and reads nothing.
func (c *SettledCollector) Collect(ch chan<- prometheus.Metric) {
	b, at, ok := c.last()
	if !ok {
		return
	}
	age := 0.0
	if !b.oldest.IsZero() {
		age = max(at.Sub(b.oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(b.pending))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
