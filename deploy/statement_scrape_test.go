package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// scrapeStatements reads the worker's /metrics and returns the statement
// series' values by name and labels, as written there.
func scrapeStatements(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("get /metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "paycb_statement_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// TestWorkerExportsStatementReconciliation: statements imported and
// reconciled with the operator's functions in the worker's database show
// in the running worker's /metrics after its next refresh (every 100ms
// here; a scrape reads no database), aggregated per
// channel over tenants, and a real Prometheus loading the rules sees the
// statement alerts pending.
func TestWorkerExportsStatementReconciliation(t *testing.T) {
	w := runWorker(t, 1, nil)
	db, err := sqldb.OpenMySQL(w.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()

	y, m, d := time.Now().In(statements.Beijing).Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, statements.Beijing)
	yesterday, before := today.AddDate(0, 0, -1), today.AddDate(0, 0, -2)
	imp := func(tenant int64, ch channels.Channel, day time.Time, trades ...string) {
		t.Helper()
		st := statements.Statement{Channel: ch, Format: "test", SHA1: fmt.Sprintf("%d-%s-%s", tenant, ch, day.Format(time.DateOnly))}
		for i, tr := range trades {
			st.Lines = append(st.Lines, statements.Line{
				LineNo: i + 2, Channel: ch, Kind: statements.KindPayment, TradeNo: tr, MerchantOrderNo: "M-" + tr,
				Amount: 1000, SettledAmount: 1000, Status: "SUCCESS", Time: day.Add(10 * time.Hour), Currency: "CNY",
			})
		}
		_, err := statementbook.ImportStatement(ctx, db, tenant, st, time.Now())
		require.NoError(t, err)
	}
	reconcile := func(tenant int64, ch channels.Channel, day time.Time, found int) {
		t.Helper()
		rep, err := statementbook.ReconcileStatement(ctx, db, tenant, ch, day.Format(time.DateOnly))
		require.NoError(t, err)
		require.Len(t, rep.Items, found)
	}
	// Nothing imported: no statement series at all.
	got, err := scrapeStatements(w.addr)
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"paycb_statement_metrics_errors_total": 0}, got)

	// WeChat: tenant 1001 reconciled yesterday (two payments no callback
	// brought); tenant 1002 reconciled the day before (one) and has
	// imported yesterday's statement without reconciling it. Alipay:
	// tenant 1001 reconciled yesterday (one).
	imp(1001, channels.WeChat, yesterday, "wx-1", "wx-2")
	reconcile(1001, channels.WeChat, yesterday, 2)
	imp(1002, channels.WeChat, before, "wx-3")
	reconcile(1002, channels.WeChat, before, 1)
	imp(1002, channels.WeChat, yesterday, "wx-4")
	imp(1001, channels.Alipay, yesterday, "ali-1")
	reconcile(1001, channels.Alipay, yesterday, 1)

	want := map[string]float64{
		`paycb_statement_last_reconciled_day_timestamp_seconds{channel="WECHAT"}`:      float64(before.Unix()),
		`paycb_statement_last_reconciled_day_timestamp_seconds{channel="ALIPAY"}`:      float64(yesterday.Unix()),
		`paycb_statement_files_unreconciled{channel="WECHAT"}`:                         1,
		`paycb_statement_files_unreconciled{channel="ALIPAY"}`:                         0,
		`paycb_statement_discrepancies{category="missing_in_ledger",channel="WECHAT"}`: 3,
		`paycb_statement_discrepancies{category="missing_in_ledger",channel="ALIPAY"}`: 1,
		`paycb_statement_discrepancies{category="amount_mismatch",channel="WECHAT"}`:   0,
		`paycb_statement_metrics_errors_total`:                                         0,
	}
	poll(t, 10*time.Second, "the reconciled statements in /metrics", func() (bool, string) {
		got, err = scrapeStatements(w.addr)
		if err != nil {
			return false, err.Error()
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return false, fmt.Sprintf("%s: %v", k, got[k])
			}
		}
		return true, ""
	})
	for k, v := range want {
		assert.Equal(t, v, got[k], k) //nolint:testifylint // exact: counts and whole seconds
		assert.Contains(t, got, k)
	}
	assert.Len(t, got, 2*(1+1+4)+1, "two channels, each day, unreconciled and four categories; the error count")

	// A real Prometheus with the rules: the series arrive, both alerts are
	// pending (they wait 1h and 15m before firing).
	bin := requireTool(t, "prometheus")
	base := startPrometheus(t, bin, w.addr)
	for q, v := range map[string]float64{
		`paycb_statement_discrepancies{job="paycallback",channel="WECHAT",category="missing_in_ledger"}`:                     3,
		`count(ALERTS{alertname="PaycbStatementDiscrepancies",alertstate="pending",category="missing_in_ledger"})`:           2,
		`count(ALERTS{alertname="PaycbStatementUnreconciled",alertstate="pending",channel="WECHAT"})`:                        1,
		`count(ALERTS{alertname="PaycbStatementUnreconciled",channel="ALIPAY"}) or vector(0)`:                                0,
		`time() - paycb_statement_last_reconciled_day_timestamp_seconds{job="paycallback",channel="WECHAT"} > 86400 * 2 - 1`: 1,
	} {
		poll(t, 30*time.Second, q, func() (bool, string) {
			got, ok, err := query(base, q)
			switch {
			case err != nil:
				return false, err.Error()
			case !ok:
				return false, "no single sample"
			case strings.HasPrefix(q, "time()"):
				return got > 0, fmt.Sprint("got ", got)
			default:
				return got == v, fmt.Sprint("got ", got)
			}
		})
	}

	// At the next refresh: reconciling tenant 1002's yesterday moves
	// WeChat's day and clears its unreconciled statement; its one
	// discrepancy adds to those of the days still open (1001's yesterday,
	// 1002's day before).
	reconcile(1002, channels.WeChat, yesterday, 1)
	poll(t, 10*time.Second, "WeChat's last reconciled day to move", func() (bool, string) {
		got, err = scrapeStatements(w.addr)
		if err != nil {
			return false, err.Error()
		}
		day := got[`paycb_statement_last_reconciled_day_timestamp_seconds{channel="WECHAT"}`]
		return day == float64(yesterday.Unix()), fmt.Sprint("got ", day)
	})
	assert.Equal(t, float64(yesterday.Unix()), got[`paycb_statement_last_reconciled_day_timestamp_seconds{channel="WECHAT"}`]) //nolint:testifylint // whole seconds
	assert.Zero(t, got[`paycb_statement_files_unreconciled{channel="WECHAT"}`])
	assert.Equal(t, 4.0, got[`paycb_statement_discrepancies{category="missing_in_ledger",channel="WECHAT"}`]) //nolint:testifylint // a count
	poll(t, 30*time.Second, "PaycbStatementUnreconciled to clear", func() (bool, string) {
		got, ok, err := query(base, `count(ALERTS{alertname="PaycbStatementUnreconciled"}) or vector(0)`)
		if err != nil || !ok {
			return false, fmt.Sprint(err, ok)
		}
		return got == 0, fmt.Sprint("got ", got)
	})
}
