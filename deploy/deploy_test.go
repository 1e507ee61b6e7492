package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// requireTool returns the path of a Prometheus tool. Under CI (CI set) a
// missing tool fails the test: .ci/run installs Debian's prometheus package.
// Elsewhere it skips, saying how to install it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found under CI: .ci/run must install Debian's prometheus package", name)
	}
	t.Skipf("%s not installed (apt-get install prometheus); CI runs this test", name)
	return ""
}

// TestAlertingRules runs promtool's syntax check and the rules' unit tests.
func TestAlertingRules(t *testing.T) {
	promtool := requireTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "rules.yml"},
		{"test", "rules", "rules_test.yml"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "promtool %v:\n%s", args, out)
	}
}

// exported returns every series name the worker exports: the families
// metrics.New, metrics.NewStatementCollector, metrics.NewSettledCollector,
// metrics.NewQueryMetrics (the querier's) and settlement.New register
// (with lag and stall series set, since those vectors are empty until a
// partition is assigned, and one tenant's statements), histograms
// with their _bucket, _sum and _count series.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	m.SetConsumerLag(0, 1)
	m.SetPartitionStalled(0, 0)
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "exported.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = settlement.New(db, idempotent.NewStore(db), nil, reg)
	require.NoError(t, err)
	// The statement series exist once a tenant has imported a statement.
	stmts := metrics.NewStatementCollector(func(context.Context, time.Time, int) ([]metrics.StatementStanding, error) {
		return []metrics.StatementStanding{{TenantID: 1, Channel: string(channels.WeChat), FirstImportedDay: time.Unix(0, 0)}}, nil
	}, nil)
	require.NoError(t, reg.Register(stmts))
	stmts.Refresh(context.Background())
	settledBacklog := metrics.NewSettledCollector(func(context.Context) (int64, time.Time, error) {
		return 0, time.Time{}, nil
	}, nil, 0)
	require.NoError(t, reg.Register(settledBacklog))
	settledBacklog.Refresh(context.Background())
	regs := metrics.NewRegistrationCollector(func(context.Context) ([]metrics.RegistrationStanding, error) {
		return []metrics.RegistrationStanding{{Channel: string(channels.WeChat), Kind: "PAYMENT"}}, nil
	}, nil, 0)
	require.NoError(t, reg.Register(regs))
	regs.Refresh(context.Background())
	// The querier's (consumer query run) counters, scraped from its own
	// process.
	_, err = metrics.NewQueryMetrics(reg)
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	return names
}

// metricRef finds metric names in PromQL: paycb_ names anywhere, and any
// other identifier followed by a selector or range.
var (
	paycbRef    = regexp.MustCompile(`\bpaycb_[a-zA-Z0-9_]+`)
	selectorRef = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]`)
)

// queried returns the metric names the expressions refer to.
func queried(exprs []string) []string {
	set := map[string]bool{}
	for _, e := range exprs {
		for _, m := range paycbRef.FindAllString(e, -1) {
			set[m] = true
		}
		for _, m := range selectorRef.FindAllStringSubmatch(e, -1) {
			set[m[1]] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// scrapeSeries are series Prometheus itself adds to every scrape.
var scrapeSeries = map[string]bool{"up": true}

func TestDashboardQueriesOnlyExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("grafana/paycallback.json")
	require.NoError(t, err)
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.UID)
	var exprs []string
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q has an empty query", p.Title)
			exprs = append(exprs, tg.Expr)
		}
	}
	names := exported(t)
	used := queried(exprs)
	for _, n := range used {
		assert.True(t, names[n] || scrapeSeries[n], "the dashboard queries %s, which the worker does not export", n)
	}
	// What the dashboard is for: each of these is on it.
	for _, want := range []string{
		"paycb_events_total", "paycb_consumer_lag", "paycb_settle_duration_seconds_bucket",
		"paycb_orphan_claims", "paycb_dead_letters_total", "paycb_partition_stalled_seconds",
		"paycb_ledger_duplicate_postings_total", "paycb_refund_registration_mismatch_total",
		"paycb_statement_last_reconciled_day_timestamp_seconds", "paycb_statement_discrepancies",
		"paycb_statement_files_unreconciled",
	} {
		assert.True(t, slices.Contains(used, want), "the dashboard does not show %s", want)
	}
}

// alertingRules are the rules of prometheus/rules.yml, by group.
type alertingRules struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// readAlertingRules parses prometheus/rules.yml.
func readAlertingRules(t *testing.T) alertingRules {
	t.Helper()
	raw, err := os.ReadFile("prometheus/rules.yml")
	require.NoError(t, err)
	var rules alertingRules
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	return rules
}

// count is how many alerting rules there are.
func (r alertingRules) count() int {
	n := 0
	for _, g := range r.Groups {
		n += len(g.Rules)
	}
	return n
}

func TestRulesQueryOnlyExportedMetrics(t *testing.T) {
	rules := readAlertingRules(t)
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			exprs = append(exprs, r.Expr)
		}
	}
	require.NotEmpty(t, exprs)
	names := exported(t)
	for _, n := range queried(exprs) {
		assert.True(t, names[n] || scrapeSeries[n], "a rule queries %s, which the worker does not export", n)
	}
}

func TestQueriedFindsMetricNames(t *testing.T) {
	got := queried([]string{
		`histogram_quantile(0.99, sum by (le) (rate(paycb_settle_duration_seconds_bucket{job=~"$job"}[5m])))`,
		`max(paycb_orphan_claims) > 0 and up{job="x"} == 1`,
		`sum(rate(nonexistent_total[5m]))`,
	})
	assert.Equal(t, []string{"nonexistent_total", "paycb_orphan_claims", "paycb_settle_duration_seconds_bucket", "up"}, got)
}
