package consumer

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a bounded, jittered exponential backoff: attempt n waits a random
// duration in [d/2, d] where d = Min·2ⁿ capped at Max.
type Backoff struct {
	Min time.Duration // default 10ms
	Max time.Duration // default 30s
}

// Delay returns the wait before retry attempt n (0-based).
func (b Backoff) Delay(n int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 10 * time.Millisecond
	}
	if hi < lo {
		hi = 30 * time.Second
	}
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Wait sleeps for Delay(n) or until ctx ends; it reports whether the full
// wait passed.
func (b Backoff) Wait(ctx context.Context, n int) bool {
	t := time.NewTimer(b.Delay(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
