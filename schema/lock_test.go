package schema_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/schema"
)

// TestConcurrentMigrate starts many runners on one fresh database at once,
// each with a pool of its own (as separate processes would; with
// TEST_MYSQL_NODES each pool's connections go to different cluster nodes):
// every runner succeeds, each migration is applied by exactly one of them,
// and the lock is released.
func TestConcurrentMigrate(t *testing.T) {
	const runners = 12
	dsn := sqldbtest.NewDatabase(t)
	migs, err := schema.Migrations("mysql")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	pools := make([]*bun.DB, runners)
	for i := range pools {
		db, err := sqldb.OpenMySQL(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		pools[i] = db
	}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		applied = make([][]int, runners)
		errs    = make([]error, runners)
	)
	for i, db := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			applied[i], errs[i] = schema.Migrate(ctx, db)
		}()
	}
	close(start)
	wg.Wait()

	times := map[int]int{}
	for i := range pools {
		require.NoError(t, errs[i], "runner %d", i)
		for _, v := range applied[i] {
			times[v]++
		}
	}
	for _, m := range migs {
		assert.Equal(t, 1, times[m.Version], "migration %s applied once", m.Name)
	}
	db := pools[0]
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_schema_migration").Scan(ctx, &n))
	assert.Equal(t, len(migs), n)
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_schema_lock").Scan(ctx, &n))
	assert.Zero(t, n, "the lock is released")
	_, err = schema.Check(ctx, db)
	require.NoError(t, err)
}

// TestMigrateWaitsForAHeldLock: while another runner's unexpired claim is
// in the lock table, Migrate applies nothing and gives up when its context
// ends.
func TestMigrateWaitsForAHeldLock(t *testing.T) {
	db, err := sqldb.OpenMySQL(sqldbtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	holdLock(t, db, "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR")

	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	done, err := schema.Migrate(wctx, db)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, done)
	_, err = schema.Check(ctx, db)
	require.ErrorIs(t, err, schema.ErrNotMigrated, "nothing ran while the lock was held")
}

// TestMigrateTakesOverAnExpiredLock: a claim left by a runner that died
// (its expiry passed) does not block the next one.
func TestMigrateTakesOverAnExpiredLock(t *testing.T) {
	db, err := sqldb.OpenMySQL(sqldbtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holdLock(t, db, "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")

	done, err := schema.Migrate(ctx, db)
	require.NoError(t, err)
	assert.NotEmpty(t, done)
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_schema_lock").Scan(ctx, &n))
	assert.Zero(t, n, "the lock is released")
}

// holdLock writes another runner's claim on the migration lock, expiring at
// the SQL expression expires.
func holdLock(t *testing.T, db *bun.DB, expires string) {
	t.Helper()
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `CREATE TABLE ss_schema_lock (
  name       VARCHAR(64) NOT NULL PRIMARY KEY,
  owner      VARCHAR(64) NOT NULL,
  expires_at DATETIME(6) NOT NULL
)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO ss_schema_lock (name, owner, expires_at) VALUES ('migrate', 'someone-else', "+expires+")")
	require.NoError(t, err)
}

// TestMigrationLockIsRenewedWhileHeld: the holder pushes its claim's
// expiry forward, so a claim held longer than its lifetime never looks
// expired to another runner.
func TestMigrationLockIsRenewedWhileHeld(t *testing.T) {
	db, err := sqldb.OpenMySQL(sqldbtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lctx, release, restore, err := schema.LockForTest(ctx, db, 2*time.Second, 100*time.Millisecond)
	defer restore()
	require.NoError(t, err)

	var first time.Time
	require.NoError(t, db.QueryRowContext(ctx, "SELECT expires_at FROM ss_schema_lock").Scan(&first))
	require.Eventually(t, func() bool {
		var now time.Time
		return db.QueryRowContext(ctx, "SELECT expires_at FROM ss_schema_lock").Scan(&now) == nil && now.After(first)
	}, 20*time.Second, 50*time.Millisecond, "the expiry moves forward")
	require.NoError(t, lctx.Err(), "a renewed claim is not lost")
	require.NoError(t, release(ctx))
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ss_schema_lock").Scan(&n))
	assert.Zero(t, n, "the lock is released")
}

// TestMigrationLockLostCancelsTheMigration: when the claim is no longer
// the holder's (it expired and another runner took it over), the renewal
// cancels the holder's context, and the release says the lock was lost
// and leaves the other runner's claim alone.
func TestMigrationLockLostCancelsTheMigration(t *testing.T) {
	db, err := sqldb.OpenMySQL(sqldbtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lctx, release, restore, err := schema.LockForTest(ctx, db, 2*time.Second, 100*time.Millisecond)
	defer restore()
	require.NoError(t, err)

	_, err = db.ExecContext(ctx, "UPDATE ss_schema_lock SET owner = 'someone-else'")
	require.NoError(t, err)
	select {
	case <-lctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the holder's context outlived its claim")
	}
	require.ErrorContains(t, release(ctx), "expired while migrating")
	var owner string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT owner FROM ss_schema_lock").Scan(&owner))
	assert.Equal(t, "someone-else", owner)
}

// TestMigrationLockGivenUpWhenRenewalsFail: a holder whose renewals keep
// failing gives its claim up before the claim can expire, cancelling the
// migration, rather than migrating on beside a runner that took the
// expired claim over.
func TestMigrationLockGivenUpWhenRenewalsFail(t *testing.T) {
	db, err := sqldb.OpenMySQL(sqldbtest.NewDatabase(t))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lctx, release, restore, err := schema.LockForTest(ctx, db, 2*time.Second, 100*time.Millisecond)
	defer restore()
	require.NoError(t, err)

	require.NoError(t, db.Close()) // every renewal fails from now on
	select {
	case <-lctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the holder kept a claim it could not renew")
	}
	require.ErrorContains(t, release(ctx), "expired while migrating")
}

// TestMigrationLockGivenUpInTimeWhenTheServerStopsAnswering: a renewal is
// bounded (half the renewal interval), so that against a server that
// stopped answering the holder gives its claim up, cancelling the
// migration, while the claim still lasts, instead of waiting on the
// renewal (for the driver's read timeout, a minute) past the claim's
// expiry, when another runner may take it over.
func TestMigrationLockGivenUpInTimeWhenTheServerStopsAnswering(t *testing.T) {
	dsn := sqldbtest.NewDatabase(t)
	direct, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = direct.Close() })
	proxy, viaProxy := sqldbtest.NewProxy(t, dsn)
	db, err := sqldb.OpenMySQL(viaProxy)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lctx, release, restore, err := schema.LockForTest(ctx, db, 4*time.Second, 2*time.Second)
	defer restore()
	require.NoError(t, err)

	// Renewed through the proxy while the server answers.
	expiry := func() time.Time {
		var at time.Time
		require.NoError(t, direct.QueryRowContext(ctx, "SELECT expires_at FROM ss_schema_lock").Scan(&at))
		return at
	}
	first := expiry()
	require.Eventually(t, func() bool { return expiry().After(first) }, 20*time.Second, 20*time.Millisecond,
		"the expiry moves forward")

	proxy.Stall()
	defer proxy.Resume()
	select {
	case <-lctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder still waits on a renewal the server does not answer")
	}
	var lasts bool
	require.NoError(t, direct.QueryRowContext(ctx, "SELECT expires_at > UTC_TIMESTAMP(6) FROM ss_schema_lock").Scan(&lasts))
	assert.True(t, lasts, "the claim is given up before it can expire")
	require.ErrorContains(t, release(ctx), "expired while migrating")
}
