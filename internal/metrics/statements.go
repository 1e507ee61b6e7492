package metrics

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The category label values of paycb_statement_discrepancies: the
// categories of `consumer statement reconcile`.
const (
	StatementMissingInLedger    = "missing_in_ledger"
	StatementMissingInStatement = "missing_in_statement"
	StatementAmountMismatch     = "amount_mismatch"
	StatementStatusMismatch     = "status_mismatch"
)

// StatementCategories lists the category label values; every channel
// exported has a series for each.
var StatementCategories = []string{StatementMissingInLedger, StatementMissingInStatement, StatementAmountMismatch, StatementStatusMismatch}

// Defaults of a StatementCollector.
const (
	// DefaultStatementDays is how many Beijing-time days before the
	// current one the statement metrics look at: a tenant that imported no
	// statement of a channel in them is left out of that channel's series.
	DefaultStatementDays = 7
	// DefaultStatementReadTimeout bounds one refresh's reading.
	DefaultStatementReadTimeout = 5 * time.Second
	// DefaultStatementRefreshInterval is how often Run reads the
	// standings again. The results change only when an operator imports or
	// reconciles a statement, and the alerts on them wait hours, so half a
	// minute of staleness costs nothing and a scrape costs no SQL.
	DefaultStatementRefreshInterval = 30 * time.Second
)

// StatementStanding is where one tenant stands with one channel's
// statements over the days the metrics look at. TenantID is for the log
// only, never a label.
type StatementStanding struct {
	TenantID int64
	Channel  string
	// FirstImportedDay is the start (Beijing time) of the first day of the
	// window with a statement imported.
	FirstImportedDay time.Time
	// LastReconciledDay is the start of the latest day of the window
	// reconciled; zero when none is.
	LastReconciledDay time.Time
	// Discrepancies holds, by category, the items of the latest run of
	// each of the window's days held, summed: every day still open counts.
	Discrepancies map[string]int
	// UnreconciledDays counts the window's days with a statement held and
	// no reconciliation of the lines held.
	UnreconciledDays int
	// MissingDays counts the window's days after FirstImportedDay and
	// before yesterday with no statement at all: nothing imported, not
	// declared empty (reconcile says no_statement).
	MissingDays int
}

// StatementReader reads every tenant's standing at now, over the days
// Beijing-time days before now's.
type StatementReader func(ctx context.Context, now time.Time, days int) ([]StatementStanding, error)

// StatementCollector exports the statement reconciliation metrics; register
// it on the injected registry and start Run beside the worker. Build it with
// NewStatementCollector. The standings are read from the database by Refresh
// (Run calls it at once and then every DefaultStatementRefreshInterval), never
// by a scrape: a scrape serves the last refresh's values, so however often
// /metrics is scraped, and by whom, it runs no statement. A failed refresh is
// counted in paycb_statement_metrics_errors_total and logged at WARN (a
// recurring failure at most about once a minute), and leaves the statement
// series out of the scrapes until a refresh succeeds; the rest of a scrape is
// unaffected. Before the first refresh the statement series are absent.
type StatementCollector struct {
	// snapshot holds the last successful refresh's series by channel
	// label.
	*snapshot[map[string]*channelStanding]
	read  StatementReader
	clock func() time.Time
	days  int

	lastDay, unreconciled, discrepancies *prometheus.Desc
	errors                               prometheus.Counter
}

// StatementOption changes a StatementCollector's default.
type StatementOption func(*StatementCollector)

// WithStatementClock sets the clock that decides the current day
// (default time.Now).
func WithStatementClock(now func() time.Time) StatementOption {
	return func(c *StatementCollector) { c.clock = now }
}

// WithStatementRefreshInterval sets how often Run reads the standings
// (default DefaultStatementRefreshInterval; at most once a second).
func WithStatementRefreshInterval(d time.Duration) StatementOption {
	return func(c *StatementCollector) { c.interval = max(d, time.Second) }
}

// WithStatementDays sets how many days before the current one are looked at
// (default DefaultStatementDays; below 1 counts as 1).
func WithStatementDays(days int) StatementOption {
	return func(c *StatementCollector) { c.days = max(days, 1) }
}

// NewStatementCollector returns a collector reading through read, logging to
// logger (slog.Default() when nil).
//
// Per channel, over the tenants with a statement of the channel imported
// in the window: paycb_statement_last_reconciled_day_timestamp_seconds is
// the oldest of their latest reconciled days (a tenant that reconciled none
// of the window's days counts as reconciled up to the day before its first
// imported one), so one tenant left behind shows; paycb_statement_discrepancies
// sums, per category, the items of every day of the window at its latest
// run (every day still open, not only the latest); and
// paycb_statement_files_unreconciled sums the days with a statement held
// but not reconciled against the lines held, and the days with no
// statement at all (StatementStanding.MissingDays).
func NewStatementCollector(read StatementReader, logger *slog.Logger, opts ...StatementOption) *StatementCollector {
	c := &StatementCollector{
		read:  read,
		clock: time.Now,
		days:  DefaultStatementDays,
		lastDay: prometheus.NewDesc("paycb_statement_last_reconciled_day_timestamp_seconds",
			"Start (Unix time) of the Beijing-time day up to which every tenant with a statement of the channel imported in the last days has reconciled: the oldest of their latest reconciled days.",
			[]string{"channel"}, nil),
		unreconciled: prometheus.NewDesc("paycb_statement_files_unreconciled",
			"Days of the channel's statements over the last days (per tenant) not reconciled: a statement held with no reconciliation of the lines held (never reconciled, or changed since), or no statement at all (nothing imported, not declared empty) on a day after the tenant's first and before yesterday.",
			[]string{"channel"}, nil),
		discrepancies: prometheus.NewDesc("paycb_statement_discrepancies",
			"Discrepancies by category found by the latest reconciliation of each day of the channel's statements over the last days, summed over days and tenants: every day still open counts.",
			[]string{"channel", "category"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paycb_statement_metrics_errors_total",
			Help: "Refreshes of the statement reconciliation metrics that could not read the database (logged at WARN); the statement series are absent until a refresh succeeds.",
		}),
	}
	c.snapshot = newSnapshot(c.standings, logger, DefaultStatementRefreshInterval, DefaultStatementRefreshInterval, time.Second, "statement metrics",
		"statement metrics: reading the reconciliation results failed; the statement series are left out until a refresh succeeds")
	c.failed = c.errors.Inc
	for _, o := range opts {
		o(c)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *StatementCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lastDay
	ch <- c.unreconciled
	ch <- c.discrepancies
	c.errors.Describe(ch)
}

// channelStanding is one channel's series as aggregated over its tenants.
type channelStanding struct {
	lastDay       time.Time
	unreconciled  int
	discrepancies map[string]int
}

// Run refreshes the standings at once and then every refresh interval
// until ctx ends; it returns nil then.
func (c *StatementCollector) Run(ctx context.Context) error { return c.run(ctx) }

// Refresh reads the standings, bounded by the read timeout, and keeps them
// for the scrapes. A failed read is counted and logged, and leaves the
// statement series out until a refresh succeeds; a refresh that ctx ended
// changes nothing.
func (c *StatementCollector) Refresh(ctx context.Context) { c.refresh(ctx) }

// standings reads every tenant's standing and aggregates it by channel.
func (c *StatementCollector) standings(ctx context.Context) (map[string]*channelStanding, error) {
	rows, err := c.read(ctx, c.clock(), c.days)
	if err != nil {
		return nil, err
	}
	byChannel := map[string]*channelStanding{}
	for _, r := range rows {
		last := r.LastReconciledDay
		if last.IsZero() {
			last = r.FirstImportedDay.AddDate(0, 0, -1)
		}
		name := ClampChannel(r.Channel)
		s, ok := byChannel[name]
		if !ok {
			s = &channelStanding{lastDay: last, discrepancies: map[string]int{}}
			byChannel[name] = s
		}
		if last.Before(s.lastDay) {
			s.lastDay = last
		}
		s.unreconciled += r.UnreconciledDays + r.MissingDays
		for cat, n := range r.Discrepancies {
			if slices.Contains(StatementCategories, cat) {
				s.discrepancies[cat] += n
			}
		}
	}
	return byChannel, nil
}

// Collect implements prometheus.Collector: it serves the last refresh's
// values and reads nothing.
func (c *StatementCollector) Collect(ch chan<- prometheus.Metric) {
	c.errors.Collect(ch)
	byChannel, _, _ := c.last()
	for name, s := range byChannel {
		ch <- prometheus.MustNewConstMetric(c.lastDay, prometheus.GaugeValue, float64(s.lastDay.Unix()), name)
		ch <- prometheus.MustNewConstMetric(c.unreconciled, prometheus.GaugeValue, float64(s.unreconciled), name)
		for _, cat := range StatementCategories {
			ch <- prometheus.MustNewConstMetric(c.discrepancies, prometheus.GaugeValue, float64(s.discrepancies[cat]), name, cat)
		}
	}
}
