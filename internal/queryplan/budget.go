package queryplan

import (
	"fmt"
	"time"
)

// Budget is a merchant's query budget: a token bucket of Burst tokens
// refilled at PerSecond, which every querier of a deployment draws from
// (the bucket's state is a row they share, read and written in one
// transaction: BucketState). A rate-limit answer backs the whole merchant
// off (Throttled), whichever querier received it.
type Budget struct {
	// PerSecond is the sustained rate of queries per merchant.
	PerSecond float64
	// Burst is the most queries sent at once after a quiet period.
	Burst int
	// Backoff is how long a merchant is not asked after a rate-limit
	// answer, doubled for each further one within it, at most MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultBudget is the default per-merchant budget: 5 queries a second,
// bursts of 10, and a minute's back-off after a rate-limit answer
// (WeChat's "间隔1分钟再重试") up to 10 minutes. WeChat publishes 300 qps
// for the refund query and nothing for the payment query (docs/querier.md):
// 5 a second stays far below any published limit, and a registration is
// asked a handful of times in its life.
func DefaultBudget() Budget {
	return Budget{PerSecond: 5, Burst: 10, Backoff: time.Minute, MaxBackoff: 10 * time.Minute}
}

// Validate refuses a budget that cannot be kept: a non-positive rate or
// burst, or back-offs that are not positive and ordered.
func (b Budget) Validate() error {
	if !(b.PerSecond > 0) || b.PerSecond > 1e6 {
		return fmt.Errorf("query budget: %v queries a second is not in (0, 1e6]", b.PerSecond)
	}
	if b.Burst < 1 {
		return fmt.Errorf("query budget: burst %d is below 1", b.Burst)
	}
	if b.Backoff <= 0 || b.MaxBackoff < b.Backoff {
		return fmt.Errorf("query budget: back-off %s to %s is not positive and ordered", b.Backoff, b.MaxBackoff)
	}
	return nil
}

// BucketState is the shared state of one merchant's bucket, as stored.
// Tokens are counted in thousandths so that the stored state is an
// integer and two queriers computing from the same row agree exactly.
type BucketState struct {
	// MilliTokens is the tokens left at UpdatedAt, in thousandths.
	MilliTokens int64
	// UpdatedAt is when MilliTokens was computed; zero for a new bucket
	// (full).
	UpdatedAt time.Time
	// BackoffUntil is when the merchant may be asked again after a
	// rate-limit answer; zero when it is not backed off.
	BackoffUntil time.Time
	// Backoffs counts rate-limit answers in a row, for the doubling.
	Backoffs int
}

// Take tries to spend one token at now. It returns the new state and true
// when a query may be sent; otherwise the state unchanged but refilled,
// false, and the earliest time a token will be there (or the back-off's
// end). A clock that went backwards refills nothing.
func (b Budget) Take(s BucketState, now time.Time) (BucketState, bool, time.Time) {
	s = b.refill(s, now)
	if now.Before(s.BackoffUntil) {
		return s, false, s.BackoffUntil
	}
	if s.MilliTokens >= 1000 {
		s.MilliTokens -= 1000
		return s, true, now
	}
	missing := 1000 - s.MilliTokens
	wait := time.Duration(float64(missing) / 1000 / b.PerSecond * float64(time.Second))
	return s, false, now.Add(wait + time.Millisecond)
}

// Throttled records a rate-limit answer received at now: the merchant is
// not asked for Backoff, doubled for each rate-limit answer that came
// while it was still backed off or within one Backoff after it, at most
// MaxBackoff; its bucket is emptied.
func (b Budget) Throttled(s BucketState, now time.Time) BucketState {
	s = b.refill(s, now)
	if !s.BackoffUntil.IsZero() && now.Before(s.BackoffUntil.Add(b.Backoff)) {
		s.Backoffs++
	} else {
		s.Backoffs = 0
	}
	wait := b.Backoff
	for i := 0; i < s.Backoffs && wait < b.MaxBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, b.MaxBackoff)
	if until := now.Add(wait); until.After(s.BackoffUntil) {
		s.BackoffUntil = until
	}
	s.MilliTokens = 0
	return s
}

// refill adds the tokens earned since s.UpdatedAt, up to Burst; a new
// bucket is full. A clock that went backwards earns nothing.
func (b Budget) refill(s BucketState, now time.Time) BucketState {
	full := int64(b.Burst) * 1000
	if s.UpdatedAt.IsZero() {
		s.MilliTokens, s.UpdatedAt = full, now
		return s
	}
	elapsed := now.Sub(s.UpdatedAt)
	if elapsed <= 0 {
		return s
	}
	earned := int64(elapsed.Seconds() * b.PerSecond * 1000)
	if s.MilliTokens+earned >= full {
		s.MilliTokens, s.UpdatedAt = full, now
		return s
	}
	// Only the time the earned thousandths took is spent: frequent calls
	// must not round the refill away.
	s.MilliTokens += earned
	s.UpdatedAt = s.UpdatedAt.Add(time.Duration(float64(earned) / 1000 / b.PerSecond * float64(time.Second)))
	return s
}
