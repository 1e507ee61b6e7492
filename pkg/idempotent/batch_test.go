package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// TestAcquireMany: the insert decides every claim of a batch, including keys
// that already exist (no lookup skips them here).
func TestAcquireMany(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)

		// Two keys exist already: one will be a retry, one a conflict.
		dupe := claimFor(mustKey(t, "M-dup"), 1001)
		conflicting := claimFor(mustKey(t, "M-conf"), 1001)
		for _, c := range []idempotent.Claim{dupe, conflicting} {
			_, err := store.Acquire(ctx, c)
			require.NoError(t, err)
		}
		changed := conflicting
		changed.Fingerprint = "1111111111111111111111111111111111111111111111111111111111111111"
		refundLower, err := idempotent.NewRefundKey("WECHAT", "M", "rf-1")
		require.NoError(t, err)
		refundUpper, err := idempotent.NewRefundKey("WECHAT", "M", "RF-1")
		require.NoError(t, err)
		batch := []idempotent.Claim{
			claimFor(mustKey(t, "M-new1"), 1001),
			dupe,
			claimFor(mustKey(t, "M-new1"), 1002), // same key, other tenant
			changed,
			claimFor(refundLower, 1001),
			claimFor(refundUpper, 1001), // differs only in case: its own claim
		}
		res, err := store.AcquireMany(ctx, batch)
		require.NoError(t, err)
		kinds := make([]idempotent.ResultKind, len(res))
		for i, r := range res {
			kinds[i] = r.Kind
		}
		assert.Equal(t, []idempotent.ResultKind{
			idempotent.Acquired, idempotent.Duplicate, idempotent.Acquired,
			idempotent.Conflict, idempotent.Acquired, idempotent.Acquired,
		}, kinds)
		assert.Equal(t, dupe.Source, res[1].Existing.Source)

		// The same batch again: all known, nothing acquired twice.
		res, err = store.AcquireMany(ctx, batch)
		require.NoError(t, err)
		for i, r := range res {
			assert.NotEqual(t, idempotent.Acquired, r.Kind, "claim %d", i)
		}
		assert.Equal(t, 6, countClaims(t, db, "1 = 1"), "two made before, four by the batch")

		_, err = store.AcquireMany(ctx, []idempotent.Claim{dupe, dupe})
		require.ErrorIs(t, err, idempotent.ErrInvalidClaim, "a key twice in one batch is refused")
	})
}

func TestAcquireManyAndLookupMany(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)
		settled := claimFor(mustKey(t, "L-settled"), 1001)
		open := claimFor(mustKey(t, "L-open"), 1001)
		late := claimFor(mustKey(t, "L-late"), 1001)
		lateConflict := claimFor(mustKey(t, "L-late-conf"), 1001)
		for _, c := range []idempotent.Claim{settled, open} {
			_, err := store.Acquire(ctx, c)
			require.NoError(t, err)
		}
		require.NoError(t, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			return store.Settle(ctx, tx, settled.TenantID, settled.Key, idempotent.OutcomePosted)
		}))

		keys := []idempotent.TenantKey{{1001, settled.Key}, {1001, open.Key}, {1001, late.Key}}
		found, err := store.LookupMany(ctx, keys)
		require.NoError(t, err)
		require.Len(t, found, 2, "the late key has no claim yet")
		assert.Equal(t, idempotent.StatusSettled, found[keys[0]].Status)
		assert.Equal(t, idempotent.OutcomePosted, found[keys[0]].Outcome)
		assert.Equal(t, settled.Fingerprint, found[keys[0]].Fingerprint)
		assert.Equal(t, settled.Source, found[keys[0]].Source)
		assert.Nil(t, found[keys[0]].Event, "a settled claim's event is not read")
		assert.Equal(t, idempotent.StatusAcquired, found[keys[1]].Status)
		assert.Equal(t, open.Event, found[keys[1]].Event, "an ACQUIRED claim's event is read: settling it needs it")

		// Another acquirer claims two keys after the lookup: the insert
		// still decides them.
		_, err = store.Acquire(ctx, late)
		require.NoError(t, err)
		_, err = store.Acquire(ctx, lateConflict)
		require.NoError(t, err)
		changed := lateConflict
		changed.Fingerprint = "2222222222222222222222222222222222222222222222222222222222222222"
		fresh := claimFor(mustKey(t, "L-fresh"), 1001)
		res, err := store.AcquireMany(ctx, []idempotent.Claim{late, fresh, changed})
		require.NoError(t, err)
		require.Len(t, res, 3)
		assert.Equal(t, idempotent.Duplicate, res[0].Kind)
		assert.Equal(t, idempotent.Acquired, res[1].Kind)
		assert.Equal(t, idempotent.Conflict, res[2].Kind)
		assert.Equal(t, 1, countClaims(t, db, "idempotent_key = ?", string(late.Key)))

		_, err = store.AcquireMany(ctx, []idempotent.Claim{fresh, fresh})
		require.ErrorIs(t, err, idempotent.ErrInvalidClaim, "a key twice in one batch is refused")
	})
}

func TestConcurrentOverlappingBatchesClaimEachKeyOnce(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		const workers, keys = 8, 60
		db.SetMaxOpenConns(workers + 2)
		store := idempotent.NewStore(db)
		ctx := context.Background()
		acquired := make([]int, keys)
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, workers)
		for w := range workers {
			// Each worker claims an overlapping window of the keys, in its
			// own order.
			var batch []idempotent.Claim
			var which []int
			order := rand.New(rand.NewPCG(uint64(w), 7)).Perm(keys)
			for _, k := range order {
				if (k+w)%3 == 0 {
					continue
				}
				batch = append(batch, claimFor(mustKey(t, fmt.Sprintf("C%d", k)), 1001))
				which = append(which, k)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					res, err := store.AcquireMany(ctx, batch)
					if err != nil {
						// Concurrent upserts may deadlock; the unique index
						// still decided nothing wrongly. Retry like the worker.
						if isDeadlock(err) {
							continue
						}
						errs <- err
						return
					}
					mu.Lock()
					for i, r := range res {
						if r.Kind == idempotent.Acquired {
							acquired[which[i]]++
						}
					}
					mu.Unlock()
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
		claimed := countClaims(t, db, "1 = 1")
		for k, n := range acquired {
			assert.LessOrEqual(t, n, 1, "key C%d acquired %d times", k, n)
		}
		total := 0
		for _, n := range acquired {
			total += n
		}
		assert.Equal(t, claimed, total, "every claim row was acquired by exactly one batch")
	})
}

// isDeadlock reports the errors a concurrency test retries as the worker
// would: a transaction rolled back for a concurrent one (a deadlock,
// TiDB's write conflict) or a lock wait timeout.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return idempotent.IsRetryableConflict(err) || (errors.As(err, &me) && me.Number == 1205)
}
