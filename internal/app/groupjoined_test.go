package app_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnansweredHeartbeatsEndTheMembership: a coordinator that stops
// answering heartbeats (the connection stays open, nothing comes back) is
// not taken for a live session: once the worker's membership probe has
// gone unanswered past its 5s timeout (and before kafka-go's own
// heartbeat, whose deadline other requests on its connection push back,
// gives up) readiness fails, saying why, and paycb_group_joined is 0; once
// the coordinator answers again the worker is a member again, ready and 1.
func TestUnansweredHeartbeatsEndTheMembership(t *testing.T) {
	h := newHarness(t, 2)
	var silent atomic.Bool
	var dropped atomic.Int64
	h.cluster.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if !silent.Load() {
			return nil, nil, false // answered as usual
		}
		dropped.Add(1)
		return nil, nil, true // read, never answered
	})
	w := h.start(nil)
	joined := func() float64 { return counted(t, w.main, "paycb_group_joined", nil) }
	require.Eventually(t, func() bool { return w.main.Worker().Ready() == nil && joined() == 1 },
		30*time.Second, 20*time.Millisecond, "a member")

	silent.Store(true)
	since := time.Now()
	var err error
	require.Eventually(t, func() bool {
		err = w.main.Worker().Ready()
		return err != nil && joined() == 0
	}, 15*time.Second, 20*time.Millisecond, "the unanswered heartbeats end the membership")
	took := time.Since(since)
	t.Logf("membership ended %s after heartbeats stopped being answered: %v", took.Round(time.Millisecond), err)
	assert.Positive(t, dropped.Load())
	assert.GreaterOrEqual(t, took, 4*time.Second, "not before the request timeout: an answer was merely late until then")
	assert.True(t, strings.HasPrefix(err.Error(), "not a member of group "+h.group()+": generation 1 unconfirmed by the coordinator for "), err.Error())

	silent.Store(false)
	require.Eventually(t, func() bool { return w.main.Worker().Ready() == nil && joined() == 1 },
		30*time.Second, 20*time.Millisecond, "a member again")
}
