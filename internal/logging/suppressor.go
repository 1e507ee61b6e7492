package logging

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Default intervals of a Suppressor.
const (
	// DefaultFirstInterval is how long a Suppressor stays quiet after the
	// first line of a condition.
	DefaultFirstInterval = 2 * time.Second
	// DefaultMaxInterval is the longest a Suppressor stays quiet about a
	// condition that keeps recurring.
	DefaultMaxInterval = time.Minute
)

// maxConditions bounds the conditions one Suppressor tracks at once;
// beyond it, a new condition is logged every time.
const maxConditions = 64

// Suppressor logs a failure that keeps recurring without flooding the log:
// the first occurrence of a condition at once, then at most one line per
// interval carrying suppressed=N (the occurrences not written since the
// previous line), the interval doubling from the first interval up to the
// maximum; and, when the caller says the conditions have cleared, one INFO
// line per condition that recurred. A condition not seen for the maximum
// interval starts over. It is safe for concurrent use.
type Suppressor struct {
	logger      *slog.Logger
	now         func() time.Time
	first, most time.Duration

	mu   sync.Mutex
	seen map[string]*condition
}

// condition is one recurring failure.
type condition struct {
	msg        string
	since      time.Time     // first occurrence
	last       time.Time     // latest occurrence
	quietUntil time.Time     // no line before this
	interval   time.Duration // the quiet period after the next line
	count      int           // occurrences
	suppressed int           // occurrences not written since the last line
}

// SuppressorOption configures a Suppressor.
type SuppressorOption func(*Suppressor)

// WithClock sets the Suppressor's clock (default time.Now), for tests.
func WithClock(now func() time.Time) SuppressorOption {
	return func(s *Suppressor) {
		if now != nil {
			s.now = now
		}
	}
}

// WithIntervals sets the quiet period after the first line and the longest
// one (defaults DefaultFirstInterval and DefaultMaxInterval). Values of
// zero or less keep the defaults; a maximum below the first is raised to it.
func WithIntervals(first, maximum time.Duration) SuppressorOption {
	return func(s *Suppressor) {
		if first > 0 {
			s.first = first
		}
		if maximum > 0 {
			s.most = maximum
		}
	}
}

// NewSuppressor returns a Suppressor writing to logger.
func NewSuppressor(logger *slog.Logger, opts ...SuppressorOption) *Suppressor {
	s := &Suppressor{logger: logger, now: time.Now, first: DefaultFirstInterval, most: DefaultMaxInterval, seen: map[string]*condition{}}
	for _, opt := range opts {
		opt(s)
	}
	if s.most < s.first {
		s.most = s.first
	}
	return s
}

// Log records one occurrence of the condition identified by key (the
// message with what varies between conditions but not between occurrences
// of one, such as the error text) and writes msg with args at level unless
// the condition was written less than its interval ago. A line after the
// first carries suppressed=N when occurrences were left out. Numbers in key
// do not tell conditions apart: an error naming a new local port or offset
// on each attempt is the same condition.
func (s *Suppressor) Log(ctx context.Context, level slog.Level, key, msg string, args ...any) {
	if !s.logger.Enabled(ctx, level) {
		return
	}
	key = level.String() + " " + withoutNumbers(key)
	now := s.now()
	s.mu.Lock()
	c, ok := s.seen[key]
	if ok && now.Sub(c.last) >= s.most {
		// Quiet for a long while: it cleared unseen and is back.
		c.since, c.quietUntil, c.interval = now, time.Time{}, s.first
	}
	if !ok {
		if len(s.seen) >= maxConditions {
			s.evict(now)
		}
		if len(s.seen) >= maxConditions {
			s.mu.Unlock()
			s.logger.Log(ctx, level, msg, args...)
			return
		}
		c = &condition{msg: msg, since: now, interval: s.first}
		s.seen[key] = c
	}
	c.count++
	c.last = now
	if now.Before(c.quietUntil) {
		c.suppressed++
		s.mu.Unlock()
		return
	}
	suppressed := c.suppressed
	c.suppressed = 0
	c.quietUntil = now.Add(c.interval)
	c.interval = min(2*c.interval, s.most)
	s.mu.Unlock()
	if suppressed > 0 {
		args = append(args[:len(args):len(args)], "suppressed", suppressed)
	}
	s.logger.Log(ctx, level, msg, args...)
}

// evict forgets the conditions not seen for the maximum interval.
func (s *Suppressor) evict(now time.Time) {
	for k, c := range s.seen {
		if now.Sub(c.last) >= s.most {
			delete(s.seen, k)
		}
	}
}

// Clear says that every condition logged since the previous Clear has
// ended, and forgets them. For each that occurred more than once it writes
// one INFO line "condition cleared" with the condition's message, its
// occurrences, the suppressed ones never written, and how long it lasted;
// a one-off needs no all-clear. It costs a lock when there is nothing to
// clear.
func (s *Suppressor) Clear(ctx context.Context) {
	s.mu.Lock()
	if len(s.seen) == 0 {
		s.mu.Unlock()
		return
	}
	now := s.now()
	cleared := make([]*condition, 0, len(s.seen))
	for _, c := range s.seen {
		if c.count > 1 {
			cleared = append(cleared, c)
		}
	}
	clear(s.seen)
	s.mu.Unlock()
	slices.SortFunc(cleared, func(a, b *condition) int { return a.since.Compare(b.since) })
	for _, c := range cleared {
		s.logger.LogAttrs(ctx, slog.LevelInfo, "condition cleared", slog.String("condition", c.msg),
			slog.Int("occurrences", c.count), slog.Int("suppressed", c.suppressed), slog.Duration("lasted", now.Sub(c.since)))
	}
}

// withoutNumbers replaces each run of digits in s with one '#'.
func withoutNumbers(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	digits := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteByte(c)
	}
	return b.String()
}
