package statementbook_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestStatementStandings reads, per tenant and channel, the window's first
// imported day, latest reconciled day, the counts of every day still open,
// the days not reconciled against the lines held, and the days with no
// statement at all.
func TestStatementStandings(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		now := time.Date(2024, 6, 10, 11, 0, 0, 0, statements.Beijing) // window: 06-03 .. 06-09
		day := func(d int) time.Time { return time.Date(2024, 6, d, 0, 0, 0, 0, statements.Beijing) }
		imp := func(tenant int64, ch channels.Channel, d int, sha string) {
			t.Helper()
			st := statements.Statement{Channel: ch, Format: "test", SHA1: sha, Lines: []statements.Line{{
				LineNo: 2, Channel: ch, Kind: statements.KindPayment, TradeNo: fmt.Sprintf("T-%d-%d", tenant, d),
				Amount: 100, SettledAmount: 100, Status: "SUCCESS", Time: day(d).Add(9 * time.Hour), Currency: "CNY",
			}}}
			_, err := statementbook.ImportStatement(ctx, db, tenant, st, now)
			require.NoError(t, err)
		}
		// rec records a run of the day against the statement held (its
		// version), or, for a day holding none, against sha alone.
		rec := func(tenant int64, ch channels.Channel, d int, sha string, items ...string) {
			t.Helper()
			rep := statementbook.StatementReport{TenantID: tenant, Channel: string(ch), Day: day(d).Format(time.DateOnly)}
			var held []string
			require.NoError(t, db.NewSelect().TableExpr("ss_statement_file").Column("version").
				Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).Where("statement_day = ?", rep.Day).
				Scan(ctx, &held))
			if len(held) > 0 {
				rep.StatementVersion = held[0]
			}
			for _, c := range items {
				rep.Items = append(rep.Items, statementbook.StatementItem{Category: c})
			}
			require.NoError(t, statementbook.RecordStatementResult(ctx, db, rep, sha, now))
		}
		wx, ali := channels.WeChat, channels.Alipay

		// Tenant 1, WeChat: 06-02 (before the window) .. 06-09 imported and
		// reconciled, the latest with discrepancies; today's import is left out.
		for d := 2; d <= 9; d++ {
			imp(1, wx, d, fmt.Sprint("w1-", d))
			rec(1, wx, d, fmt.Sprint("w1-", d), statementbook.StatementMissingInStatement)
		}
		rec(1, wx, 9, "w1-9", statementbook.StatementMissingInLedger, statementbook.StatementMissingInLedger, statementbook.StatementStatusMismatch)
		imp(1, wx, 10, "w1-10")
		// Tenant 2, WeChat: 06-05 reconciled, 06-06 skipped, 06-07
		// reconciled, 06-08 reconciled and then corrected, 06-09 not yet.
		for d := 5; d <= 9; d++ {
			imp(2, wx, d, fmt.Sprint("w2-", d))
		}
		rec(2, wx, 5, "w2-5")
		rec(2, wx, 7, "w2-7", statementbook.StatementAmountMismatch)
		rec(2, wx, 8, "w2-8")
		imp(2, wx, 8, "w2-8-corrected")
		// Tenant 3, Alipay: imported, never reconciled.
		imp(3, ali, 6, "a3-6")
		imp(3, ali, 7, "a3-7")
		// Tenant 4, Alipay: only before the window: not counted.
		imp(4, ali, 1, "a4-1")
		rec(4, ali, 1, "a4-1")

		// Tenant 5, WeChat: 06-07 reconciled; 06-08 has nothing imported
		// (06-09 neither, but yesterday's statement may not exist yet); a
		// result recorded for 06-09 without a statement (as a quiet day
		// was, before no_statement) stands for nothing.
		imp(5, wx, 7, "w5-7")
		rec(5, wx, 7, "w5-7", statementbook.StatementMissingInLedger)
		rec(5, wx, 9, "")
		five := func() metrics.StatementStanding {
			t.Helper()
			got, err := statementbook.StatementStandings(ctx, db, now, 7)
			require.NoError(t, err)
			for _, s := range got {
				if s.TenantID == 5 {
					return s
				}
			}
			require.Fail(t, "no standing of tenant 5")
			return metrics.StatementStanding{}
		}
		s5 := five()
		assert.True(t, s5.LastReconciledDay.Equal(day(7)), "last %s", s5.LastReconciledDay)
		assert.Equal(t, 1, s5.MissingDays, "06-08: nothing imported, not declared empty")
		assert.Zero(t, s5.UnreconciledDays)
		// The channel's answer for 06-08: no bill. Declared, not reconciled
		// yet; reconciled, the day is clean.
		_, err := statementbook.DeclareEmptyStatements(ctx, db, 5, wx, []string{"2024-06-08"}, now)
		require.NoError(t, err)
		s5 = five()
		assert.Zero(t, s5.MissingDays)
		assert.Equal(t, 1, s5.UnreconciledDays, "declared empty, not reconciled yet")
		_, err = statementbook.ReconcileStatement(ctx, db, 5, wx, "2024-06-08")
		require.NoError(t, err)
		s5 = five()
		assert.Zero(t, s5.UnreconciledDays)
		assert.True(t, s5.LastReconciledDay.Equal(day(8)), "last %s", s5.LastReconciledDay)
		assert.Equal(t, 1, s5.Discrepancies[statementbook.StatementMissingInLedger], "06-07's, still open")

		got, err := statementbook.StatementStandings(ctx, db, now, 7)
		require.NoError(t, err)
		byKey := map[string]metrics.StatementStanding{}
		for _, s := range got {
			byKey[fmt.Sprint(s.TenantID, s.Channel)] = s
		}
		require.Len(t, byKey, 4, "%+v", got)

		s := byKey["1WECHAT"]
		assert.True(t, s.FirstImportedDay.Equal(day(3)), "first %s", s.FirstImportedDay)
		assert.True(t, s.LastReconciledDay.Equal(day(9)), "last %s", s.LastReconciledDay)
		assert.Equal(t, map[string]int{"missing_in_ledger": 2, "missing_in_statement": 6, "amount_mismatch": 0, "status_mismatch": 1}, s.Discrepancies,
			"every day still open: 06-03 .. 06-08 one missing_in_statement each, 06-09 rerun")
		assert.Zero(t, s.UnreconciledDays)
		assert.Zero(t, s.MissingDays)

		s = byKey["2WECHAT"]
		assert.True(t, s.FirstImportedDay.Equal(day(5)), "first %s", s.FirstImportedDay)
		assert.True(t, s.LastReconciledDay.Equal(day(8)), "last %s", s.LastReconciledDay)
		assert.Equal(t, map[string]int{"missing_in_ledger": 0, "missing_in_statement": 0, "amount_mismatch": 1, "status_mismatch": 0}, s.Discrepancies,
			"06-07's, though 06-08 is the latest reconciled")
		assert.Equal(t, 3, s.UnreconciledDays, "06-06 skipped, 06-08 corrected since, 06-09 not yet")

		s = byKey["3ALIPAY"]
		assert.True(t, s.FirstImportedDay.Equal(day(6)), "first %s", s.FirstImportedDay)
		assert.True(t, s.LastReconciledDay.IsZero())
		assert.Nil(t, s.Discrepancies)
		assert.Equal(t, 2, s.UnreconciledDays)
		assert.Equal(t, 1, s.MissingDays, "06-08: no statement")
	})
}
