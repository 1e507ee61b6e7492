package statementbook

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/statements"
)

// StatementStandings reads where each tenant stands with each channel's
// statements over the days days Beijing-time days before now's (the
// current day is left out: its statement is never complete), for the
// worker's metrics: per tenant and channel with a statement held in that
// window (imported, or declared empty), the first such day, the latest day
// reconciled and the discrepancies per category summed over the window's
// days held (each day's latest run: every day still open counts, not only
// the latest), how many days held have no result for the lines held
// (never reconciled, or changed since: statement_sha1 and
// statement_version must both be the day's), and how many days after the
// first and before yesterday have no statement at all (MissingDays;
// yesterday's statement may not exist yet, and a day not reconciled in time
// shows in the latest reconciled day). Two grouped queries, each bounded by
// the window through the day indexes; the rows returned are at most
// tenants × channels. days below 1 counts as 1.
func StatementStandings(ctx context.Context, db bun.IDB, now time.Time, days int) ([]metrics.StatementStanding, error) {
	days = max(days, 1)
	y, m, d := now.In(statements.Beijing).Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, statements.Beijing)
	from, to := today.AddDate(0, 0, -days).Format(time.DateOnly), today.Format(time.DateOnly)
	yesterday := today.AddDate(0, 0, -1)

	type key struct {
		tenant  int64
		channel string
	}
	var imported []struct {
		TenantID     int64  `bun:"tenant_id"`
		Channel      string `bun:"channel_code"`
		FirstDay     string `bun:"first_day"`
		Held         int    `bun:"held"`
		HeldBefore   int    `bun:"held_before"`
		Unreconciled int    `bun:"unreconciled"`
	}
	if err := db.NewSelect().
		ColumnExpr("f.tenant_id, f.channel_code, MIN(f.statement_day) AS first_day, COUNT(*) AS held").
		ColumnExpr("SUM(CASE WHEN f.statement_day < ? THEN 1 ELSE 0 END) AS held_before", yesterday.Format(time.DateOnly)).
		ColumnExpr("SUM(CASE WHEN r.statement_sha1 = f.sha1 AND r.statement_version = f.version THEN 0 ELSE 1 END) AS unreconciled").
		TableExpr("ss_statement_file AS f").
		Join("LEFT JOIN ss_statement_reconcile AS r ON r.tenant_id = f.tenant_id AND r.channel_code = f.channel_code AND r.statement_day = f.statement_day").
		Where("f.statement_day >= ?", from).Where("f.statement_day < ?", to).
		GroupExpr("f.tenant_id, f.channel_code").
		Scan(ctx, &imported); err != nil {
		return nil, fmt.Errorf("statement standings: read the statements imported since %s: %w", from, err)
	}
	var results []struct {
		TenantID           int64  `bun:"tenant_id"`
		Channel            string `bun:"channel_code"`
		LastDay            string `bun:"last_day"`
		MissingInLedger    int    `bun:"missing_in_ledger"`
		MissingInStatement int    `bun:"missing_in_statement"`
		AmountMismatch     int    `bun:"amount_mismatch"`
		StatusMismatch     int    `bun:"status_mismatch"`
	}
	// A result of a day with no statement held (recorded as a quiet day
	// before no_statement) stands for nothing.
	if err := db.NewSelect().
		ColumnExpr("r.tenant_id, r.channel_code, MAX(r.statement_day) AS last_day").
		ColumnExpr("SUM(r.missing_in_ledger) AS missing_in_ledger, SUM(r.missing_in_statement) AS missing_in_statement").
		ColumnExpr("SUM(r.amount_mismatch) AS amount_mismatch, SUM(r.status_mismatch) AS status_mismatch").
		TableExpr("ss_statement_reconcile AS r").
		Join("JOIN ss_statement_file AS f ON f.tenant_id = r.tenant_id AND f.channel_code = r.channel_code AND f.statement_day = r.statement_day").
		Where("r.statement_day >= ?", from).Where("r.statement_day < ?", to).
		GroupExpr("r.tenant_id, r.channel_code").
		Scan(ctx, &results); err != nil {
		return nil, fmt.Errorf("statement standings: read the days reconciled since %s: %w", from, err)
	}

	out := make([]metrics.StatementStanding, 0, len(imported))
	index := make(map[key]int, len(imported))
	for _, r := range imported {
		first, err := time.ParseInLocation(time.DateOnly, dateOnly(r.FirstDay), statements.Beijing)
		if err != nil {
			return nil, fmt.Errorf("statement standings: tenant %d %s: first day %q: %w", r.TenantID, r.Channel, r.FirstDay, err)
		}
		// The days from the first to the day before yesterday, less those held.
		missing := 0
		if span := daysBetween(first, yesterday); span > 0 {
			missing = max(span-r.HeldBefore, 0)
		}
		index[key{r.TenantID, r.Channel}] = len(out)
		out = append(out, metrics.StatementStanding{
			TenantID: r.TenantID, Channel: r.Channel, FirstImportedDay: first, UnreconciledDays: r.Unreconciled,
			MissingDays: missing,
		})
	}
	for _, r := range results {
		i, ok := index[key{r.TenantID, r.Channel}]
		if !ok {
			continue
		}
		day, err := time.ParseInLocation(time.DateOnly, dateOnly(r.LastDay), statements.Beijing)
		if err != nil {
			return nil, fmt.Errorf("statement standings: tenant %d %s: day %q: %w", r.TenantID, r.Channel, r.LastDay, err)
		}
		out[i].LastReconciledDay = day
		out[i].Discrepancies = map[string]int{
			StatementMissingInLedger:    r.MissingInLedger,
			StatementMissingInStatement: r.MissingInStatement,
			StatementAmountMismatch:     r.AmountMismatch,
			StatementStatusMismatch:     r.StatusMismatch,
		}
	}
	return out, nil
}

// daysBetween counts the Beijing-time days from a's to b's, b's left out.
func daysBetween(a, b time.Time) int {
	n := 0
	for d := a; d.Before(b); d = d.AddDate(0, 0, 1) {
		n++
	}
	return n
}
