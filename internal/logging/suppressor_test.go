package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/logging"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// jsonLines decodes the JSON lines written to buf and empties it.
func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	buf.Reset()
	return out
}

func newTestSuppressor(buf *bytes.Buffer, clock *fakeClock) *logging.Suppressor {
	return logging.NewSuppressor(logging.New(buf, slog.LevelDebug, "json"),
		logging.WithClock(clock.now), logging.WithIntervals(2*time.Second, time.Minute))
}

func TestSuppressorBacksOffAndCountsWhatItLeftOut(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newTestSuppressor(&buf, clock)
	ctx := context.Background()

	// An unreachable broker: the same failure every second for ten
	// minutes.
	var written []time.Duration
	var suppressed []float64
	start := clock.t
	for range 600 {
		s.Log(ctx, slog.LevelWarn, "dial refused", "broker unreachable", "error", "connection refused")
		for _, l := range jsonLines(t, &buf) {
			assert.Equal(t, "broker unreachable", l["msg"])
			assert.Equal(t, "WARN", l["level"])
			assert.Equal(t, "connection refused", l["error"])
			written = append(written, clock.t.Sub(start))
			n, _ := l["suppressed"].(float64)
			suppressed = append(suppressed, n)
		}
		clock.advance(time.Second)
	}
	// First at once, then after 2s, 4s, 8s, 16s, 32s, then every minute.
	want := []time.Duration{0, 2, 6, 14, 30, 62, 122, 182, 242, 302, 362, 422, 482, 542}
	for i := range want {
		want[i] *= time.Second
	}
	assert.Equal(t, want, written)
	assert.Equal(t, []float64{0, 1, 3, 7, 15, 31, 59, 59, 59, 59, 59, 59, 59, 59}, suppressed)

	s.Clear(ctx)
	lines := jsonLines(t, &buf)
	require.Len(t, lines, 1)
	assert.Equal(t, "condition cleared", lines[0]["msg"])
	assert.Equal(t, "INFO", lines[0]["level"])
	assert.Equal(t, "broker unreachable", lines[0]["condition"])
	assert.InDelta(t, 600.0, lines[0]["occurrences"], 0)
	assert.InDelta(t, 57.0, lines[0]["suppressed"], 0, "the occurrences after the last line written")
	assert.Equal(t, "10m0s", lines[0]["lasted"])

	// Cleared means forgotten: the next occurrence is written at once.
	s.Log(ctx, slog.LevelWarn, "dial refused", "broker unreachable", "error", "connection refused")
	lines = jsonLines(t, &buf)
	require.Len(t, lines, 1)
	assert.NotContains(t, lines[0], "suppressed")
}

func TestSuppressorTellsConditionsApart(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newTestSuppressor(&buf, clock)
	ctx := context.Background()

	s.Log(ctx, slog.LevelWarn, "a", "failed", "error", "a")
	s.Log(ctx, slog.LevelWarn, "b", "failed", "error", "b")
	s.Log(ctx, slog.LevelWarn, "a", "failed", "error", "a")
	lines := jsonLines(t, &buf)
	require.Len(t, lines, 2, "each condition's first occurrence, not the repeat")
	assert.Equal(t, "a", lines[0]["error"])
	assert.Equal(t, "b", lines[1]["error"])

	clock.advance(time.Second)
	s.Log(ctx, slog.LevelWarn, "c", "failed", "error", "c")
	clock.advance(time.Second)
	s.Log(ctx, slog.LevelWarn, "c", "failed", "error", "c")
	lines = jsonLines(t, &buf)
	require.Len(t, lines, 1)
	assert.Equal(t, "c", lines[0]["error"])

	clock.advance(time.Second)
	s.Clear(ctx)
	lines = jsonLines(t, &buf)
	require.Len(t, lines, 2, "an all-clear for each condition that recurred; b was a one-off")
	assert.Equal(t, "failed", lines[0]["condition"])
	assert.InDelta(t, 2.0, lines[0]["occurrences"], 0)
	assert.InDelta(t, 1.0, lines[0]["suppressed"], 0)
	assert.Equal(t, "3s", lines[0]["lasted"], "a first")
	assert.InDelta(t, 2.0, lines[1]["occurrences"], 0)
	assert.Equal(t, "2s", lines[1]["lasted"])

	s.Log(ctx, slog.LevelWarn, "b", "failed", "error", "b")
	lines = jsonLines(t, &buf)
	require.Len(t, lines, 1, "b forgotten too: written at once")
	s.Clear(ctx)
	assert.Empty(t, buf.String(), "a one-off gets no all-clear")
}

func TestSuppressorIgnoresNumbersInKeys(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newTestSuppressor(&buf, clock)
	ctx := context.Background()

	s.Log(ctx, slog.LevelWarn, "read tcp 127.0.0.1:56000->127.0.0.1:9092: reset", "failed")
	s.Log(ctx, slog.LevelWarn, "read tcp 127.0.0.1:56012->127.0.0.1:9092: reset", "failed")
	assert.Len(t, jsonLines(t, &buf), 1, "another local port: the same condition")
	s.Log(ctx, slog.LevelWarn, "read tcp 127.0.0.1:56012->127.0.0.1:9092: refused", "failed")
	assert.Len(t, jsonLines(t, &buf), 1, "another error: another condition")
	s.Log(ctx, slog.LevelError, "read tcp 127.0.0.1:56012->127.0.0.1:9092: refused", "failed")
	assert.Len(t, jsonLines(t, &buf), 1, "another level: another condition")
}

func TestSuppressorStartsOverAfterALongQuiet(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newTestSuppressor(&buf, clock)
	ctx := context.Background()

	s.Log(ctx, slog.LevelWarn, "k", "failed")
	clock.advance(time.Second)
	s.Log(ctx, slog.LevelWarn, "k", "failed")
	require.Len(t, jsonLines(t, &buf), 1)

	clock.advance(time.Minute)
	s.Log(ctx, slog.LevelWarn, "k", "failed")
	lines := jsonLines(t, &buf)
	require.Len(t, lines, 1, "back after a minute of quiet: written at once")
	assert.InDelta(t, 1.0, lines[0]["suppressed"], 0, "with what was left out before")
	clock.advance(time.Second)
	s.Log(ctx, slog.LevelWarn, "k", "failed")
	assert.Empty(t, jsonLines(t, &buf), "and backing off from the first interval again")
}

func TestSuppressorWritesNothingBelowTheLevel(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Now()}
	s := logging.NewSuppressor(logging.New(&buf, slog.LevelInfo, "json"), logging.WithClock(clock.now))
	s.Log(context.Background(), slog.LevelDebug, "k", "detail")
	s.Clear(context.Background())
	assert.Empty(t, buf.String())
}
