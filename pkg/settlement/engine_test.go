package settlement

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// TestSkipLockedFollowsTheServer: the server is asked once, by
// dbengine.Detect, whether it is TiDB (whose batches' locking reads wait,
// since it accepts SKIP LOCKED but returns held rows unlocked; MySQL and
// MariaDB skip held rows), and the answer is kept. tidb.sh runs it on a
// TiDB whose VERSION() is set to look like MySQL's, where the answer must
// still be TiDB. A question the server did not answer is an error, not an
// answer, and is asked again.
func TestSkipLockedFollowsTheServer(t *testing.T) {
	ctx := context.Background()
	db := sqldbtest.MustMySQL(t)
	svc, err := New(db, idempotent.NewStore(db), nil, nil)
	require.NoError(t, err)
	want := sqldbtest.Engine(t, db).Engine == dbengine.TiDB
	tidb, err := svc.onTiDB(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, tidb, "on %s", sqldbtest.ExpectedEngine())
	assert.True(t, svc.engine.known)

	// Asked once: a closed pool is not asked again.
	require.NoError(t, db.Close())
	again, err := svc.onTiDB(ctx)
	require.NoError(t, err)
	assert.Equal(t, tidb, again)

	// A server that cannot be asked: an error, nothing kept, asked again
	// once it answers.
	dsn := sqldbtest.NewDatabase(t)
	proxy, viaProxy := sqldbtest.NewProxy(t, dsn)
	cut, err := sqldb.OpenMySQL(viaProxy)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cut.Close() })
	cutSvc, err := New(cut, idempotent.NewStore(cut), nil, nil)
	require.NoError(t, err)
	proxy.Down()
	_, err = cutSvc.onTiDB(ctx)
	require.Error(t, err, "no answer is no engine")
	assert.False(t, cutSvc.engine.known)
	proxy.Up()
	tidb, err = cutSvc.onTiDB(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, tidb)
	assert.True(t, cutSvc.engine.known)

	lite := sqldbtest.MustSQLite(t)
	liteSvc, err := New(lite, idempotent.NewStore(lite), nil, nil)
	require.NoError(t, err)
	tidb, err = liteSvc.onTiDB(ctx)
	require.NoError(t, err)
	assert.False(t, tidb, "SQLite is not TiDB")
}
