package ops_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestStatementStandings reads, per tenant and channel, the window's first
// imported day, latest reconciled day with its counts, and the days not
// reconciled against the file held.
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
			_, err := ops.ImportStatement(ctx, db, tenant, st, now)
			require.NoError(t, err)
		}
		rec := func(tenant int64, ch channels.Channel, d int, sha string, items ...string) {
			t.Helper()
			rep := ops.StatementReport{TenantID: tenant, Channel: string(ch), Day: day(d).Format(time.DateOnly)}
			for _, c := range items {
				rep.Items = append(rep.Items, ops.StatementItem{Category: c})
			}
			require.NoError(t, ops.RecordStatementResult(ctx, db, rep, sha, now))
		}
		wx, ali := channels.WeChat, channels.Alipay

		// Tenant 1, WeChat: 06-02 (before the window) .. 06-09 imported and
		// reconciled, the latest with discrepancies; today's import is left out.
		for d := 2; d <= 9; d++ {
			imp(1, wx, d, fmt.Sprint("w1-", d))
			rec(1, wx, d, fmt.Sprint("w1-", d), ops.StatementMissingInStatement)
		}
		rec(1, wx, 9, "w1-9", ops.StatementMissingInLedger, ops.StatementMissingInLedger, ops.StatementStatusMismatch)
		imp(1, wx, 10, "w1-10")
		// Tenant 2, WeChat: 06-05 reconciled, 06-06 skipped, 06-07
		// reconciled, 06-08 reconciled and then corrected, 06-09 not yet.
		for d := 5; d <= 9; d++ {
			imp(2, wx, d, fmt.Sprint("w2-", d))
		}
		rec(2, wx, 5, "w2-5")
		rec(2, wx, 7, "w2-7", ops.StatementAmountMismatch)
		rec(2, wx, 8, "w2-8")
		imp(2, wx, 8, "w2-8-corrected")
		// Tenant 3, Alipay: imported, never reconciled.
		imp(3, ali, 6, "a3-6")
		imp(3, ali, 7, "a3-7")
		// Tenant 4, Alipay: only before the window: not counted.
		imp(4, ali, 1, "a4-1")
		rec(4, ali, 1, "a4-1")

		// Tenant 5, WeChat: 06-07 reconciled, 06-08 and 06-09 without a
		// bill (no trades) reconciled as quiet days; then a late bill for
		// 06-09 turns up and is imported.
		imp(5, wx, 7, "w5-7")
		rec(5, wx, 7, "w5-7", ops.StatementMissingInLedger)
		rec(5, wx, 8, "")
		rec(5, wx, 9, "")
		quiet, err := ops.StatementStandings(ctx, db, now, 7)
		require.NoError(t, err)
		var five []metrics.StatementStanding
		for _, s := range quiet {
			if s.TenantID == 5 {
				five = append(five, s)
			}
		}
		require.Len(t, five, 1)
		assert.True(t, five[0].LastReconciledDay.Equal(day(9)), "last %s", five[0].LastReconciledDay)
		assert.Zero(t, five[0].Discrepancies[ops.StatementMissingInLedger], "the quiet day's")
		assert.Zero(t, five[0].UnreconciledDays)
		imp(5, wx, 9, "w5-9")

		got, err := ops.StatementStandings(ctx, db, now, 7)
		require.NoError(t, err)
		byKey := map[string]metrics.StatementStanding{}
		for _, s := range got {
			byKey[fmt.Sprint(s.TenantID, s.Channel)] = s
		}
		require.Len(t, byKey, 4, "%+v", got)
		assert.Equal(t, 1, byKey["5WECHAT"].UnreconciledDays, "the bill imported after the quiet day was recorded")

		s := byKey["1WECHAT"]
		assert.True(t, s.FirstImportedDay.Equal(day(3)), "first %s", s.FirstImportedDay)
		assert.True(t, s.LastReconciledDay.Equal(day(9)), "last %s", s.LastReconciledDay)
		assert.Equal(t, map[string]int{"missing_in_ledger": 2, "missing_in_statement": 0, "amount_mismatch": 0, "status_mismatch": 1}, s.Discrepancies)
		assert.Zero(t, s.UnreconciledDays)

		s = byKey["2WECHAT"]
		assert.True(t, s.FirstImportedDay.Equal(day(5)), "first %s", s.FirstImportedDay)
		assert.True(t, s.LastReconciledDay.Equal(day(8)), "last %s", s.LastReconciledDay)
		assert.Equal(t, map[string]int{"missing_in_ledger": 0, "missing_in_statement": 0, "amount_mismatch": 0, "status_mismatch": 0}, s.Discrepancies)
		assert.Equal(t, 3, s.UnreconciledDays, "06-06 skipped, 06-08 corrected since, 06-09 not yet")

		s = byKey["3ALIPAY"]
		assert.True(t, s.FirstImportedDay.Equal(day(6)), "first %s", s.FirstImportedDay)
		assert.True(t, s.LastReconciledDay.IsZero())
		assert.Nil(t, s.Discrepancies)
		assert.Equal(t, 2, s.UnreconciledDays)
	})
}
