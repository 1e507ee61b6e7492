package app_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// lockOrder holds the order row of tr with SELECT … FOR UPDATE in an open
// transaction of a connection of its own, as an operator's session might,
// and returns the function that releases it.
func lockOrder(t *testing.T, h *harness, tr channelstest.Trade) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := h.db.DB.BeginTx(ctx, &sql.TxOptions{})
	require.NoError(t, err)
	var id int64
	require.NoError(t, tx.QueryRowContext(ctx,
		"SELECT id FROM ss_channel_order WHERE tenant_id = ? AND channel_code = ? AND channel_trade_no = ? FOR UPDATE",
		tr.TenantID, string(tr.Channel), tr.TradeNo).Scan(&id))
	released := false
	release = func() {
		if !released {
			released = true
			require.NoError(t, tx.Rollback())
		}
	}
	t.Cleanup(release)
	return release
}

// TestHeldOrderLockStallsOnlyItsPartition: with one order row locked by
// hand, the refund of that order fails on its partition with the server's
// lock wait timeout (seconds, from PAYCB_DB_STATEMENT_TIMEOUT) and is
// retried in place; that partition's lag (from the broker, with nothing
// committed) and stall show it at once, /readyz names it and why, and the
// other partitions drain. Once the lock is released the refund settles
// exactly once and the stall returns to zero.
func TestHeldOrderLockStallsOnlyItsPartition(t *testing.T) {
	const partitions = 4
	h := newHarness(t, partitions)
	ctx := context.Background()

	locked := channelstest.NewTrade(channels.Alipay, 700)
	stuck := kafkaops.PartitionOf([]byte(locked.TradeNo), partitions)
	// Payments of other trades: behind the refund on its partition, and on
	// the others.
	var behind, elsewhere []demo.Message
	for seq := 701; len(behind) < 5 || len(elsewhere) < 6; seq++ {
		tr := channelstest.NewTrade(channels.Alipay, seq)
		msg := demo.Message{Key: []byte(tr.TradeNo), Value: channelstest.AlipayPayment(tr, channelstest.Delivery{Attempt: 1})}
		switch {
		case kafkaops.PartitionOf([]byte(tr.TradeNo), partitions) == stuck && len(behind) < 5:
			behind = append(behind, msg)
		case kafkaops.PartitionOf([]byte(tr.TradeNo), partitions) != stuck && len(elsewhere) < 6:
			elsewhere = append(elsewhere, msg)
		}
	}

	adjust := func(m *app.Main) {
		m.Config.DB.StatementTimeout = 2 * time.Second // a lock wait ends after 1s
		m.Config.Worker.LagInterval = 200 * time.Millisecond
		m.Config.Worker.StallThreshold = time.Second
		m.Config.Worker.ShutdownTimeout = 2 * time.Second
	}
	first := h.start(adjust)
	w := first
	h.produce([]demo.Message{{Key: []byte(locked.TradeNo), Value: channelstest.AlipayPayment(locked, channelstest.Delivery{Attempt: 1})}})
	h.waitConsumed(time.Minute)

	release := lockOrder(t, h, locked)
	refund := channelstest.AlipayRefund(locked, channelstest.Refund{No: "RF700", Amount: 1000}, channelstest.Delivery{Attempt: 1})
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(refund)
	require.NoError(t, err)
	h.produce(append([]demo.Message{{Key: []byte(locked.TradeNo), Value: refund}}, behind...))
	h.produce(elsewhere)

	label := map[string]string{"partition": strconv.Itoa(stuck)}
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_consumer_lag", label) == float64(1+len(behind)) &&
			counted(t, w.main, "paycb_partition_stalled_seconds", label) >= 1
	}, 30*time.Second, 20*time.Millisecond, "the stuck partition's lag and stall show it")
	for p := range partitions {
		if p == stuck {
			continue
		}
		other := map[string]string{"partition": strconv.Itoa(p)}
		require.Eventually(t, func() bool {
			return counted(t, w.main, "paycb_consumer_lag", other) == 0 &&
				counted(t, w.main, "paycb_partition_stalled_seconds", other) == 0
		}, 30*time.Second, 20*time.Millisecond, "partition %d drains", p)
	}
	// Readiness names the partition as soon as it is past the threshold,
	// and why once an attempt has met the lock: the server's lock wait
	// error, after a second, not a deadline nor a duplicate.
	var notReady error
	require.Eventually(t, func() bool {
		notReady = w.main.Worker().Ready()
		return notReady != nil && strings.Contains(notReady.Error(), "Lock wait timeout exceeded")
	}, 30*time.Second, 20*time.Millisecond, "readiness reports the stall and its cause")
	assert.Contains(t, notReady.Error(), "partition "+strconv.Itoa(stuck)+" stalled")
	assert.Contains(t, notReady.Error(), "failed attempts")
	assert.NotContains(t, notReady.Error(), "duplicate")
	assert.Positive(t, counted(t, w.main, "paycb_processing_errors_total", map[string]string{"stage": "settle"}))
	store := idempotent.NewStore(h.db)
	rec, err := store.Get(ctx, res.Event.TenantID, res.Event.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotent.StatusAcquired, rec.Status, "the refund waits, claimed, for the lock")

	// A restart while the partition is stuck: the new instance reports its
	// lag from the broker at once, though it commits nothing.
	first.shutdown(t)
	w = h.start(adjust)
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_consumer_lag", label) == float64(1+len(behind)) &&
			counted(t, w.main, "paycb_partition_stalled_seconds", label) >= 1
	}, 30*time.Second, 20*time.Millisecond, "the restarted worker shows the stuck partition")

	release()
	h.waitConsumed(time.Minute)
	rec, err = store.Get(ctx, res.Event.TenantID, res.Event.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotent.StatusSettled, rec.Status)
	assert.Equal(t, idempotent.OutcomePosted, rec.Outcome)
	n, err := h.db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key = ?", string(res.Event.Key)).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the refund is posted once (one debit, one credit)")
	total, err := h.db.NewSelect().Table("ss_channel_idempotent").Where("status = ?", idempotent.StatusSettled).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2+len(behind)+len(elsewhere)), total, "every event settled")
	// Every event but the refund was acquired once by one of the two
	// instances; the refund's claim, made by the first, is the restarted
	// instance's redelivery.
	outcome := func(o string) float64 {
		return counted(t, first.main, "paycb_events_total", map[string]string{"outcome": o}) +
			counted(t, w.main, "paycb_events_total", map[string]string{"outcome": o})
	}
	assert.InDelta(t, 1+len(behind)+len(elsewhere), outcome("acquired"), 0)
	assert.GreaterOrEqual(t, counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "redelivered"}), 1.0)
	assert.Zero(t, outcome("duplicate"), "a timed-out attempt is never a duplicate")
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_partition_stalled_seconds", label) == 0 &&
			counted(t, w.main, "paycb_consumer_lag", label) == 0 && w.main.Worker().Ready() == nil
	}, 30*time.Second, 20*time.Millisecond, "the stall returns to zero")
}
