package apptest

import (
	"context"
	"testing"
	"time"

	"github.com/paycallback/paycallback/internal/app"
)

// StopTimeout bounds how long MustClose waits for the worker to shut down.
const StopTimeout = 60 * time.Second

// MustRun starts m (app.Main.Start) and returns it once it is ready; tb
// fails at once when the worker stops at start. At cleanup it closes m
// (MustClose).
func MustRun(tb testing.TB, m *app.Main) *app.Main {
	tb.Helper()
	if err := m.Start(context.Background()); err != nil {
		tb.Fatalf("worker stopped at start: %v", err)
	}
	tb.Cleanup(func() { MustClose(tb, m) })
	return m
}

// Signal begins m's shutdown as a signal would and returns at once, for a
// test that must let in-flight work finish before it waits: once it has
// returned, the worker fetches nothing more. MustClose (or cleanup) then
// waits and checks the result.
func Signal(m *app.Main) { m.Stop() }

// MustClose stops m (app.Main.Close) and fails tb when the worker returned
// an error or did not stop within StopTimeout. Calling it again, or after
// cleanup did, checks the same result again.
func MustClose(tb testing.TB, m *app.Main) {
	tb.Helper()
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			tb.Fatalf("worker stopped with %v", err)
		}
	case <-time.After(StopTimeout):
		tb.Fatalf("worker did not stop within %s", StopTimeout)
	}
}
