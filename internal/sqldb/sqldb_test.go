package sqldb_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// TestMySQLConfigOverridesTheDSN: the settings the guarantees rely on win
// over whatever the DSN says.
func TestMySQLConfigOverridesTheDSN(t *testing.T) {
	cfg, err := sqldb.MySQLConfig("u:p@tcp(db:3306)/paycb?clientFoundRows=true&parseTime=false&loc=Local&sql_mode=%27%27")
	require.NoError(t, err)
	assert.False(t, cfg.ClientFoundRows, "affected rows must count changed rows: the claim upsert reads inserts from them")
	assert.True(t, cfg.ParseTime)
	assert.Equal(t, time.UTC, cfg.Loc)
	assert.Equal(t, "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'", cfg.Params["sql_mode"])
	assert.Equal(t, "'+00:00'", cfg.Params["time_zone"])
}

// TestMySQLConfigHidesTheDSN: a DSN that does not parse is refused without
// quoting it (it carries a password).
func TestMySQLConfigHidesTheDSN(t *testing.T) {
	_, err := sqldb.MySQLConfig("u:secret@tcp(db:3306/paycb")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret")
}

// TestMySQLSessionsAreReadCommitted: every connection of the pool runs at
// READ COMMITTED, whichever connection a transaction gets.
func TestMySQLSessionsAreReadCommitted(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	conns := make([]*sql.Conn, 4)
	for i := range conns {
		c, err := db.DB.Conn(ctx) // distinct connections, held at once
		require.NoError(t, err)
		conns[i] = c
	}
	for i, c := range conns {
		var level string
		err := c.QueryRowContext(ctx, "SELECT @@SESSION.transaction_isolation").Scan(&level)
		if err != nil { // MariaDB before 11.1 names it tx_isolation
			err = c.QueryRowContext(ctx, "SELECT @@SESSION.tx_isolation").Scan(&level)
		}
		require.NoError(t, err)
		assert.Equal(t, "READ-COMMITTED", level, "connection %d", i)
		require.NoError(t, c.Close())
	}
}

// TestOpenSetsTheLockWaitTimeout: a pool opened from the configuration
// gives every session an innodb_lock_wait_timeout of half the statement
// timeout, so a statement behind a held row lock fails in seconds.
func TestOpenSetsTheLockWaitTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		statement time.Duration
		want      int
	}{
		{"default", config.Default().DB.StatementTimeout, 5},
		{"at least one second", time.Second, 1},
		{"whole seconds", 7 * time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sqldb.LockWaitTimeout(tc.statement))
			cfg := config.Default().DB
			cfg.DSN = config.DSN(sqldbtest.NewDatabase(t))
			cfg.StatementTimeout = tc.statement
			db, err := sqldb.Open(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			ctx := context.Background()
			conns := make([]*sql.Conn, 3)
			for i := range conns {
				c, err := db.DB.Conn(ctx)
				require.NoError(t, err)
				conns[i] = c
			}
			for i, c := range conns {
				var got int
				require.NoError(t, c.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&got))
				assert.Equal(t, tc.want, got, "connection %d", i)
				require.NoError(t, c.Close())
			}
		})
	}
}
