package settlement

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

func TestIsTiDB(t *testing.T) {
	for version, tidb := range map[string]bool{
		"8.0.11-TiDB-v8.5.0":          true,
		"8.0.11-TiDB-None":            true,
		"5.7.25-TiDB-v7.5.1":          true,
		"10.11.6-MariaDB-0+deb12u1":   false,
		"11.4.2-MariaDB-ubu2404-log":  false,
		"8.4.3":                       false,
		"8.0.36-0ubuntu0.22.04.1-log": false,
	} {
		assert.Equal(t, tidb, isTiDB(version), version)
	}
}

// TestSkipLockedFollowsTheServer: the server is asked once whether it is
// TiDB (whose batches' locking reads wait, since it accepts SKIP LOCKED but
// returns held rows unlocked; MySQL and MariaDB skip held rows), and the
// answer is kept.
func TestSkipLockedFollowsTheServer(t *testing.T) {
	ctx := context.Background()
	db := sqldbtest.MustMySQL(t)
	svc, err := New(db, idempotent.NewStore(db), nil, nil)
	require.NoError(t, err)
	var version string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version))
	tidb, err := svc.onTiDB(ctx)
	require.NoError(t, err)
	assert.Equal(t, isTiDB(version), tidb, "server %s", version)
	assert.True(t, svc.engine.known)

	// Asked once: a closed pool is not asked again.
	require.NoError(t, db.Close())
	again, err := svc.onTiDB(ctx)
	require.NoError(t, err)
	assert.Equal(t, tidb, again)

	lite := sqldbtest.MustSQLite(t)
	liteSvc, err := New(lite, idempotent.NewStore(lite), nil, nil)
	require.NoError(t, err)
	tidb, err = liteSvc.onTiDB(ctx)
	require.NoError(t, err)
	assert.False(t, tidb, "SQLite is not TiDB")
}
