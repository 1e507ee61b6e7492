package idempotent_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// TestOccurredAtIsStoredInItsColumn: the channel's time of a claimed event
// lands in occurred_at on both insert paths (one claim, and the multi-row
// upsert), in UTC; a claim without one stores NULL.
func TestOccurredAtIsStoredInItsColumn(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)
		at := time.Date(2024, 3, 15, 23, 30, 0, 123000000, time.FixedZone("CST", 8*3600))

		one := claimFor(mustKey(t, "OCC-1"), 1001)
		one.OccurredAt = at
		_, err := store.Acquire(ctx, one)
		require.NoError(t, err)

		var many []idempotent.Claim
		for _, trade := range []string{"OCC-2", "OCC-3"} {
			c := claimFor(mustKey(t, trade), 1001)
			c.OccurredAt = at.Add(time.Minute)
			many = append(many, c)
		}
		many = append(many, claimFor(mustKey(t, "OCC-4"), 1001)) // no time known
		_, err = store.AcquireMany(ctx, many)
		require.NoError(t, err)

		read := func(trade string) *time.Time {
			t.Helper()
			var got []struct {
				OccurredAt *time.Time `bun:"occurred_at"`
			}
			require.NoError(t, db.NewSelect().Table("ss_channel_idempotent").Column("occurred_at").
				Where("idempotent_key = ?", string(mustKey(t, trade))).Scan(ctx, &got))
			require.Len(t, got, 1)
			return got[0].OccurredAt
		}
		got := read("OCC-1")
		require.NotNil(t, got)
		assert.True(t, got.Equal(at), "got %s, want %s", got, at)
		got = read("OCC-3")
		require.NotNil(t, got)
		assert.True(t, got.Equal(at.Add(time.Minute)))
		assert.Nil(t, read("OCC-4"))
	})
}
