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

// TestSettledCollectorServesTheLastRefresh: a scrape reads nothing, it
// serves what the last refresh read; before a refresh and after a failed
// one the series are absent, never a stale zero.
func TestSettledCollectorServesTheLastRefresh(t *testing.T) {
	var reads atomic.Int64
	var fail atomic.Bool
	oldest := time.Now().Add(-90 * time.Second)
	c := metrics.NewSettledCollector(func(context.Context) (int64, time.Time, error) {
		reads.Add(1)
		if fail.Load() {
			return 0, time.Time{}, errors.New("database down")
		}
		return 7, oldest, nil
	}, nil, time.Hour)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))

	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n, "absent before the first refresh")

	c.Refresh(context.Background())
	for range 5 {
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP paycb_settled_pending Settled events written to the outbox and not yet published to the settled-event topic.
# TYPE paycb_settled_pending gauge
paycb_settled_pending 7
`), "paycb_settled_pending"))
	}
	assert.Equal(t, int64(1), reads.Load(), "scrapes read nothing")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "paycb_settled_oldest_pending_seconds" {
			assert.InDelta(t, 90, mf.GetMetric()[0].GetGauge().GetValue(), 5)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	fail.Store(true)
	c.Refresh(context.Background())
	n, err = testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n, "a failed refresh leaves the series out")
}
