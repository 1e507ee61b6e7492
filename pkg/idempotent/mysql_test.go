package idempotent_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// The tests in this file exercise MySQL/MariaDB behaviour that SQLite has no
// counterpart for: snapshots, server-side KILL, network failures.

func TestAcquireReadsBackTheLatestCommittedClaim(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	store := idempotent.NewStore(db)
	c := claimFor(mustKey(t, "RR1"), 1001)

	// A REPEATABLE READ transaction takes its snapshot before the claim exists.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck
	var n int
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM ss_channel_idempotent").Scan(&n))

	res, err := store.Acquire(ctx, c)
	require.NoError(t, err)
	require.Equal(t, idempotent.Acquired, res.Kind)

	// The trap: inside the old snapshot the insert is refused as a duplicate,
	// yet a consistent read cannot see the row that refused it.
	_, err = tx.ExecContext(ctx, `INSERT INTO ss_channel_idempotent
		(tenant_id, idempotent_key, event_type, status, fingerprint, created_at)
		VALUES (?, ?, 'PAYMENT_RECEIVED', 'ACQUIRED', ?, ?)`, c.TenantID, string(c.Key), fp, time.Now().UTC())
	require.ErrorIs(t, idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey)
	require.NoError(t, tx.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM ss_channel_idempotent WHERE tenant_id = ? AND idempotent_key = ?",
		c.TenantID, string(c.Key)).Scan(&n))
	assert.Equal(t, 0, n, "the stale snapshot does not see the claim")

	// Acquire reads back outside any old snapshot and finds it.
	res, err = store.Acquire(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, idempotent.Duplicate, res.Kind)
	assert.Equal(t, c.Source, res.Existing.Source)
}

func TestAcquireUnreachableDatabaseIsAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	db, err := sqldb.OpenMySQL("root@tcp(" + addr + ")/test?timeout=2s")
	require.NoError(t, err)
	defer db.Close()
	_, err = idempotent.NewStore(db).Acquire(context.Background(), claimFor(mustKey(t, "NET1"), 1001))
	require.Error(t, err)
	require.NotErrorIs(t, err, idempotent.ErrDuplicateKey)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Contains(t, err.Error(), "acquire WECHAT:NET1:PAYMENT_RECEIVED")
}

func TestAcquireOnAKilledConnectionIsAnError(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	store := idempotent.NewStore(db)
	c := claimFor(mustKey(t, "KILL1"), 1001)

	// A second session holds the key's insert lock, uncommitted, so Acquire
	// blocks inside the server until we kill its connection.
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer holder.Rollback() //nolint:errcheck
	_, err = holder.ExecContext(ctx, `INSERT INTO ss_channel_idempotent
		(tenant_id, idempotent_key, event_type, status, fingerprint, created_at)
		VALUES (?, ?, 'PAYMENT_RECEIVED', 'ACQUIRED', ?, ?)`, c.TenantID, string(c.Key), fp, time.Now().UTC())
	require.NoError(t, err)
	var holderID int64
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&holderID))

	done := make(chan error, 1)
	go func() {
		_, err := store.Acquire(ctx, c)
		done <- err
	}()

	// Find the blocked session (it waits on the lock in an INSERT) and kill it.
	// The holder is excluded by id: the server may still list its finished
	// INSERT for a moment after answering it.
	var victim int64
	require.Eventually(t, func() bool {
		err := db.QueryRowContext(ctx, `SELECT id FROM information_schema.processlist
			WHERE db = DATABASE() AND info LIKE 'INSERT INTO %ss_channel_idempotent%' AND id <> CONNECTION_ID() AND id <> ?
			AND command = 'Query' ORDER BY id DESC LIMIT 1`, holderID).Scan(&victim)
		return err == nil && victim != 0
	}, 10*time.Second, 10*time.Millisecond)
	_, err = db.ExecContext(ctx, "KILL ?", victim)
	require.NoError(t, err)

	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Acquire did not return after its connection was killed")
	}
	require.Error(t, err)
	require.NotErrorIs(t, err, idempotent.ErrDuplicateKey)
	var myErr *mysql.MySQLError
	killed := errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		(errors.As(err, &myErr) && (myErr.Number == 1927 || myErr.Number == 1317))
	assert.True(t, killed, "a killed connection's error, got %v", err)

	// The holder rolls back: the key was never claimed, so a retry acquires it.
	require.NoError(t, holder.Rollback())
	res, err := store.Acquire(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, idempotent.Acquired, res.Kind)
}

func TestOverLongValuesAreErrorsNotDuplicates(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	store := idempotent.NewStore(db)

	// The builder refuses an over-long key before the database sees it.
	c := claimFor(idempotent.Key("WECHAT:"+strings.Repeat("x", 200)+":PAYMENT_RECEIVED"), 1001)
	_, err := store.Acquire(ctx, c)
	require.ErrorIs(t, err, idempotent.ErrInvalidKey)

	// Written straight into the column, strict mode refuses it (1406) rather
	// than truncating it into some other key; that is no duplicate either.
	_, err = db.ExecContext(ctx, `INSERT INTO ss_channel_idempotent
		(tenant_id, idempotent_key, event_type, status, fingerprint, created_at)
		VALUES (1001, ?, 'PAYMENT_RECEIVED', 'ACQUIRED', 'x', ?)`, strings.Repeat("k", 192), time.Now().UTC())
	require.Error(t, err)
	var myErr *mysql.MySQLError
	require.ErrorAs(t, err, &myErr)
	assert.Equal(t, uint16(1406), myErr.Number)
	assert.NotErrorIs(t, idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey)
}
