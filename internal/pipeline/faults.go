package pipeline

import "context"

// FaultPoint names a boundary where a test can inject a failure or a crash.
type FaultPoint string

// The boundaries of one message's handling in the pipeline (the consumer
// has its own, before the offset commit).
const (
	// FaultAfterAcquire: the claim has committed, settlement has not begun.
	FaultAfterAcquire FaultPoint = "after-acquire"
	// FaultAfterSettle: settlement has committed, the offset has not.
	FaultAfterSettle FaultPoint = "after-settle"
	// FaultBeforeDeadLetter: a dead letter is about to be written.
	FaultBeforeDeadLetter FaultPoint = "before-dead-letter"
)

// FaultFunc is called at each FaultPoint with the message's context. A
// non-nil error fails the message there (it is retried in place); a
// function that blocks until ctx ends simulates a process that died at that
// point. Production leaves it nil.
type FaultFunc func(ctx context.Context, point FaultPoint) error

func (f FaultFunc) at(ctx context.Context, point FaultPoint) error {
	if f == nil {
		return nil
	}
	return f(ctx, point)
}
