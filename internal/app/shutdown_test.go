package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// kubernetesGracePeriod is Kubernetes' default terminationGracePeriodSeconds:
// after it the pod is killed.
const kubernetesGracePeriod = 30 * time.Second

// TestShutdownWithAStuckPartitionEndsInsideTheGracePeriod: with a partition
// retrying a message that keeps failing (its order row held elsewhere, so
// each attempt ends in a lock wait timeout), a shutdown with the default
// budget finishes the attempt under way, tries the message no more, and
// returns inside that budget, well inside Kubernetes' grace period. The
// message was never committed: the next instance settles it exactly once.
func TestShutdownWithAStuckPartitionEndsInsideTheGracePeriod(t *testing.T) {
	h := newHarness(t, 2)
	ctx := context.Background()
	budget := config.Default().Worker.ShutdownTimeout
	require.Less(t, budget+5*time.Second, kubernetesGracePeriod, "the default budget leaves margin for leaving the group and closing")
	defaults := func(m *app.Main) {
		m.Config.Worker.ShutdownTimeout = budget
		m.Config.Worker.StallThreshold = time.Second // readiness says why at once
	}

	locked := channelstest.NewTrade(channels.Alipay, 900)
	first := h.start(defaults)
	h.produce([]demo.Message{{Key: []byte(locked.TradeNo), Value: channelstest.AlipayPayment(locked, channelstest.Delivery{Attempt: 1})}})
	h.waitConsumed(time.Minute)

	release := lockOrder(t, h, locked)
	refund := channelstest.AlipayRefund(locked, channelstest.Refund{No: "RF900", Amount: 1000}, channelstest.Delivery{Attempt: 1})
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(refund)
	require.NoError(t, err)
	h.produce([]demo.Message{{Key: []byte(locked.TradeNo), Value: refund}})
	require.Eventually(t, func() bool {
		err := first.main.Worker().Ready()
		return err != nil && strings.Contains(err.Error(), "Lock wait timeout exceeded")
	}, time.Minute, 20*time.Millisecond, "the refund's partition is stuck retrying")

	stopped := time.Now()
	first.shutdown(t)
	took := time.Since(stopped)
	t.Logf("shutdown with a stuck partition took %s (budget %s)", took.Round(time.Millisecond), budget)
	assert.Less(t, took, budget, "the shutdown does not wait out the failing message's retries")

	rec, err := idempotent.NewStore(h.db).Get(ctx, res.Event.TenantID, res.Event.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotent.StatusAcquired, rec.Status, "left unfinished, not settled")

	release()
	h.start(defaults)
	h.waitConsumed(time.Minute)
	rec, err = idempotent.NewStore(h.db).Get(ctx, res.Event.TenantID, res.Event.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotent.StatusSettled, rec.Status)
	n, err := h.db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key = ?", string(res.Event.Key)).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the redelivered refund is posted once")
}
