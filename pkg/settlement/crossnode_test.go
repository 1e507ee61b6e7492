package settlement_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/schema"
)

// TestAnOrderRowHeldElsewhereLosesNoWrite: a session (on node 0) holds an
// order row FOR UPDATE and writes it, uncommitted, while a batch settles
// two refunds of that trade (through node 1). With TEST_MYSQL_NODES the
// nodes differ and a row lock is not a cluster lock: the batch does not
// wait and commits, and the holder's COMMIT fails with a conflict (1213),
// so its write cannot overwrite the batch's. On one server the batch
// settles the trade only after the holder commits. Either way the order
// shows the refunds (cumulative: 1000, then 1500 in all) and the ledger
// checks out.
func TestAnOrderRowHeldElsewhereLosesNoWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := sqldbtest.NewDatabase(t)
	pool := func(node int) *bun.DB {
		ndsn, err := sqldbtest.NodeDSN(dsn, node)
		require.NoError(t, err)
		db, err := sqldb.OpenMySQL(ndsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	holderDB, db := pool(0), pool(1)
	_, err := schema.Migrate(ctx, db)
	require.NoError(t, err)
	cluster := len(sqldbtest.Nodes()) > 1

	h := newHarness(t, db)
	tr := channelstest.NewTrade(channels.SQB, 60)
	h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 1)
	evs := []channels.Event{
		h.decode(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 0, 1000, 1), channelstest.Delivery{})),
		h.decode(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R2", 0, 1500, 2), channelstest.Delivery{})),
	}
	for i, ev := range evs {
		h.acquire(t, ev, int64(10+i))
	}
	paid := order(t, db, tr)

	holder, err := holderDB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	var locked int64
	require.NoError(t, holder.NewSelect().Table("ss_channel_order").Column("id").
		Where("id = ?", paid.ID).For("UPDATE").Scan(ctx, &locked))
	_, err = holder.NewUpdate().Table("ss_channel_order").Set("status = status, updated_at = ?", time.Now().UTC()).
		Where("id = ?", paid.ID).Exec(ctx)
	require.NoError(t, err)

	type outcome struct {
		res []settlement.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.svc.SettleBatch(ctx, evs)
		done <- outcome{res, err}
	}()
	var o outcome
	if cluster {
		select {
		case o = <-done:
		case <-time.After(time.Minute):
			t.Fatal("the batch on node 1 waited for a lock held on node 0")
		}
		err := holder.Commit()
		require.Error(t, err, "the holder's write after the batch's must not commit")
		assert.True(t, idempotent.IsDeadlock(err), "a commit-time conflict (1213), got %v", err)
	} else {
		// TestSettleBatchLeavesBusyOrdersToASecondTransaction shows the
		// wait on one server.
		require.NoError(t, holder.Commit())
		o = <-done
	}
	require.NoError(t, o.err)
	require.Len(t, o.res, 2)
	for _, r := range o.res {
		assert.Equal(t, idempotent.OutcomePosted, r.Outcome)
	}
	after := order(t, db, tr)
	assert.Equal(t, paid.PaidAmount, after.PaidAmount)
	assert.Equal(t, int64(1500), after.RefundedAmount, "the cumulative refunds on the order")
	mustCheck(t, db)
}
