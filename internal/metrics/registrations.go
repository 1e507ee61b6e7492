package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The open registrations' gauges (RegistrationCollector); `consumer
// status` reads the registrations themselves.
const (
	RegistrationsOpen          = "paycb_registrations_open"
	RegistrationOldestOpen     = "paycb_registration_oldest_open_seconds"
	RegistrationsPastExpiry    = "paycb_registrations_past_expiry"
	DefaultRegistrationRefresh = 15 * time.Second
)

// RegistrationStanding is one channel's open registrations of one kind
// (PAYMENT or REFUND): how many, when the oldest was recorded (zero when
// none), and how many payments are past their expiry.
type RegistrationStanding struct {
	Channel    string
	Kind       string
	Open       int64
	Oldest     time.Time
	PastExpiry int64
}

// RegistrationReader reads the standings of every channel and kind
// (registrations.Store.Stats is the implementation, wrapped by the app).
type RegistrationReader func(ctx context.Context) ([]RegistrationStanding, error)

// RegistrationCollector exports paycb_registrations_open{channel, kind},
// paycb_registration_oldest_open_seconds{channel, kind} and
// paycb_registrations_past_expiry{channel, kind}, read by Refresh (Run
// calls it at once and then every refresh interval), never by a scrape. All
// are absent until a refresh succeeds; a failed refresh is logged at WARN
// (a recurring failure at most about once a minute) and leaves them out
// until one succeeds, so a stale zero never hides open registrations.
// Build it with NewRegistrationCollector and register it on the injected
// registry.
type RegistrationCollector struct {
	*snapshot[[]RegistrationStanding]

	open, oldest, past *prometheus.Desc
}

// NewRegistrationCollector returns a collector reading through read every
// interval (zero: DefaultRegistrationRefresh; at least a millisecond),
// logging to logger (slog.Default() when nil).
func NewRegistrationCollector(read RegistrationReader, logger *slog.Logger, interval time.Duration) *RegistrationCollector {
	labels := []string{"channel", "kind"}
	return &RegistrationCollector{
		snapshot: newSnapshot(read, logger, interval, DefaultRegistrationRefresh, time.Millisecond, "registration metrics",
			"registration metrics: reading the registrations failed; the registration series are left out until a refresh succeeds"),
		open: prometheus.NewDesc(RegistrationsOpen,
			"Registrations not yet settled, closed or expired (REGISTERED or ABNORMAL), by channel and kind (PAYMENT, REFUND).", labels, nil),
		oldest: prometheus.NewDesc(RegistrationOldestOpen,
			"Age of the oldest open registration since the worker recorded it (0 when none is), at the last refresh.", labels, nil),
		past: prometheus.NewDesc(RegistrationsPastExpiry,
			"Open payment registrations whose expires_at has passed (0 for refunds, which do not expire), at the last refresh.", labels, nil),
	}
}

// Run refreshes at once and then every refresh interval until ctx ends;
// it returns nil then.
func (c *RegistrationCollector) Run(ctx context.Context) error { return c.run(ctx) }

// Refresh reads the standings, bounded by the read timeout, and keeps them
// for the scrapes. A failed read is logged and leaves the series out until
// a refresh succeeds; a refresh that ctx ended changes nothing.
func (c *RegistrationCollector) Refresh(ctx context.Context) { c.refresh(ctx) }

// Describe implements prometheus.Collector.
func (c *RegistrationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.oldest
	ch <- c.past
}

// Collect implements prometheus.Collector: it serves the last refresh's
// values and reads nothing.
func (c *RegistrationCollector) Collect(ch chan<- prometheus.Metric) {
	rows, at, ok := c.last()
	if !ok {
		return
	}
	for _, r := range rows {
		channel := ClampChannel(r.Channel)
		age := 0.0
		if !r.Oldest.IsZero() {
			age = max(at.Sub(r.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(r.Open), channel, r.Kind)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, channel, r.Kind)
		ch <- prometheus.MustNewConstMetric(c.past, prometheus.GaugeValue, float64(r.PastExpiry), channel, r.Kind)
	}
}
