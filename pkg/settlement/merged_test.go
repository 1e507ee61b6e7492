package settlement_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestSettleMergedLeavesAHeldTradeToItsCaller: a merged transaction (the
// events of several partitions) never waits for an order row another
// transaction holds, not even in a second transaction as SettleBatch
// does: it commits the other trades and returns the held trade's event
// unsettled (the zero Result, its claim ACQUIRED) with an error wrapping
// ErrBatchIncomplete, while the row is still held, so that the other
// partitions go on. That event's own batch, settled again after the
// release, posts it once. Any size of merged batch creates its new order
// rows inside its transaction.
func TestSettleMergedLeavesAHeldTradeToItsCaller(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	if sqldbtest.Engine(t, db).Engine == dbengine.TiDB {
		t.Skip("TiDB cannot skip a held row: its merged transaction waits, as SettleBatch's")
	}
	for _, n := range []int{3, 12} {
		h := newHarness(t, db)
		seq := 8000 + 100*n
		held := channelstest.NewTrade(channels.WeChat, seq)
		h.deliver(t, channelstest.PaymentEnvelope(held, channelstest.Delivery{}), int64(seq))
		var evs []channels.Event
		for i := 1; i < n; i++ {
			tr := channelstest.NewTrade(channels.Codes()[i%3], seq+i)
			evs = append(evs, h.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})))
		}
		heldAt := len(evs) / 2
		refund := h.decode(t, channelstest.RefundEnvelope(held, refundAt(held, "R1", 1000, 0, 1), channelstest.Delivery{}))
		evs = append(evs[:heldAt], append([]channels.Event{refund}, evs[heldAt:]...)...)
		for i, ev := range evs {
			h.acquire(t, ev, int64(seq+50+i))
		}

		holder, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		var locked int64
		require.NoError(t, holder.NewSelect().Table("ss_channel_order").Column("id").
			Where("id = ?", order(t, db, held).ID).For("UPDATE").Scan(ctx, &locked))

		mctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := h.svc.SettleMerged(mctx, evs)
		cancel()
		require.ErrorIs(t, err, settlement.ErrBatchIncomplete, "%d events", n)
		require.Len(t, res, n)
		for i, r := range res {
			if i == heldAt {
				assert.True(t, r.SettledAt.IsZero(), "the held trade's event is left unsettled")
				continue
			}
			assert.Equal(t, idempotent.OutcomePosted, r.Outcome, "event %d", i)
		}
		assert.Equal(t, 0, ledgerRows(t, db, refund.Key), "the held trade's refund is not posted while its row is held")
		require.NoError(t, holder.Rollback())

		again, err := h.svc.SettleBatch(ctx, []channels.Event{refund})
		require.NoError(t, err)
		assert.Equal(t, idempotent.OutcomePosted, again[0].Outcome)
		assert.Equal(t, 2, ledgerRows(t, db, refund.Key))
		mustCheck(t, db)
	}
}
