package idempotent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// TestMarkMoved: only a claim SETTLED with NO_MONEY becomes POSTED, once;
// an ACQUIRED or already POSTED claim is left as it is and the error wraps
// ErrFenceLost.
func TestMarkMoved(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)
		mark := func(key idempotent.Key) error {
			return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return store.MarkMoved(ctx, tx, 1001, key) })
		}
		noMoney, acquired := mustKey(t, "MOVED-1"), mustKey(t, "MOVED-2")
		for _, k := range []idempotent.Key{noMoney, acquired} {
			_, err := store.Acquire(ctx, claimFor(k, 1001))
			require.NoError(t, err)
		}
		require.NoError(t, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			return store.Settle(ctx, tx, 1001, noMoney, idempotent.OutcomeNoMoney)
		}))
		before, err := store.Get(ctx, 1001, noMoney)
		require.NoError(t, err)

		require.NoError(t, mark(noMoney))
		after, err := store.Get(ctx, 1001, noMoney)
		require.NoError(t, err)
		assert.Equal(t, idempotent.OutcomePosted, after.Outcome)
		assert.Equal(t, idempotent.StatusSettled, after.Status)
		assert.Equal(t, before.SettledAt, after.SettledAt, "settled_at stays")

		require.ErrorIs(t, mark(noMoney), idempotent.ErrFenceLost, "POSTED already")
		require.ErrorIs(t, mark(acquired), idempotent.ErrFenceLost, "not settled")
		rec, err := store.Get(ctx, 1001, acquired)
		require.NoError(t, err)
		assert.Equal(t, idempotent.StatusAcquired, rec.Status)
	})
}
