package schema_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
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

func TestCheckComparesAppliedWithEmbeddedMigrations(t *testing.T) {
	mig, err := schema.Migrations("mysql")
	require.NoError(t, err)
	newest := mig[len(mig)-1].Version
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		st, err := schema.Check(ctx, db)
		require.NoError(t, err, "a current schema passes")
		assert.Equal(t, newest, st.Embedded)
		assert.Len(t, st.Applied, len(mig))
		assert.Empty(t, st.Missing)
		assert.Empty(t, st.Newer)

		// A newer binary migrated it: compatible, reported.
		_, err = db.ExecContext(ctx, "INSERT INTO ss_schema_migration (version, name, applied_at) VALUES (?, 'future', 'now')", newest+1)
		require.NoError(t, err)
		st, err = schema.Check(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, []int{newest + 1}, st.Newer)

		// An older schema: the newest migration is missing.
		_, err = db.ExecContext(ctx, "DELETE FROM ss_schema_migration WHERE version = ?", newest)
		require.NoError(t, err)
		st, err = schema.Check(ctx, db)
		require.ErrorIs(t, err, schema.ErrOutdated)
		assert.Equal(t, []int{newest}, st.Missing)
		assert.Contains(t, err.Error(), fmt.Sprintf("version %d expected", newest))

		// A version table with nothing in it.
		_, err = db.ExecContext(ctx, "DELETE FROM ss_schema_migration")
		require.NoError(t, err)
		_, err = schema.Check(ctx, db)
		require.ErrorIs(t, err, schema.ErrNotMigrated)
	})
}

func TestCheckFindsAnEmptyDatabaseNotMigrated(t *testing.T) {
	for name, open := range map[string]func(testing.TB) (*bun.DB, error){
		"mysql": func(tb testing.TB) (*bun.DB, error) { tb.Helper(); return sqldb.OpenMySQL(sqldbtest.NewDatabase(tb)) },
		"sqlite": func(tb testing.TB) (*bun.DB, error) {
			tb.Helper()
			return sqldb.OpenSQLite(filepath.Join(tb.TempDir(), "empty.db"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			db, err := open(t)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			_, err = schema.Check(context.Background(), db)
			require.ErrorIs(t, err, schema.ErrNotMigrated)
			assert.Contains(t, err.Error(), "no version table")
		})
	}
}
