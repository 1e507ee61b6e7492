package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/schema"
)

const insertClaim = `INSERT INTO ss_channel_idempotent
	(tenant_id, idempotent_key, event_type, status, fingerprint, created_at)
	VALUES (?, ?, 'PAYMENT_RECEIVED', 'ACQUIRED', ?, UTC_TIMESTAMP(6))`

// fpOther is a fingerprint other than fp: B's copy of the event.
const fpOther = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

// TestOneKeyInsertedFromTwoSessions: session A inserts a claim in an open
// transaction, session B inserts the same key on its own. With
// TEST_MYSQL_NODES the sessions are on two different nodes of a Galera
// cluster, which lock nothing across nodes: B commits at once, and A fails
// at COMMIT with 1213 "Deadlock found" (its write set lost certification).
// That error is not a duplicate, and A's retry meets the unique index:
// 1062, a duplicate. On one server B waits for A's row lock and gets 1062
// once A commits. Either way exactly one claim exists, and only 1062 ever
// says "already handled".
func TestOneKeyInsertedFromTwoSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(ctx, db)
	require.NoError(t, err)
	cluster := len(sqldbtest.Nodes()) > 1
	session := func(node int) bun.Conn {
		ndsn, err := sqldbtest.NodeDSN(dsn, node)
		require.NoError(t, err)
		pool, err := sqldb.OpenMySQL(ndsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = pool.Close() })
		conn, err := pool.Conn(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	a, b := session(0), session(1)
	var aID, bID int64
	require.NoError(t, a.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&aID))
	require.NoError(t, b.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&bID))

	const tenant, key = 7, "wechat:pay:T-CROSS-NODE"
	tx, err := a.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	_, err = tx.ExecContext(ctx, insertClaim, tenant, key, fp)
	require.NoError(t, err, "A's insert, uncommitted")

	bDone := make(chan error, 1)
	go func() {
		_, err := b.ExecContext(ctx, insertClaim, tenant, key, fpOther)
		bDone <- err
	}()

	var commitErr, bErr error
	if cluster {
		// B's node has no lock of A's: B commits without waiting.
		select {
		case bErr = <-bDone:
			require.NoError(t, bErr, "B commits on its own node at once")
		case <-time.After(30 * time.Second):
			t.Fatal("B waited for a lock held on another node")
		}
		commitErr = tx.Commit()
		require.Error(t, commitErr, "A's commit after B's must fail")
		assert.True(t, idempotent.IsDeadlock(commitErr), "a commit-time conflict (1213), got %v", commitErr)
		require.NotErrorIs(t, idempotent.ClassifyDuplicate(commitErr), idempotent.ErrDuplicateKey,
			"a commit-time conflict is never a duplicate")

		// The retry, a new transaction, meets B's row: 1062. A retry that
		// runs before A's node applied B's write set can lose
		// certification again (1213); it is retried the same way.
		var retryErr error
		require.Eventually(t, func() bool {
			_, retryErr = a.ExecContext(ctx, insertClaim, tenant, key, fp)
			return !idempotent.IsDeadlock(retryErr)
		}, 20*time.Second, 10*time.Millisecond)
		require.Error(t, retryErr, "A's retry inserted a second claim")
		require.ErrorIs(t, idempotent.ClassifyDuplicate(retryErr), idempotent.ErrDuplicateKey, "the retry meets 1062")
	} else {
		// One server: B waits for A's row lock. Commit A once B is seen
		// running its insert, then B gets 1062.
		require.Eventually(t, func() bool {
			var n int
			err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist
				WHERE id = ? AND info LIKE 'INSERT INTO ss_channel_idempotent%'`, bID).Scan(&n)
			return err == nil && n == 1
		}, 20*time.Second, 10*time.Millisecond, "B runs its insert")
		select {
		case bErr = <-bDone:
			t.Fatalf("B did not wait for A's uncommitted row: %v", bErr)
		default:
		}
		require.NoError(t, tx.Commit())
		bErr = <-bDone
		require.ErrorIs(t, idempotent.ClassifyDuplicate(bErr), idempotent.ErrDuplicateKey, "B meets A's row: 1062")
	}

	var n int
	require.NoError(t, db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM ss_channel_idempotent WHERE tenant_id = ? AND idempotent_key = ?", tenant, key).Scan(&n))
	assert.Equal(t, 1, n, "one claim for the key")
}

// TestConcurrentAcquireRetriedOnConflictHasExactlyOneWinner: many
// goroutines acquire one key at once, each retrying what the worker
// retries. With TEST_MYSQL_NODES their connections are spread over the
// cluster's nodes, and a loser may first fail with a commit-time conflict
// (1213); retried, it finds the winner's claim. Exactly one acquires, every
// other one ends Duplicate, and no conflict is ever taken for a duplicate.
func TestConcurrentAcquireRetriedOnConflictHasExactlyOneWinner(t *testing.T) {
	const n = 48
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := sqldbtest.MustMySQL(t)
	db.SetMaxOpenConns(n + 2)
	store := idempotent.NewStore(db)
	c := claimFor(mustKey(t, "RACE-NODES"), 1001)
	conns := make([]bun.Conn, n)
	for i := range conns { // open them first, one per node in turn
		var err error
		conns[i], err = db.Conn(ctx)
		require.NoError(t, err)
	}
	for _, conn := range conns {
		require.NoError(t, conn.Close())
	}

	var acquired, duplicate, conflicts atomic.Int64
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for attempt := 0; ; attempt++ {
				res, err := store.Acquire(ctx, c)
				if err != nil && idempotent.IsDeadlock(err) && attempt < 50 {
					if errors.Is(idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey) {
						errs <- fmt.Errorf("a conflict classified as a duplicate: %w", err)
						return
					}
					conflicts.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				switch res.Kind {
				case idempotent.Acquired:
					acquired.Add(1)
				case idempotent.Duplicate:
					duplicate.Add(1)
				default:
					errs <- fmt.Errorf("unexpected result %v", res.Kind)
				}
				return
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d commit-time conflicts retried", conflicts.Load())
	assert.Equal(t, int64(1), acquired.Load())
	assert.Equal(t, int64(n-1), duplicate.Load())
	assert.Equal(t, 1, countClaims(t, db, "tenant_id = ? AND idempotent_key = ?", 1001, string(c.Key)))
}

// TestConcurrentSettlersRetriedOnConflictPostOnce: many settle
// transactions of one claim at once, each with a business write of its
// own, retried on a commit-time conflict as the worker retries. With
// TEST_MYSQL_NODES they run on different nodes, where the fence's row lock
// is not a cluster lock: a loser may fail at COMMIT (1213) instead of
// waiting, and its retry then finds the fence taken. Exactly one commits
// its business write.
func TestConcurrentSettlersRetriedOnConflictPostOnce(t *testing.T) {
	const settlers = 16
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := sqldbtest.MustMySQL(t)
	store := idempotent.NewStore(db)
	c := claimFor(mustKey(t, "FENCE-NODES"), 1001)
	_, err := store.Acquire(ctx, c)
	require.NoError(t, err)

	var won, lost, conflicts atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, settlers)
	for i := range settlers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for attempt := 0; ; attempt++ {
				err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					if err := store.Settle(ctx, tx, c.TenantID, c.Key, idempotent.OutcomePosted); err != nil {
						return err
					}
					return insertPosting(ctx, tx, c.Key, fmt.Sprintf("acct:%d", i))
				})
				switch {
				case err != nil && idempotent.IsDeadlock(err) && attempt < 50:
					conflicts.Add(1)
					continue
				case err == nil:
					won.Add(1)
				case errors.Is(err, idempotent.ErrFenceLost):
					lost.Add(1)
				default:
					errs <- err
				}
				return
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d commit-time conflicts retried", conflicts.Load())
	assert.Equal(t, int64(1), won.Load())
	assert.Equal(t, int64(settlers-1), lost.Load())
	n, err := db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key = ?", string(c.Key)).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "business rows written once")
}
