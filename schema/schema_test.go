package schema_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/schema"
)

func TestMigrationsAreVersionedInBothDialects(t *testing.T) {
	my, err := schema.Migrations("mysql")
	require.NoError(t, err)
	lite, err := schema.Migrations("sqlite")
	require.NoError(t, err)
	require.NotEmpty(t, my)
	require.Len(t, lite, len(my), "every migration exists in both dialects")
	for i := range my {
		assert.Equal(t, my[i].Version, lite[i].Version)
		assert.Equal(t, i+1, my[i].Version, "versions are contiguous from 1")
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		again, err := schema.Migrate(ctx, db) // the helper migrated once already
		require.NoError(t, err)
		assert.Empty(t, again, "a current schema applies nothing")
		var n int
		require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_schema_migration").Scan(ctx, &n))
		mig, err := schema.Migrations("mysql")
		require.NoError(t, err)
		assert.Equal(t, len(mig), n)
	})
}

func TestStatementsSplitOnLineEndingSemicolons(t *testing.T) {
	got := schema.Statements("-- comment\nCREATE TABLE a (x INT);\n\nCREATE INDEX i ON a (x);\n")
	assert.Equal(t, []string{"CREATE TABLE a (x INT)", "CREATE INDEX i ON a (x)"}, got)
}
