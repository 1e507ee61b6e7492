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

// TestSettleBatchNeverDecidesOnAHeldOrderRow: while another transaction
// holds a trade's order row, a batch with that trade's refunds never
// settles them from the row as it was before: MySQL and MariaDB skip the
// row (FOR UPDATE SKIP LOCKED) and settle it in a second transaction after
// the holder; TiDB, whose SKIP LOCKED returns a held row without locking
// it, gets a plain FOR UPDATE that waits (pessimistic mode) or a COMMIT
// that checks for conflicts (optimistic mode, where the holder takes no
// lock, and the holder loses at its COMMIT instead). Every event is
// settled on the row as last committed. The engine is told by what the
// server is: a TiDB whose server-version makes VERSION() look like
// MySQL's still gets the wait (the SKIP LOCKED path would post the
// holder's refund a second time).
func TestSettleBatchNeverDecidesOnAHeldOrderRow(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	// Told by what the server is (and checked against TEST_MYSQL_ENGINE):
	// tidb.sh runs this on a TiDB whose VERSION() looks like MySQL's too.
	tidb := sqldbtest.Engine(t, db).Engine == dbengine.TiDB
	optimistic := false
	if tidb {
		var mode string
		require.NoError(t, db.QueryRowContext(ctx, "SELECT @@tidb_txn_mode").Scan(&mode))
		optimistic = mode == "optimistic"
	}

	h := newHarness(t, db)
	busyTrade, freeTrade := channelstest.NewTrade(channels.SQB, 80), channelstest.NewTrade(channels.Alipay, 81)
	h.deliver(t, channelstest.PaymentEnvelope(busyTrade, channelstest.Delivery{}), 1)
	evs := []channels.Event{
		h.decode(t, channelstest.RefundEnvelope(busyTrade, refundAt(busyTrade, "R1", 0, 1000, 1), channelstest.Delivery{})),
		h.decode(t, channelstest.PaymentEnvelope(freeTrade, channelstest.Delivery{})),
		h.decode(t, channelstest.RefundEnvelope(busyTrade, refundAt(busyTrade, "R2", 0, 1500, 2), channelstest.Delivery{})),
	}
	for i, ev := range evs {
		h.acquire(t, ev, int64(10+i))
	}

	// The holder is another settler of the busy trade: it has locked the
	// order row and recorded a cumulative refund of 1200 there, not yet
	// committed.
	id := order(t, db, busyTrade).ID
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	var locked int64
	require.NoError(t, holder.NewSelect().Table("ss_channel_order").Column("id").
		Where("id = ?", id).For("UPDATE").Scan(ctx, &locked))
	_, err = holder.NewRaw("UPDATE ss_channel_order SET refunded_amount = 1200, max_cumulative_refund = 1200, "+
		"status = 'PARTIALLY_REFUNDED' WHERE id = ?", id).Exec(ctx)
	require.NoError(t, err)

	type outcome struct {
		res []settlement.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := retryResults(func() ([]settlement.Result, error) { return h.svc.SettleBatch(ctx, evs) })
		done <- outcome{res, err}
	}()
	var o outcome
	switch {
	case optimistic:
		// The holder took no lock: the batch decides on the committed row
		// and commits at once; the holder then loses at its COMMIT.
		o = <-done
		require.NoError(t, o.err)
		err := holder.Commit()
		require.Error(t, err, "the holder's write conflicts with the batch's commit")
		assert.True(t, idempotent.IsRetryableConflict(err), "a write conflict, run again by its owner: %v", err)
		require.NotErrorIs(t, idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey)
		require.Len(t, o.res, 3)
		assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomePosted, Amount: 1000, SettledAt: o.res[0].SettledAt}, o.res[0])
		assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomePosted, Amount: 500, SettledAt: o.res[2].SettledAt}, o.res[2])
		assert.Equal(t, idempotent.OutcomePosted, o.res[1].Outcome)
		assert.Equal(t, int64(1500), order(t, db, busyTrade).RefundedAmount)
		mustCheck(t, db)
		return
	case tidb:
		// The batch waits for the row, with the free trade too: nothing
		// commits while the row is held.
		select {
		case o = <-done:
			t.Fatalf("SettleBatch returned while the row was held: %+v, %v", o.res, o.err)
		case <-time.After(2 * time.Second):
		}
		for _, ev := range evs {
			assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, ev).Status, ev.Key)
		}
	default:
		require.Eventually(t, func() bool { return mustClaim(t, h, evs[1]).Status == idempotent.StatusSettled },
			time.Minute, 5*time.Millisecond, "the free trade is settled while the other row is held")
		assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, evs[0]).Status)
		assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, evs[2]).Status)
	}
	require.NoError(t, holder.Commit())
	o = <-done
	require.NoError(t, o.err)
	require.Len(t, o.res, 3)
	// Decided on the row as the holder committed it: cumulative 1000 moves
	// nothing past 1200, 1500 moves 300.
	assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomeNoMoney, SettledAt: o.res[0].SettledAt}, o.res[0])
	assert.Equal(t, idempotent.OutcomePosted, o.res[1].Outcome)
	assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomePosted, Amount: 300, SettledAt: o.res[2].SettledAt}, o.res[2])
	ord := order(t, db, busyTrade)
	assert.Equal(t, int64(1500), ord.RefundedAmount)
	assert.Equal(t, int64(1500), ord.MaxCumulativeRefund)
}

// retryResults is retry for a call that returns results.
func retryResults(fn func() ([]settlement.Result, error)) ([]settlement.Result, error) {
	var res []settlement.Result
	err := retry(func() error {
		var err error
		res, err = fn()
		return err
	})
	return res, err
}
