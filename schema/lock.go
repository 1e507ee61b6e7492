package schema

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/dberr"
)

// The migration lock is a row of its own table, claimed by inserting it
// under its primary key and released by deleting it. It works wherever a
// unique key does: on one MariaDB or MySQL server, across the nodes of a
// Galera cluster (where GET_LOCK is local to the node it runs on, so two
// runners on two nodes would both hold it) and on TiDB. The row carries an
// expiry that its holder pushes forward while it migrates, so a runner
// that died holding it stops blocking the others once the expiry passes.
const lockName = "migrate"

// The lock's timing (variables for the tests' sake).
var (
	// lockTTL is how long a claim lasts without being renewed, in whole
	// seconds.
	lockTTL = 30 * time.Second
	// lockRenew is how often the holder renews it.
	lockRenew = lockTTL / 3
	// lockWait is how long Migrate waits for another runner's lock.
	lockWait = 90 * time.Second
	// lockPoll is the pause between two attempts to claim it.
	lockPoll = 100 * time.Millisecond
)

// lockTable holds the migration lock's row, when a runner holds it.
const lockTable = `CREATE TABLE IF NOT EXISTS ss_schema_lock (
  name       VARCHAR(64) NOT NULL PRIMARY KEY,
  owner      VARCHAR(64) NOT NULL,
  expires_at DATETIME(6) NOT NULL
)`

// ErrLockTimeout is wrapped by Migrate's error when another runner held the
// migration lock for longer than Migrate waits.
var ErrLockTimeout = errors.New("migrate: another migration holds the lock")

// execer runs a statement: a pool, or one connection of it.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// migrationLock is a claim on the lock row, renewed until released.
type migrationLock struct {
	db    execer
	owner string
	stop  context.CancelFunc
	done  chan struct{}
	lost  chan struct{}
}

// lockMigrations claims the lock row through conn, waiting up to lockWait
// for another holder to release it or let it expire; renewals go through
// db. It returns a context derived from ctx that is cancelled when the
// claim is lost (a renewal found the row gone or someone else's), and the
// lock to release. The claim is made on the connection that then reads the
// applied versions: on a cluster, the node that accepted the claim has
// applied the previous holder's release, and so every migration recorded
// before it.
func lockMigrations(ctx context.Context, db *bun.DB, conn execer) (context.Context, *migrationLock, error) {
	if _, err := conn.ExecContext(ctx, lockTable); err != nil {
		return nil, nil, fmt.Errorf("migrate: create lock table: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	owner := hex.EncodeToString(b[:])
	deadline := time.Now().Add(lockWait)
	for {
		claimed, err := claimLock(ctx, conn, owner)
		if err != nil {
			return nil, nil, err
		}
		if claimed {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%w for over %s", ErrLockTimeout, lockWait)
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("migrate: wait for the lock: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	l := &migrationLock{db: db, owner: owner, stop: cancel, done: make(chan struct{}), lost: make(chan struct{})}
	go l.renew(lctx, cancel)
	return lctx, l, nil
}

// claimLock makes one attempt: it deletes an expired claim, then inserts
// its own. A duplicate key means another runner holds the lock; so does a
// commit-time conflict (Galera's 1213 when another node committed the row
// first, TiDB's 9007), after which the next attempt meets the row.
func claimLock(ctx context.Context, db execer, owner string) (bool, error) {
	if _, err := db.ExecContext(ctx,
		"DELETE FROM ss_schema_lock WHERE name = ? AND expires_at < UTC_TIMESTAMP(6)", lockName); err != nil &&
		!dberr.IsRetryableConflict(err) {
		return false, fmt.Errorf("migrate: clear an expired lock: %w", err)
	}
	_, err := db.ExecContext(ctx,
		"INSERT INTO ss_schema_lock (name, owner, expires_at) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? SECOND)",
		lockName, owner, int(lockTTL/time.Second))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(dberr.ClassifyDuplicate(err), dberr.ErrDuplicateKey), dberr.IsRetryableConflict(err):
		return false, nil
	default:
		return false, fmt.Errorf("migrate: take lock: %w", err)
	}
}

// renew pushes the claim's expiry forward every lockRenew until ctx ends;
// when the row is no longer this claim's, it cancels the migration.
func (l *migrationLock) renew(ctx context.Context, cancel context.CancelFunc) {
	defer close(l.done)
	t := time.NewTicker(lockRenew)
	defer t.Stop()
	lastOK := time.Now() // the claim lasts lockTTL from at least here
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := time.Now()
		res, err := l.renewOnce(ctx)
		if err != nil {
			// A failed renewal is tried again next tick, as long as the
			// claim surely lasts until the tick after: past that, another
			// runner may take it over, so this one gives it up.
			if time.Since(lastOK) < lockTTL-lockRenew {
				continue
			}
			close(l.lost)
			cancel()
			return
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			close(l.lost)
			cancel()
			return
		}
		lastOK = at
	}
}

// renewOnce pushes the claim's expiry forward once. It is not waited for
// longer than half the renewal interval: a renewal that hangs (a server
// that stopped answering, a lock row another session holds) then fails
// in time for the next decision, so that the claim is given up while it
// surely lasts (lockRenew/2 before it can expire, at the latest) rather
// than kept, unrenewed, past its expiry by a statement still waiting.
func (l *migrationLock) renewOnce(ctx context.Context) (sql.Result, error) {
	rctx, cancel := context.WithTimeout(ctx, lockRenew/2)
	defer cancel()
	res, err := l.db.ExecContext(rctx,
		"UPDATE ss_schema_lock SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? SECOND WHERE name = ? AND owner = ?",
		int(lockTTL/time.Second), lockName, l.owner)
	if err != nil {
		return nil, fmt.Errorf("migrate: renew lock: %w", err)
	}
	return res, nil
}

// release stops the renewal and deletes the claim. It reports an error
// when the claim had been lost before the migrations finished.
func (l *migrationLock) release(ctx context.Context) error {
	l.stop()
	<-l.done
	select {
	case <-l.lost:
		return errors.New("migrate: the lock expired while migrating (renewals failed for over " + lockTTL.String() + ")")
	default:
	}
	// Released even when ctx has ended, but not waited for longer than the
	// claim lasts anyway.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockTTL)
	defer cancel()
	if _, err := l.db.ExecContext(rctx,
		"DELETE FROM ss_schema_lock WHERE name = ? AND owner = ?", lockName, l.owner); err != nil {
		return fmt.Errorf("migrate: release lock: %w", err)
	}
	return nil
}
