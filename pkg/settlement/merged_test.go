package settlement_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
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
		t.Skip("TiDB cannot skip a held row: TestSettleMergedFailsAtOnceOnARowTiDBHolds")
	}
	for _, n := range []int{3, 12} {
		h := newHarness(t, db)
		seq := 8000 + 100*n
		held := channelstest.NewTrade(channels.WeChat, seq)
		h.deliver(t, channelstest.PaymentEnvelope(held, channelstest.Delivery{}), int64(seq))
		var evs []channels.Event
		for i := 1; i < n; i++ {
			tr := channelstest.NewTrade(channels.Codes()[i%len(channels.Codes())], seq+i)
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

// TestSettleMergedFailsAtOnceOnARowTiDBHolds: TiDB cannot skip a held
// order row, so a merged transaction that meets one fails at once (FOR
// UPDATE NOWAIT: error 3572), writing nothing, rather than make every
// partition of the merge wait for one trade's row; SettleBatch of the same
// events, each partition's own, waits for the row as before and settles
// them once it is released. Pessimistic mode only: in optimistic mode the
// holder's FOR UPDATE takes no lock until its COMMIT.
func TestSettleMergedFailsAtOnceOnARowTiDBHolds(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	if sqldbtest.Engine(t, db).Engine != dbengine.TiDB {
		t.Skip("MariaDB and MySQL skip a held row: TestSettleMergedLeavesAHeldTradeToItsCaller")
	}
	var txnMode string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@tidb_txn_mode").Scan(&txnMode))
	if txnMode == "optimistic" {
		t.Skip("optimistic mode: the holder's FOR UPDATE takes no lock before its COMMIT")
	}
	h := newHarness(t, db)
	held := channelstest.NewTrade(channels.WeChat, 9100)
	h.deliver(t, channelstest.PaymentEnvelope(held, channelstest.Delivery{}), 9100)
	free := channelstest.NewTrade(channels.Alipay, 9101)
	evs := []channels.Event{
		h.decode(t, channelstest.PaymentEnvelope(free, channelstest.Delivery{})),
		h.decode(t, channelstest.RefundEnvelope(held, refundAt(held, "R1", 1000, 0, 1), channelstest.Delivery{})),
	}
	for i, ev := range evs {
		h.acquire(t, ev, int64(9150+i))
	}
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	var locked int64
	require.NoError(t, holder.NewSelect().Table("ss_channel_order").Column("id").
		Where("id = ?", order(t, db, held).ID).For("UPDATE").Scan(ctx, &locked))

	_, err = h.svc.SettleMerged(ctx, evs)
	var my *mysql.MySQLError
	require.ErrorAs(t, err, &my, "the merged transaction fails on the held row")
	assert.Equal(t, uint16(3572), my.Number, "FOR UPDATE NOWAIT: %v", err)
	for _, ev := range evs {
		assert.Equal(t, 0, ledgerRows(t, db, ev.Key), "nothing written")
	}
	require.NoError(t, holder.Rollback())

	res, err := h.svc.SettleBatch(ctx, evs)
	require.NoError(t, err)
	for i, r := range res {
		assert.Equal(t, idempotent.OutcomePosted, r.Outcome, "event %d", i)
	}
	mustCheck(t, db)
}
