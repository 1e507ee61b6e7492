package metrics

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var cst = time.FixedZone("CST", 8*3600)

func bjDay(d int) time.Time { return time.Date(2024, 6, d, 0, 0, 0, 0, cst) }

// fakeStatements serves standings, or an error, and records what it was
// asked.
type fakeStatements struct {
	mu          sync.Mutex
	rows        []StatementStanding
	err         error
	asked       []time.Time
	days        []int
	hadDeadline bool
}

func (f *fakeStatements) read(ctx context.Context, now time.Time, days int) ([]StatementStanding, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, f.hadDeadline = ctx.Deadline()
	f.asked, f.days = append(f.asked, now), append(f.days, days)
	return f.rows, f.err
}

func TestStatementCollectorAggregatesTenantsPerChannel(t *testing.T) {
	now := time.Date(2024, 6, 10, 11, 0, 0, 0, cst)
	f := &fakeStatements{rows: []StatementStanding{
		// WeChat: tenant 1 is up to date with discrepancies; tenant 2 is
		// behind (06-07) with a skipped day and a day without a statement;
		// tenant 5 never reconciled
		// (first imported 06-08, so reconciled up to 06-07 at best).
		{
			TenantID: 1, Channel: "WECHAT", FirstImportedDay: bjDay(3), LastReconciledDay: bjDay(9),
			Discrepancies: map[string]int{StatementMissingInLedger: 2, StatementStatusMismatch: 1},
		},
		{
			TenantID: 2, Channel: "WECHAT", FirstImportedDay: bjDay(5), LastReconciledDay: bjDay(7), UnreconciledDays: 2, MissingDays: 1,
			Discrepancies: map[string]int{StatementMissingInLedger: 1, StatementAmountMismatch: 4, "bogus": 9},
		},
		{TenantID: 5, Channel: "WECHAT", FirstImportedDay: bjDay(8), UnreconciledDays: 2},
		// Alipay: one tenant, clean.
		{
			TenantID: 3, Channel: "ALIPAY", FirstImportedDay: bjDay(3), LastReconciledDay: bjDay(9),
			Discrepancies: map[string]int{StatementMissingInLedger: 0},
		},
		// A channel outside the set is reported as UNKNOWN, never as itself.
		{TenantID: 4, Channel: "PAYPAL", FirstImportedDay: bjDay(9), LastReconciledDay: bjDay(9)},
	}}
	reg := prometheus.NewRegistry()
	c := NewStatementCollector(f.read, slog.New(slog.DiscardHandler), WithStatementClock(func() time.Time { return now }))
	require.NoError(t, reg.Register(c))
	c.Refresh(context.Background())

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP paycb_statement_discrepancies Discrepancies by category found by the latest reconciliation of each day of the channel's statements over the last days, summed over days and tenants: every day still open counts.
# TYPE paycb_statement_discrepancies gauge
paycb_statement_discrepancies{category="amount_mismatch",channel="ALIPAY"} 0
paycb_statement_discrepancies{category="missing_in_ledger",channel="ALIPAY"} 0
paycb_statement_discrepancies{category="missing_in_statement",channel="ALIPAY"} 0
paycb_statement_discrepancies{category="status_mismatch",channel="ALIPAY"} 0
paycb_statement_discrepancies{category="amount_mismatch",channel="UNKNOWN"} 0
paycb_statement_discrepancies{category="missing_in_ledger",channel="UNKNOWN"} 0
paycb_statement_discrepancies{category="missing_in_statement",channel="UNKNOWN"} 0
paycb_statement_discrepancies{category="status_mismatch",channel="UNKNOWN"} 0
paycb_statement_discrepancies{category="amount_mismatch",channel="WECHAT"} 4
paycb_statement_discrepancies{category="missing_in_ledger",channel="WECHAT"} 3
paycb_statement_discrepancies{category="missing_in_statement",channel="WECHAT"} 0
paycb_statement_discrepancies{category="status_mismatch",channel="WECHAT"} 1
# HELP paycb_statement_last_reconciled_day_timestamp_seconds Start (Unix time) of the Beijing-time day up to which every tenant with a statement of the channel imported in the last days has reconciled: the oldest of their latest reconciled days.
# TYPE paycb_statement_last_reconciled_day_timestamp_seconds gauge
paycb_statement_last_reconciled_day_timestamp_seconds{channel="ALIPAY"} 1.7178624e+09
paycb_statement_last_reconciled_day_timestamp_seconds{channel="UNKNOWN"} 1.7178624e+09
paycb_statement_last_reconciled_day_timestamp_seconds{channel="WECHAT"} 1.7176896e+09
# HELP paycb_statement_metrics_errors_total Refreshes of the statement reconciliation metrics that could not read the database (logged at WARN); the statement series are absent until a refresh succeeds.
# TYPE paycb_statement_metrics_errors_total counter
paycb_statement_metrics_errors_total 0
# HELP paycb_statement_files_unreconciled Days of the channel's statements over the last days (per tenant) not reconciled: a statement held with no reconciliation of the lines held (never reconciled, or changed since), or no statement at all (nothing imported, not declared empty) on a day after the tenant's first and before yesterday.
# TYPE paycb_statement_files_unreconciled gauge
paycb_statement_files_unreconciled{channel="ALIPAY"} 0
paycb_statement_files_unreconciled{channel="UNKNOWN"} 0
paycb_statement_files_unreconciled{channel="WECHAT"} 5
`)))
	assert.Equal(t, int64(1717862400), bjDay(9).Unix(), "06-09 00:00 Beijing")
	assert.Equal(t, int64(1717689600), bjDay(7).Unix(), "06-07 00:00 Beijing: tenants 2 and 5")
	require.NotEmpty(t, f.asked)
	assert.True(t, f.asked[0].Equal(now))
	assert.Equal(t, DefaultStatementDays, f.days[0])
	assert.True(t, f.hadDeadline, "every read is bounded by a deadline")

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func TestStatementCollectorWithoutStatementsExportsNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewStatementCollector((&fakeStatements{}).read, slog.New(slog.DiscardHandler), WithStatementDays(3))
	require.NoError(t, reg.Register(c))
	c.Refresh(context.Background())
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only the error counter")
}

func TestStatementCollectorCountsAndLogsAFailedRead(t *testing.T) {
	var logs bytes.Buffer
	f := &fakeStatements{err: errors.New("Error 1146: Table 'paycb.ss_statement_reconcile' doesn't exist")}
	reg := prometheus.NewRegistry()
	_, err := New(reg)
	require.NoError(t, err)
	c := NewStatementCollector(f.read, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, reg.Register(c))

	for range 3 {
		c.Refresh(context.Background())
		mfs, err := reg.Gather()
		require.NoError(t, err, "a failed read does not fail the scrape")
		names := map[string]bool{}
		for _, mf := range mfs {
			names[mf.GetName()] = true
		}
		assert.True(t, names["paycb_events_total"], "the rest of the scrape is there")
		assert.False(t, names["paycb_statement_last_reconciled_day_timestamp_seconds"])
	}
	assert.InDelta(t, 3.0, testutil.ToFloat64(c.errors), 0)
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "doesn't exist")
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "a recurring failure is not logged at every refresh")

	// The read recovers: the series are back, the count stays.
	f.mu.Lock()
	f.err, f.rows = nil, []StatementStanding{{TenantID: 1, Channel: "SQB", FirstImportedDay: bjDay(3), LastReconciledDay: bjDay(4)}}
	f.mu.Unlock()
	c.Refresh(context.Background())
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP paycb_statement_last_reconciled_day_timestamp_seconds Start (Unix time) of the Beijing-time day up to which every tenant with a statement of the channel imported in the last days has reconciled: the oldest of their latest reconciled days.
# TYPE paycb_statement_last_reconciled_day_timestamp_seconds gauge
paycb_statement_last_reconciled_day_timestamp_seconds{channel="SQB"} 1.7174304e+09
# HELP paycb_statement_metrics_errors_total Refreshes of the statement reconciliation metrics that could not read the database (logged at WARN); the statement series are absent until a refresh succeeds.
# TYPE paycb_statement_metrics_errors_total counter
paycb_statement_metrics_errors_total 3
`), "paycb_statement_last_reconciled_day_timestamp_seconds", "paycb_statement_metrics_errors_total"))
}

// TestStatementCollectorScrapesRunNoStatement: however often /metrics is
// scraped, the database is read only by the refreshes; a scrape serves the
// last refresh's values. An unauthenticated scrape storm never reaches the
// database.
func TestStatementCollectorScrapesRunNoStatement(t *testing.T) {
	f := &fakeStatements{rows: []StatementStanding{{TenantID: 1, Channel: "WECHAT", FirstImportedDay: bjDay(3), LastReconciledDay: bjDay(9)}}}
	reg := prometheus.NewRegistry()
	c := NewStatementCollector(f.read, slog.New(slog.DiscardHandler))
	require.NoError(t, reg.Register(c))

	n, err := testutil.GatherAndCount(reg, "paycb_statement_last_reconciled_day_timestamp_seconds")
	require.NoError(t, err)
	assert.Equal(t, 0, n, "no series before the first refresh")
	c.Refresh(context.Background())
	for range 50 {
		n, err := testutil.GatherAndCount(reg, "paycb_statement_last_reconciled_day_timestamp_seconds")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Len(t, f.asked, 1, "51 scrapes, one refresh: one read")
}

// TestStatementCollectorRunRefreshesAtOnceAndStops: Run reads at once,
// then on its interval, and returns when its context ends; a read the end
// of the context cut short is not counted as the database's failure.
func TestStatementCollectorRunRefreshesAtOnceAndStops(t *testing.T) {
	read := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	c := NewStatementCollector(func(rctx context.Context, _ time.Time, _ int) ([]StatementStanding, error) {
		read <- struct{}{}
		if len(read) >= 2 {
			cancel()
			<-rctx.Done()
			return nil, rctx.Err()
		}
		return nil, nil
	}, slog.New(slog.DiscardHandler), WithStatementRefreshInterval(time.Second))
	require.NoError(t, reg.Register(c))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.NoError(t, <-done)
	assert.Len(t, read, 2, "one read at once, one on the interval")
	assert.Zero(t, testutil.ToFloat64(c.errors), "a read cut short by shutdown is no failure")
}
