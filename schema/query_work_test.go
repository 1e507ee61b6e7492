package schema_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// TestQueryWorkMigrationRunsAgain: on MySQL, migration 0017 run again
// after it completed (a crash before its version was recorded) changes
// nothing and fails on nothing; the registrations keep the querier's
// columns and their defaults.
func TestQueryWorkMigrationRunsAgain(t *testing.T) {
	ctx := context.Background()
	db := sqldbtest.MustMySQL(t)
	_, err := db.ExecContext(ctx, `INSERT INTO ss_refund_request (tenant_id, channel_code, channel_trade_no, refund_no, amount, status, created_at, updated_at)
VALUES (1001, 'WECHAT', 'T1', 'R1', 1, 'REGISTERED', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`)
	require.NoError(t, err)
	applyUpTo(t, db, "mysql", 17, 18)
	var row struct {
		Stopped int `bun:"query_stopped"`
		Retries int `bun:"query_retries"`
		Count   int `bun:"query_count"`
	}
	require.NoError(t, db.NewSelect().Table("ss_refund_request").Column("query_stopped", "query_retries", "query_count").Scan(ctx, &row))
	assert.Zero(t, row.Stopped+row.Retries+row.Count)
	n, err := db.NewSelect().Table("ss_query_log").Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}
