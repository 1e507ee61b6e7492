package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/paycallback/paycallback/internal/logging"
)

// snapshot is what the timer-driven collectors share: a value read from
// the database by refresh (run at once and then every interval), never by
// a scrape, kept with the time it was read. A failed read is logged at
// WARN (a recurring failure at most about once a minute), reported to
// failed when set, and drops the value until a read succeeds, so a stale
// figure never hides a backlog; a read that the caller's context ended
// changes nothing.
type snapshot[T any] struct {
	read     func(ctx context.Context) (T, error)
	log      *logging.Suppressor
	now      func() time.Time
	interval time.Duration
	timeout  time.Duration
	// what names the reading in the log ("registration metrics"), failure
	// the log's message.
	what, failure string
	failed        func()

	mu    sync.Mutex
	ok    bool
	value T
	at    time.Time
}

// newSnapshot returns a snapshot reading through read every interval
// (zero: fallback; at least least), logging to logger (slog.Default() when
// nil).
func newSnapshot[T any](read func(context.Context) (T, error), logger *slog.Logger, interval, fallback, least time.Duration, what, failure string) *snapshot[T] {
	if logger == nil {
		logger = slog.Default()
	}
	if interval <= 0 {
		interval = fallback
	}
	return &snapshot[T]{
		read: read, log: logging.NewSuppressor(logger), now: time.Now,
		interval: max(interval, least), timeout: DefaultStatementReadTimeout,
		what: what, failure: failure,
	}
}

// run refreshes at once and then every interval until ctx ends; it returns
// nil then.
func (s *snapshot[T]) run(ctx context.Context) error {
	return refreshEvery(ctx, s.interval, s.refresh)
}

// refresh reads the value, bounded by the read timeout, and keeps it.
func (s *snapshot[T]) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := s.read(rctx)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: not the database's failure
		}
		if s.failed != nil {
			s.failed()
		}
		s.log.Log(rctx, slog.LevelWarn, s.what, s.failure, "err", err)
		s.mu.Lock()
		var zero T
		s.ok, s.value = false, zero
		s.mu.Unlock()
		return
	}
	at := s.now()
	s.mu.Lock()
	s.ok, s.value, s.at = true, v, at
	s.mu.Unlock()
}

// last returns the last successful read's value and time; ok is false
// before one, and after a failed one.
func (s *snapshot[T]) last() (value T, at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.at, s.ok
}

// refreshEvery calls refresh at once and then every interval until ctx
// ends; it returns nil then.
func refreshEvery(ctx context.Context, interval time.Duration, refresh func(context.Context)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
