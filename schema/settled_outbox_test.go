package schema_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/dberr"
)

// TestSettledOutboxMigration: migration 0013 gives an order row settled
// before it a counter of 0, refuses a second row for one event and a
// second row for one trade_seq of a trade, and on MySQL running it again
// changes nothing.
func TestSettledOutboxMigration(t *testing.T) {
	for _, dialect := range []string{"mysql", "sqlite"} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			db := openDialect(t, dialect)
			applyUpTo(t, db, dialect, 1, 13)
			_, err := db.ExecContext(ctx, "INSERT INTO ss_channel_order (tenant_id, channel_code, channel_trade_no, merchant_order_no, "+
				"amount, paid_amount, currency, status, created_at, updated_at) "+
				"VALUES (1, 'WECHAT', 'T1', 'M1', 100, 100, 'CNY', 'PAID', '2026-12-05 02:00:00', '2026-12-05 02:00:00')")
			require.NoError(t, err)
			applyUpTo(t, db, dialect, 13, 14)
			if dialect == "mysql" {
				applyUpTo(t, db, dialect, 13, 14) // again: harmless
			}
			var seq int64
			require.NoError(t, db.NewRaw("SELECT settled_seq FROM ss_channel_order WHERE channel_trade_no = 'T1'").Scan(ctx, &seq))
			assert.Zero(t, seq, "a trade settled before the outbox has no event yet")

			insert := func(key string, tradeSeq int) error {
				_, err := db.ExecContext(ctx, "INSERT INTO ss_settled_outbox (tenant_id, idempotent_key, channel_code, channel_trade_no, "+
					"trade_seq, event_type, source, value, settled_at) VALUES (1, ?, 'WECHAT', 'T1', ?, 'REFUND_SUCCEEDED', 'callback', '{}', "+
					"'2026-12-05 02:00:00')", key, tradeSeq)
				return dberr.ClassifyDuplicate(err)
			}
			require.NoError(t, insert("WECHAT:T1:REFUND_SUCCEEDED:r1", 1))
			require.ErrorIs(t, insert("WECHAT:T1:REFUND_SUCCEEDED:r1", 2), dberr.ErrDuplicateKey, "one row per event")
			require.ErrorIs(t, insert("WECHAT:T1:REFUND_SUCCEEDED:r2", 1), dberr.ErrDuplicateKey, "one row per trade_seq")
			require.NoError(t, insert("WECHAT:T1:REFUND_SUCCEEDED:R1", 2), "keys compare byte for byte")
		})
	}
}

// TestSettledPublishedMigration: migration 0018 marks the rows published
// before it published = 1 and the unpublished ones 0, a row written after
// it without the column is unpublished, the one index it leaves finds
// both, and on MySQL running it again changes nothing.
func TestSettledPublishedMigration(t *testing.T) {
	for _, dialect := range []string{"mysql", "sqlite"} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			db := openDialect(t, dialect)
			applyUpTo(t, db, dialect, 1, 18)
			insert := func(key string, publishedAt any) {
				_, err := db.ExecContext(ctx, "INSERT INTO ss_settled_outbox (tenant_id, idempotent_key, channel_code, channel_trade_no, "+
					"trade_seq, event_type, source, value, settled_at, published_at) VALUES (1, ?, 'WECHAT', ?, 1, 'PAYMENT_RECEIVED', "+
					"'callback', '{}', '2026-12-05 02:00:00', ?)", key, key, publishedAt)
				require.NoError(t, err)
			}
			insert("before-published", "2026-12-05 02:00:01")
			insert("before-unpublished", nil)
			applyUpTo(t, db, dialect, 18, 19)
			if dialect == "mysql" {
				applyUpTo(t, db, dialect, 18, 19) // again: harmless
			}
			insert("after-unpublished", nil)
			flags := func() map[string]int {
				var rows []struct {
					Key       string `bun:"idempotent_key"`
					Published int    `bun:"published"`
				}
				require.NoError(t, db.NewSelect().Table("ss_settled_outbox").Column("idempotent_key", "published").Scan(ctx, &rows))
				out := map[string]int{}
				for _, r := range rows {
					out[r.Key] = r.Published
				}
				return out
			}
			assert.Equal(t, map[string]int{"before-published": 1, "before-unpublished": 0, "after-unpublished": 0}, flags())

			var indexes []string
			if dialect == "mysql" {
				require.NoError(t, db.NewRaw("SELECT DISTINCT index_name FROM information_schema.statistics "+
					"WHERE table_schema = DATABASE() AND table_name = 'ss_settled_outbox' ORDER BY index_name").Scan(ctx, &indexes))
			} else {
				require.NoError(t, db.NewRaw("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ss_settled_outbox' "+
					"AND sql IS NOT NULL ORDER BY name").Scan(ctx, &indexes))
			}
			assert.Contains(t, indexes, "idx_settled_state")
			assert.NotContains(t, indexes, "idx_settled_pending")
			assert.NotContains(t, indexes, "idx_settled_time")
		})
	}
}
