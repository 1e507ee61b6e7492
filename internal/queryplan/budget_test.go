package queryplan_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/queryplan"
)

// TestBudgetNeverExceedsItsRate: whatever the pattern of attempts, the
// queries granted in any window of length w are at most Burst + w·rate,
// and a steady caller gets the full rate.
func TestBudgetNeverExceedsItsRate(t *testing.T) {
	b := queryplan.Budget{PerSecond: 5, Burst: 10, Backoff: time.Minute, MaxBackoff: 10 * time.Minute}
	require.NoError(t, b.Validate())
	rng := rand.New(rand.NewPCG(3, 5))
	for run := range 50 {
		var s queryplan.BucketState
		now := created
		var granted []time.Time
		for range 5000 {
			now = now.Add(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
			var ok bool
			s, ok, _ = b.Take(s, now)
			if ok {
				granted = append(granted, now)
			}
		}
		for _, w := range []time.Duration{time.Second, 10 * time.Second, time.Minute} {
			limit := b.Burst + int(w.Seconds()*b.PerSecond)
			j := 0
			for i := range granted {
				for granted[i].Sub(granted[j]) >= w {
					j++
				}
				require.LessOrEqual(t, i-j+1, limit, "run %d: %d queries within %s", run, i-j+1, w)
			}
		}
	}

	var s queryplan.BucketState
	now := created
	n := 0
	for range 100000 {
		now = now.Add(100 * time.Microsecond) // a caller far faster than the rate: rounding must not starve it
		var ok bool
		if s, ok, _ = b.Take(s, now); ok {
			n++
		}
	}
	assert.InDelta(t, 10+5*10, n, 1, "ten seconds of attempts every 0.1 ms: the burst plus the rate")
}

func TestTakeSaysWhenTheNextTokenComes(t *testing.T) {
	b := queryplan.Budget{PerSecond: 2, Burst: 1, Backoff: time.Minute, MaxBackoff: time.Hour}
	s, ok, _ := b.Take(queryplan.BucketState{}, created)
	require.True(t, ok)
	s, ok, at := b.Take(s, created)
	require.False(t, ok)
	assert.Equal(t, created.Add(501*time.Millisecond), at)
	_, ok, _ = b.Take(s, at)
	assert.True(t, ok, "at the time Take named, the token is there")
	_, ok, _ = b.Take(s, created.Add(-time.Hour))
	assert.False(t, ok, "a clock that went backwards earns nothing")
}

// TestThrottledBacksTheMerchantOff: a rate-limit answer stops the
// merchant's queries for Backoff, doubling while they keep coming, at
// most MaxBackoff, and resets after a quiet Backoff.
func TestThrottledBacksTheMerchantOff(t *testing.T) {
	b := queryplan.DefaultBudget()
	require.NoError(t, b.Validate())
	var s queryplan.BucketState
	now := created
	var waits []time.Duration
	for range 6 {
		s = b.Throttled(s, now)
		_, ok, until := b.Take(s, now)
		require.False(t, ok)
		waits = append(waits, until.Sub(now))
		now = until // asked again as soon as allowed, and throttled again
	}
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}, waits)

	quiet := now.Add(b.MaxBackoff + b.Backoff)
	s = b.Throttled(s, quiet)
	_, _, until := b.Take(s, quiet)
	assert.Equal(t, time.Minute, until.Sub(quiet), "after a quiet back-off the doubling starts again")
}

func TestBudgetValidate(t *testing.T) {
	for name, b := range map[string]queryplan.Budget{
		"zero rate":     {PerSecond: 0, Burst: 1, Backoff: time.Second, MaxBackoff: time.Second},
		"no burst":      {PerSecond: 1, Burst: 0, Backoff: time.Second, MaxBackoff: time.Second},
		"backoff order": {PerSecond: 1, Burst: 1, Backoff: time.Minute, MaxBackoff: time.Second},
		"no backoff":    {PerSecond: 1, Burst: 1},
	} {
		assert.Error(t, b.Validate(), name)
	}
}
