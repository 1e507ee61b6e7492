package consumer

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingCoordinator stands in for the group coordinator in unit tests of
// the coalescing logic (the end-to-end tests commit through a real broker).
type recordingCoordinator struct {
	mu        sync.Mutex
	requests  []map[int]int64
	committed map[int]int64 // partition -> highest offset in an answered request
	inFlight  int
	maxFlight int
	release   chan struct{} // when set, each request waits for a value
	fail      func(map[int]int64) error
}

func (r *recordingCoordinator) send(offsets map[string]map[int]int64) error {
	r.mu.Lock()
	r.inFlight++
	r.maxFlight = max(r.maxFlight, r.inFlight)
	r.mu.Unlock()
	if r.release != nil {
		<-r.release
	}
	req := offsets["t"]
	var err error
	if r.fail != nil {
		err = r.fail(req)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	r.requests = append(r.requests, req)
	if err == nil {
		for p, o := range req {
			r.committed[p] = max(r.committed[p], o)
		}
	}
	return err
}

func (r *recordingCoordinator) committedAt(p int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.committed[p]
}

func TestOffsetCommitterAnswersEachCallerAfterItsOffsetIsCommitted(t *testing.T) {
	coord := &recordingCoordinator{committed: map[int]int64{}}
	c := newOffsetCommitter("t", coord.send)
	const partitions, commits = 12, 300
	var wg sync.WaitGroup
	errs := make(chan error, partitions)
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := int64(1); next <= commits; next++ {
				if err := c.Commit(p, next); err != nil {
					errs <- err
					return
				}
				if got := coord.committedAt(p); got < next {
					errs <- fmt.Errorf("partition %d: Commit(%d) returned before its request was answered (committed %d)", p, next, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for p := range partitions {
		assert.Equal(t, int64(commits), coord.committedAt(p))
	}
	assert.Equal(t, 1, coord.maxFlight, "one request in flight at a time")
	assert.LessOrEqual(t, len(coord.requests), partitions*commits)
	t.Logf("%d commits in %d requests", partitions*commits, len(coord.requests))
}

func TestOffsetCommitterCoalescesCallersThatArriveDuringARequest(t *testing.T) {
	coord := &recordingCoordinator{committed: map[int]int64{}, release: make(chan struct{})}
	c := newOffsetCommitter("t", coord.send)
	var wg sync.WaitGroup
	results := make([]error, 12)
	wg.Add(1)
	go func() { defer wg.Done(); results[0] = c.Commit(0, 10) }()
	waitFor(t, func() bool { coord.mu.Lock(); defer coord.mu.Unlock(); return coord.inFlight == 1 })
	for p := 1; p < 12; p++ {
		wg.Add(1)
		go func() { defer wg.Done(); results[p] = c.Commit(p, int64(100+p)) }()
	}
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pending) == 11 })
	coord.release <- struct{}{} // the first request: partition 0 alone
	coord.release <- struct{}{} // the second: the eleven that waited
	wg.Wait()
	for p, err := range results {
		require.NoError(t, err, "partition %d", p)
	}
	require.Len(t, coord.requests, 2)
	assert.Equal(t, map[int]int64{0: 10}, coord.requests[0])
	assert.Len(t, coord.requests[1], 11)
	assert.Equal(t, int64(111), coord.requests[1][11])
}

func TestOffsetCommitterGivesEveryCallerInARequestItsError(t *testing.T) {
	refused := errors.New("rebalance in progress")
	coord := &recordingCoordinator{
		committed: map[int]int64{}, release: make(chan struct{}),
		fail: func(req map[int]int64) error {
			if len(req) > 1 {
				return refused
			}
			return nil
		},
	}
	c := newOffsetCommitter("t", coord.send)
	var wg sync.WaitGroup
	results := make([]error, 4)
	wg.Add(1)
	go func() { defer wg.Done(); results[0] = c.Commit(0, 1) }()
	waitFor(t, func() bool { coord.mu.Lock(); defer coord.mu.Unlock(); return coord.inFlight == 1 })
	for p := 1; p < 4; p++ {
		wg.Add(1)
		go func() { defer wg.Done(); results[p] = c.Commit(p, 1) }()
	}
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pending) == 3 })
	coord.release <- struct{}{}
	coord.release <- struct{}{}
	wg.Wait()
	require.NoError(t, results[0])
	for p := 1; p < 4; p++ {
		require.ErrorIs(t, results[p], refused, "partition %d", p)
		assert.Zero(t, coord.committedAt(p))
	}
}

// waitFor yields until cond holds; the test's own timeout bounds it.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		runtime.Gosched()
	}
}
