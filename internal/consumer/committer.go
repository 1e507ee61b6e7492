package consumer

import (
	"context"
	"sync"
	"time"
)

// offsetCommitter commits the offsets of one generation's partition loops,
// off their hot path. A loop that has taken a batch to durable outcomes
// offers the offset after it (Offer, which never waits) and goes on with
// its next batch; the committer sends what was offered, for every
// partition at once, in one request at most every interval (run), and
// synchronously when a loop asks (Commit: at shutdown) and once more when
// the generation ends (a revoke or the group's close), after every loop of
// the generation has stopped offering. So the group coordinator sees one
// request per interval, not one per batch per partition, and a rebalance
// redelivers nothing that was handled before the generation ended.
//
// What an offset means does not change: a loop offers an offset only once
// every message before it has a durable outcome (partition.go, commitUpTo),
// so whichever request carries it, it passes nothing unsettled.
//
// A request in flight is never joined: an offset offered meanwhile goes in
// the next. A caller of Commit that finds a request in flight waits for it
// and then either is answered by the next request or sends it itself, so
// no caller ever waits on requests for the others' offsets alone. A
// request refused for a reason other than the generation's end is not
// lost: its offsets go back to be sent again (unless a later one was
// offered meanwhile).
type offsetCommitter struct {
	topic string
	// send commits offsets with one request (Generation.CommitOffsets).
	send func(offsets map[string]map[int]int64) error
	// interval is the longest an offered offset waits for its request.
	interval time.Duration
	// answered, when set, is told the outcome of each request sent in the
	// background (by run), for metrics and logs; a caller of Commit is
	// told its own. It must not call back.
	answered func(offsets map[int]int64, err error)

	mu      sync.Mutex
	sending bool                    // a request is in flight, or its sender chosen
	pending map[int]int64           // partition -> next offset, for the next request
	waiters map[int]chan commitTurn // partition -> its Commit caller, for the next request
}

// commitTurn is what a waiting caller is told: the answer to the request
// that carried its offset, or that it sends the next request itself.
type commitTurn struct {
	err  error
	send bool
}

func newOffsetCommitter(topic string, send func(map[string]map[int]int64) error) *offsetCommitter {
	return &offsetCommitter{topic: topic, send: send, pending: map[int]int64{}, waiters: map[int]chan commitTurn{}}
}

// Offer records next (the next offset to read) for partition, to be
// carried by the next request; it never waits. Each partition's loop
// offers increasing offsets; an older one never replaces a newer.
func (c *offsetCommitter) Offer(partition int, next int64) {
	c.mu.Lock()
	c.offerLocked(partition, next)
	c.mu.Unlock()
}

func (c *offsetCommitter) offerLocked(partition int, next int64) {
	if cur, ok := c.pending[partition]; !ok || next > cur {
		c.pending[partition] = next
	}
}

// Commit commits next for partition now, with everything else offered,
// and returns the answer of the request that carried it. Each partition's
// loop calls it one call at a time, with increasing offsets.
func (c *offsetCommitter) Commit(partition int, next int64) error {
	turn := make(chan commitTurn, 1)
	c.mu.Lock()
	c.offerLocked(partition, next)
	c.waiters[partition] = turn
	if c.sending {
		c.mu.Unlock()
		t := <-turn
		if !t.send {
			return t.err
		}
		c.mu.Lock() // this caller's offset is still pending: send it
	}
	return c.sendLocked(partition)
}

// sendLocked sends every pending offset in one request, with c.mu held
// (and released), as the caller of partition (-1: no caller of Commit),
// answers the callers whose offsets it carried and chooses the next
// sender among those that arrived meanwhile.
func (c *offsetCommitter) sendLocked(partition int) error {
	c.sending = true
	offsets, waiters := c.pending, c.waiters
	c.pending, c.waiters = map[int]int64{}, map[int]chan commitTurn{}
	c.mu.Unlock()

	var err error
	if len(offsets) > 0 {
		err = c.send(map[string]map[int]int64{c.topic: offsets})
	}

	c.mu.Lock()
	if err != nil && !generationOver(err) {
		// Not lost: the next request carries them, unless a later offset
		// of the partition came meanwhile.
		for p, next := range offsets {
			c.offerLocked(p, next)
		}
	}
	c.sending = false
	for _, next := range c.waiters {
		next <- commitTurn{send: true}
		c.sending = true
		break
	}
	c.mu.Unlock()
	for p, w := range waiters {
		if p != partition {
			w <- commitTurn{err: err}
		}
	}
	if c.answered != nil && partition < 0 && len(offsets) > 0 {
		c.answered(offsets, err)
	}
	return err
}

// tick sends what is pending unless a request is in flight (whose sender
// then hands over to a waiting caller, or the next tick sends). It
// returns the request's error, nil when none was sent.
func (c *offsetCommitter) tick() error {
	c.mu.Lock()
	if c.sending || len(c.pending) == 0 {
		c.mu.Unlock()
		return nil
	}
	return c.sendLocked(-1)
}

// run sends the offered offsets every interval until ctx ends (the
// generation's end); then, once loops (the generation's partition loops)
// have all returned, so that nothing more is offered, it flushes: what is
// pending is sent, retried up to flushAttempts times while the coordinator
// refuses it for a reason other than the generation's end. The group does
// not move to its next generation before run returns, so the partitions'
// next owners start after that last request.
func (c *offsetCommitter) run(ctx context.Context, loops *sync.WaitGroup, backoff Backoff) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			loops.Wait()
			c.flush(backoff)
			return
		case <-t.C:
			_ = c.tick() // a refused request's offsets stay pending; answered reports it
		}
	}
}

// flushAttempts bounds the final flush of a generation: the coordinator is
// waiting for this member to rejoin.
const flushAttempts = 3

// flush sends what is pending. It runs once every loop has returned, so
// no caller of Commit is sending, and on run's goroutine, which ticks.
func (c *offsetCommitter) flush(backoff Backoff) {
	for attempt := 0; attempt < flushAttempts; attempt++ {
		c.mu.Lock()
		if c.sending || len(c.pending) == 0 {
			c.mu.Unlock()
			return
		}
		err := c.sendLocked(-1)
		if err == nil || generationOver(err) {
			return
		}
		if attempt+1 < flushAttempts && !backoff.Wait(context.Background(), attempt) {
			return
		}
	}
}
