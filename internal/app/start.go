package app

import (
	"context"
	"errors"
)

// background is a Run that Start began: how to stop it and its result.
type background struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // Run's result, set before done is closed
}

// Start runs Run in the background on a context derived from ctx and
// returns once every part is wired (Ready), with nil; or, when Run returns
// before that, with Run's error (a configuration or start-up check that
// failed), the worker then being stopped. Stop it with Close; cancelling
// ctx stops it too. A Main is started once: a second Start is an error.
func (m *Main) Start(ctx context.Context) error {
	ready := m.Ready()
	ctx, cancel := context.WithCancel(ctx)
	bg := &background{cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	if m.bg != nil {
		m.mu.Unlock()
		cancel()
		return errors.New("app: Main started twice")
	}
	m.bg = bg
	m.mu.Unlock()
	go func() {
		defer close(bg.done)
		bg.err = m.Run(ctx)
		cancel()
	}()
	select {
	case <-ready:
		return nil
	case <-bg.done:
		if bg.err == nil {
			return errors.New("app: the worker stopped before it was ready")
		}
		return bg.err
	}
}

// Stop begins the shutdown that Close waits for: it cancels Run's context,
// as a signal would, and returns at once; once it has returned, the worker
// fetches nothing more. On a Main that Start did not start it does nothing.
func (m *Main) Stop() {
	m.mu.Lock()
	bg := m.bg
	m.mu.Unlock()
	if bg != nil {
		bg.cancel()
	}
}

// Close stops what Start started as a signal would: it cancels Run's
// context, so that Run stops fetching, finishes and commits what is in
// flight and shuts down in order, then waits for Run to return and returns
// its error (nil after a clean shutdown). Calling it again returns the same
// error; on a Main that Start did not start it returns nil at once.
func (m *Main) Close() error {
	m.mu.Lock()
	bg := m.bg
	m.mu.Unlock()
	if bg == nil {
		return nil
	}
	bg.cancel()
	<-bg.done
	return bg.err
}
