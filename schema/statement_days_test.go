package schema_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/schema"
)

// applyUpTo runs the dialect's migrations of versions below limit, as
// statements, without the runner (so a later one can be applied on data).
func applyUpTo(t *testing.T, db *bun.DB, dialect string, from, limit int) {
	t.Helper()
	mig, err := schema.Migrations(dialect)
	require.NoError(t, err)
	for _, m := range mig {
		if m.Version < from || m.Version >= limit {
			continue
		}
		for _, st := range schema.Statements(m.SQL) {
			_, err := db.ExecContext(context.Background(), st)
			require.NoError(t, err, "migration %s: %s", m.Name, st)
		}
	}
}

// openDialect opens an empty database of dialect ("mysql": a fresh
// database on the test server; "sqlite": a file in the test's directory),
// closed when the test ends.
func openDialect(t *testing.T, dialect string) *bun.DB {
	t.Helper()
	var (
		db  *bun.DB
		err error
	)
	if dialect == "mysql" {
		db, err = sqldb.OpenMySQL(sqldbtest.NewDatabase(t))
	} else {
		db, err = sqldb.OpenSQLite(filepath.Join(t.TempDir(), "paycb.db"))
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestStatementDaysMigrationKeepsTheLines: migration 0008 moves every line
// held to ss_statement_entry, its source the day's file and no merchant,
// drops ss_statement_line and adds the version columns; on MySQL running it
// again changes nothing.
func TestStatementDaysMigrationKeepsTheLines(t *testing.T) {
	for _, dialect := range []string{"mysql", "sqlite"} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			db := openDialect(t, dialect)
			applyUpTo(t, db, dialect, 1, 8)
			for _, q := range []string{
				"INSERT INTO ss_statement_file (id, tenant_id, channel_code, statement_day, format, sha1, line_count, imported_at) " +
					"VALUES (7, 1, 'SQB', '2024-03-15', 'sqb-query', 'aaaa', 2, '2024-03-16 02:00:00')",
				"INSERT INTO ss_statement_line (file_id, line_no, kind, channel_trade_no, merchant_order_no, refund_no, amount, " +
					"settled_amount, fee_micro_yuan, status, channel_time, currency) VALUES " +
					"(7, 1, 'ORDER', '7801', 'C1', '', 100, 100, 0, 'PAID', '2024-03-15 01:00:00', 'CNY'), " +
					"(7, 2, 'ORDER', '7802', 'C2', '', 200, 0, 0, 'REFUNDED', '2024-03-15 02:00:00', 'CNY')",
			} {
				_, err := db.ExecContext(ctx, q)
				require.NoError(t, err)
			}
			applyUpTo(t, db, dialect, 8, 9)
			if dialect == "mysql" {
				applyUpTo(t, db, dialect, 8, 9) // after a crash before it was recorded
			}
			var rows []struct {
				FileID   int64  `bun:"file_id"`
				Source   string `bun:"source_sha1"`
				LineNo   int    `bun:"line_no"`
				Merchant string `bun:"merchant_id"`
				Trade    string `bun:"channel_trade_no"`
			}
			require.NoError(t, db.NewSelect().TableExpr("ss_statement_entry").
				Column("file_id", "source_sha1", "line_no", "merchant_id", "channel_trade_no").OrderExpr("line_no").Scan(ctx, &rows))
			require.Len(t, rows, 2)
			assert.Equal(t, int64(7), rows[0].FileID)
			assert.Equal(t, "aaaa", rows[0].Source)
			assert.Empty(t, rows[0].Merchant)
			assert.Equal(t, "7802", rows[1].Trade)
			var n int
			err := db.NewSelect().TableExpr("ss_statement_line").ColumnExpr("COUNT(*)").Scan(ctx, &n)
			require.Error(t, err, "ss_statement_line is gone")
			var version string
			require.NoError(t, db.NewSelect().TableExpr("ss_statement_file").Column("version").Scan(ctx, &version))
			assert.Empty(t, version)
			require.NoError(t, db.NewSelect().TableExpr("ss_statement_reconcile").ColumnExpr("COUNT(statement_version)").Scan(ctx, &n))
		})
	}
}
