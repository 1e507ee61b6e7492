package ops

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
// worker's metrics: per tenant and channel with a statement imported in
// that window, the first day imported, the latest day reconciled and its
// discrepancies per category, and how many days imported have no result
// for the statement file held (never reconciled, or a corrected file
// imported since). Two grouped queries, each bounded by the window through
// the day indexes; the rows returned are at most tenants × channels. days
// below 1 counts as 1.
func StatementStandings(ctx context.Context, db bun.IDB, now time.Time, days int) ([]metrics.StatementStanding, error) {
	days = max(days, 1)
	y, m, d := now.In(statements.Beijing).Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, statements.Beijing)
	from, to := today.AddDate(0, 0, -days).Format(time.DateOnly), today.Format(time.DateOnly)

	type key struct {
		tenant  int64
		channel string
	}
	var imported []struct {
		TenantID     int64  `bun:"tenant_id"`
		Channel      string `bun:"channel_code"`
		FirstDay     string `bun:"first_day"`
		Unreconciled int    `bun:"unreconciled"`
	}
	if err := db.NewSelect().
		ColumnExpr("f.tenant_id, f.channel_code, MIN(f.statement_day) AS first_day").
		ColumnExpr("SUM(CASE WHEN r.statement_sha1 = f.sha1 THEN 0 ELSE 1 END) AS unreconciled").
		TableExpr("ss_statement_file AS f").
		Join("LEFT JOIN ss_statement_reconcile AS r ON r.tenant_id = f.tenant_id AND r.channel_code = f.channel_code AND r.statement_day = f.statement_day").
		Where("f.statement_day >= ?", from).Where("f.statement_day < ?", to).
		GroupExpr("f.tenant_id, f.channel_code").
		Scan(ctx, &imported); err != nil {
		return nil, fmt.Errorf("statement standings: read the statements imported since %s: %w", from, err)
	}
	var latest []struct {
		TenantID           int64  `bun:"tenant_id"`
		Channel            string `bun:"channel_code"`
		Day                string `bun:"statement_day"`
		MissingInLedger    int    `bun:"missing_in_ledger"`
		MissingInStatement int    `bun:"missing_in_statement"`
		AmountMismatch     int    `bun:"amount_mismatch"`
		StatusMismatch     int    `bun:"status_mismatch"`
	}
	lastDays := db.NewSelect().
		ColumnExpr("tenant_id, channel_code, MAX(statement_day) AS last_day").
		TableExpr("ss_statement_reconcile").
		Where("statement_day >= ?", from).Where("statement_day < ?", to).
		GroupExpr("tenant_id, channel_code")
	if err := db.NewSelect().
		ColumnExpr("r.tenant_id, r.channel_code, r.statement_day").
		ColumnExpr("r.missing_in_ledger, r.missing_in_statement, r.amount_mismatch, r.status_mismatch").
		TableExpr("ss_statement_reconcile AS r").
		Join("JOIN (?) AS l ON l.tenant_id = r.tenant_id AND l.channel_code = r.channel_code AND l.last_day = r.statement_day", lastDays).
		Scan(ctx, &latest); err != nil {
		return nil, fmt.Errorf("statement standings: read the latest days reconciled since %s: %w", from, err)
	}

	out := make([]metrics.StatementStanding, 0, len(imported))
	index := make(map[key]int, len(imported))
	for _, r := range imported {
		first, err := time.ParseInLocation(time.DateOnly, dateOnly(r.FirstDay), statements.Beijing)
		if err != nil {
			return nil, fmt.Errorf("statement standings: tenant %d %s: first day %q: %w", r.TenantID, r.Channel, r.FirstDay, err)
		}
		index[key{r.TenantID, r.Channel}] = len(out)
		out = append(out, metrics.StatementStanding{
			TenantID: r.TenantID, Channel: r.Channel, FirstImportedDay: first, UnreconciledDays: r.Unreconciled,
		})
	}
	for _, r := range latest {
		i, ok := index[key{r.TenantID, r.Channel}]
		if !ok {
			continue // a result whose file row is gone: nothing imported to stand for
		}
		day, err := time.ParseInLocation(time.DateOnly, dateOnly(r.Day), statements.Beijing)
		if err != nil {
			return nil, fmt.Errorf("statement standings: tenant %d %s: day %q: %w", r.TenantID, r.Channel, r.Day, err)
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
