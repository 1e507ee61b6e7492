package metrics_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/metrics"
)

// TestRegistrationCollectorServesTheLastRefresh: a scrape serves what the
// last refresh read, per channel and kind; before a refresh and after a
// failed one the series are absent.
func TestRegistrationCollectorServesTheLastRefresh(t *testing.T) {
	var reads atomic.Int64
	var fail atomic.Bool
	oldest := time.Now().Add(-120 * time.Second)
	c := metrics.NewRegistrationCollector(func(context.Context) ([]metrics.RegistrationStanding, error) {
		reads.Add(1)
		if fail.Load() {
			return nil, errors.New("database down")
		}
		return []metrics.RegistrationStanding{
			{Channel: "WECHAT", Kind: "PAYMENT", Open: 3, Oldest: oldest, PastExpiry: 1},
			{Channel: "WECHAT", Kind: "REFUND"},
		}, nil
	}, nil, time.Hour)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n, "absent before the first refresh")

	c.Refresh(context.Background())
	for range 3 {
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP paycb_registrations_open Registrations not yet settled, closed or expired (REGISTERED or ABNORMAL), by channel and kind (PAYMENT, REFUND).
# TYPE paycb_registrations_open gauge
paycb_registrations_open{channel="WECHAT",kind="PAYMENT"} 3
paycb_registrations_open{channel="WECHAT",kind="REFUND"} 0
# HELP paycb_registrations_past_expiry Open payment registrations whose expires_at has passed (0 for refunds, which do not expire), at the last refresh.
# TYPE paycb_registrations_past_expiry gauge
paycb_registrations_past_expiry{channel="WECHAT",kind="PAYMENT"} 1
paycb_registrations_past_expiry{channel="WECHAT",kind="REFUND"} 0
`), "paycb_registrations_open", "paycb_registrations_past_expiry"))
	}
	assert.Equal(t, int64(1), reads.Load(), "scrapes read nothing")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "paycb_registration_oldest_open_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[1].GetValue() == "PAYMENT" {
				found = true
				assert.InDelta(t, 120, m.GetGauge().GetValue(), 5)
			} else {
				assert.Zero(t, m.GetGauge().GetValue(), "none open: 0")
			}
		}
	}
	assert.True(t, found)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	fail.Store(true)
	c.Refresh(context.Background())
	n, err = testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n, "a failed refresh leaves the series out, never a stale value")
}
