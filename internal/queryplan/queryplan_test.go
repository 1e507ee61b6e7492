package queryplan_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/pkg/channels"
)

var created = time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)

func payment(expiresIn time.Duration) queryplan.Registration {
	return queryplan.Registration{Kind: channels.QueryPayment, CreatedAt: created, ExpiresAt: created.Add(expiresIn)}
}

func refund() queryplan.Registration {
	return queryplan.Registration{Kind: channels.QueryRefund, CreatedAt: created}
}

// asks follows the plan for a registration the channel answers with
// answer(i) every time, from its first ask, and returns the times asked
// and the last decision.
func asks(t *testing.T, p queryplan.Policy, r queryplan.Registration, answer func(i int) channels.QueryOutcome) ([]time.Duration, queryplan.Decision) {
	t.Helper()
	at := p.First(r)
	var times []time.Duration
	for i := 0; i < 10000; i++ {
		times = append(times, at.Sub(r.CreatedAt))
		o := answer(i)
		d, err := p.After(r, o, at)
		require.NoError(t, err)
		if o == channels.QueryRetry {
			r.Retries++
		} else {
			r.Retries = 0
		}
		if d.Stop {
			assert.True(t, d.Next.IsZero(), "a stop has no next ask")
			return times, d
		}
		require.True(t, d.Next.After(at), "ask %d at %s: the next ask %s must be later", i, at, d.Next)
		at = d.Next
	}
	t.Fatalf("the plan never stops asking")
	return nil, queryplan.Decision{}
}

func mins(ds ...float64) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d * float64(time.Minute))
	}
	return out
}

// TestDefaultScheduleFollowsTheChannelsGuidance: a payment never answered
// is asked at 1, 3, 5, 10 and 30 minutes, then every 30 minutes until the
// last chance past its expiry, where the asking stops and an operator is
// alerted; a refund every minute for five minutes, then decaying.
func TestDefaultScheduleFollowsTheChannelsGuidance(t *testing.T) {
	p := queryplan.DefaultPolicy()
	require.NoError(t, p.Validate())
	pending := func(int) channels.QueryOutcome { return channels.QueryPending }

	times, last := asks(t, p, payment(2*time.Hour), pending)
	assert.Equal(t, mins(1, 3, 5, 10, 30, 60, 90, 120, 125), times)
	assert.True(t, last.Alert)
	assert.Empty(t, last.Status, "a payment still pending past its time is left open, never guessed closed")

	times, _ = asks(t, p, payment(5*time.Minute), pending)
	assert.Equal(t, mins(1, 3, 5, 10), times, "a five-minute order: its last chance is at 10 minutes")

	times, last = asks(t, p, refund(), pending)
	assert.Equal(t, mins(1, 2, 3, 4, 5, 10, 20, 40, 70), times[:9])
	assert.Equal(t, 24*time.Hour, times[len(times)-1])
	assert.True(t, last.Alert)
}

// TestFinalAnswersStop: closed stops at once whatever the age; settled
// sets no status (settlement does) and looks again after SettledRecheck;
// not found stops as Expired only past its time.
func TestFinalAnswersStop(t *testing.T) {
	p := queryplan.DefaultPolicy()
	r := payment(10 * time.Minute)
	for _, at := range []time.Time{p.First(r), created.Add(40 * 24 * time.Hour)} {
		d, err := p.After(r, channels.QueryClosed, at)
		require.NoError(t, err)
		assert.True(t, d.Stop)
		assert.Equal(t, queryplan.Closed, d.Status, "closed at %s", at)
		d, err = p.After(r, channels.QuerySettled, at)
		require.NoError(t, err)
		assert.False(t, d.Stop)
		assert.Empty(t, d.Status, "the querier never makes a registration succeed")
		assert.Equal(t, at.Add(p.SettledRecheck), d.Next)
	}
	young, err := p.After(r, channels.QueryNotFound, created.Add(2*time.Minute))
	require.NoError(t, err)
	assert.False(t, young.Stop, "a young order the channel does not know yet is asked again")
	assert.Empty(t, young.Status)
	old, err := p.After(r, channels.QueryNotFound, created.Add(15*time.Minute))
	require.NoError(t, err)
	assert.True(t, old.Stop)
	assert.Equal(t, queryplan.Expired, old.Status)

	times, last := asks(t, p, refund(), func(int) channels.QueryOutcome { return channels.QueryNotFound })
	assert.Equal(t, queryplan.Expired, last.Status)
	assert.Equal(t, 24*time.Hour, times[len(times)-1], "a refund the channel never knew expires after NotFoundFor")
}

// TestTransientFailuresBackOffWithinTheSchedule: retries double from
// RetryMin up to RetryMax, never later than the next scheduled ask, and a
// success resets them.
func TestTransientFailuresBackOffWithinTheSchedule(t *testing.T) {
	p := queryplan.DefaultPolicy()
	r := payment(24 * time.Hour)
	r.CreatedAt = created
	at := created.Add(31 * time.Minute) // after the offsets: the next scheduled ask is 30 min away
	var waits []time.Duration
	for r.Retries = 0; r.Retries < 9; r.Retries++ {
		d, err := p.After(r, channels.QueryRetry, at)
		require.NoError(t, err)
		require.False(t, d.Stop)
		waits = append(waits, d.Next.Sub(at))
	}
	assert.Equal(t, []time.Duration{
		5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute,
	}, waits)

	r.Retries = 8
	d, err := p.After(r, channels.QueryRetry, created.Add(2*time.Minute+59*time.Second))
	require.NoError(t, err)
	assert.Equal(t, created.Add(3*time.Minute), d.Next, "never later than the next scheduled ask")
}

// TestEveryOutcomeOnRandomSchedules: whatever the answers, the plan asks
// later each time, stops within the horizon, sets Closed only for a closed
// answer and Expired only for a not-found one, and stops with no status
// only with an alert.
func TestEveryOutcomeOnRandomSchedules(t *testing.T) {
	p := queryplan.DefaultPolicy()
	outcomes := []channels.QueryOutcome{
		channels.QueryPending, channels.QueryNotFound, channels.QueryThrottled, channels.QueryRetry,
		channels.QueryRefused, channels.QueryUncertain, channels.QuerySettled, channels.QueryClosed,
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for run := range 500 {
		var r queryplan.Registration
		if run%2 == 0 {
			r = payment(time.Duration(1+rng.IntN(48*60)) * time.Minute)
		} else {
			r = refund()
		}
		// Mostly not final, so that long schedules are exercised.
		var last channels.QueryOutcome
		times, d := asks(t, p, r, func(int) channels.QueryOutcome {
			if rng.IntN(50) == 0 {
				last = channels.QueryClosed
			} else {
				last = outcomes[rng.IntN(7)]
			}
			return last
		})
		assert.LessOrEqual(t, times[len(times)-1], p.Horizon, "run %d asked past the horizon", run)
		switch d.Status {
		case queryplan.Closed:
			assert.Equal(t, channels.QueryClosed, last)
		case queryplan.Expired:
			assert.Equal(t, channels.QueryNotFound, last)
		case "":
			assert.True(t, d.Alert, "run %d stopped with no status and no alert after %s", run, last)
		default:
			t.Fatalf("run %d stopped with status %s", run, d.Status)
		}
	}
}

func TestUnknownOutcomeIsUncertainNeverFinal(t *testing.T) {
	p := queryplan.DefaultPolicy()
	d, err := p.After(payment(time.Hour), "paid-probably", created.Add(time.Minute))
	require.ErrorIs(t, err, queryplan.ErrUnknownOutcome)
	assert.False(t, d.Stop)
	assert.Equal(t, queryplan.Abnormal, d.Status)
	assert.True(t, d.Alert)
	uncertain, err := p.After(payment(time.Hour), channels.QueryUncertain, created.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, d.Next, uncertain.Next)
}

func TestValidateRefusesPoliciesThatCannotBeFollowed(t *testing.T) {
	for name, mutate := range map[string]func(*queryplan.Policy){
		"zero first wait":      func(p *queryplan.Policy) { p.FirstWait = 0 },
		"offset before first":  func(p *queryplan.Policy) { p.PaymentOffsets = []time.Duration{30 * time.Second} },
		"offsets descending":   func(p *queryplan.Policy) { p.RefundOffsets = []time.Duration{5 * time.Minute, 2 * time.Minute} },
		"retry max below min":  func(p *queryplan.Policy) { p.RetryMax = time.Second },
		"negative grace":       func(p *queryplan.Policy) { p.ExpiryGrace = -time.Second },
		"horizon before plans": func(p *queryplan.Policy) { p.Horizon = 20 * time.Minute },
	} {
		t.Run(name, func(t *testing.T) {
			p := queryplan.DefaultPolicy()
			mutate(&p)
			assert.Error(t, p.Validate())
		})
	}
	p := queryplan.DefaultPolicy()
	p.FirstWait = 2 * time.Second
	p.PaymentOffsets = nil
	require.NoError(t, p.Validate(), "a shortened first wait with no offsets is a valid schedule (the demo's)")
}
