package settlement_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// ledgerJoins records the statements that join the ledger.
type ledgerJoins struct {
	mu    sync.Mutex
	query []string
}

func (h *ledgerJoins) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (h *ledgerJoins) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	if strings.Contains(e.Query, "JOIN ss_ledger_entry") && strings.HasPrefix(strings.TrimSpace(e.Query), "SELECT") {
		h.mu.Lock()
		h.query = append(h.query, e.Query)
		h.mu.Unlock()
	}
}

// TestReconcileJoinsTheLedgerByItsKey: every reconcile statement that
// joins the ledger reads it by an index that covers what it joins on, never
// by idx_ledger_trade for a join by (tenant_id, idempotent_key). Right
// after a bulk load, before the server has gathered statistics (a fresh or
// restored database), MariaDB chose idx_ledger_trade, whose first column
// is tenant_id alone, for the POSTED-claims check: every ledger row of the
// tenant read for each claim, 49 s for 10,000 claims instead of 0.05 s.
func TestReconcileJoinsTheLedgerByItsKey(t *testing.T) {
	ctx := context.Background()
	hook := &ledgerJoins{}
	db := sqldbtest.MustMySQL(t).WithQueryHook(hook)
	// 3,000 POSTED claims of one tenant and their two ledger rows each,
	// loaded at once, so that the statistics are as stale as they get.
	_, err := db.ExecContext(ctx, `
INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, settle_outcome, fingerprint, created_at, settled_at)
WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 9), n(i) AS (SELECT a.i * 1000 + b.i * 100 + c.i * 10 + e.i + 1 FROM d a, d b, d c, d e WHERE a.i < 3)
SELECT 1, CONCAT('WECHAT:T', i, ':PAYMENT_RECEIVED'), 'PAYMENT_RECEIVED', 'SETTLED', 'POSTED', REPEAT('a', 64), NOW(6), NOW(6) FROM n`)
	require.NoError(t, err)
	for _, side := range []struct{ account, direction string }{{"channel_receivable", "DEBIT"}, {"merchant_payable", "CREDIT"}} {
		_, err = db.ExecContext(ctx, `
INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, account, direction, amount, currency, created_at)
WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 9), n(i) AS (SELECT a.i * 1000 + b.i * 100 + c.i * 10 + e.i + 1 FROM d a, d b, d c, d e WHERE a.i < 3)
SELECT 1, CONCAT('WECHAT:T', i, ':PAYMENT_RECEIVED'), 'WECHAT', CONCAT('T', i), ?, ?, 100, 'CNY', NOW(6) FROM n`,
			side.account, side.direction)
		require.NoError(t, err)
	}

	_, err = settlement.Reconcile(ctx, db, settlement.ReconcileOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, hook.query, "reconcile joins the ledger")

	tidb := sqldbtest.Engine(t, db).Engine == dbengine.TiDB
	byKey := 0
	for _, q := range hook.query {
		if !strings.Contains(q, "l.idempotent_key = ") {
			continue
		}
		for _, row := range explain(t, db.DB, q) {
			switch {
			case tidb:
				// TiDB's plan: one operator per row, the table and index
				// it reads in "access object".
				if access := row["access object"]; strings.Contains(access, "table:l") && strings.Contains(access, "index:") {
					byKey++
					assert.Contains(t, access, "index:uk_ledger_source", "a join by the ledger's key reads it by its key:\n%s", q)
				}
			case row["table"] == "l":
				byKey++
				assert.Equal(t, "uk_ledger_source", row["key"], "a join by the ledger's key reads it by its key:\n%s", q)
			}
		}
	}
	assert.Positive(t, byKey, "the POSTED-claims check joins the ledger by its key")
}

// explain returns the plan rows of q, column name to value, read on the
// pool under the hook so that the EXPLAINs are not recorded.
func explain(t *testing.T, db *sql.DB, q string) []map[string]string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN "+q)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		out = append(out, row)
	}
	require.NoError(t, rows.Err())
	return out
}
