package worker

import "sync"

// offsetCommitter coalesces the offset commits of one generation's
// partition loops. A loop that asks while a commit request is in flight
// joins the next request, so the group coordinator sees one request per
// round, carrying every partition that finished a batch meanwhile, rather
// than one request per batch per partition. Each caller still returns only
// once a request carrying its offset has been answered, with that answer:
// nothing about when an offset counts as committed changes.
//
// The caller that finds no request in flight sends one; when it is
// answered, one of the callers that arrived meanwhile sends the next, so
// no loop ever waits on requests for the others' offsets alone.
type offsetCommitter struct {
	topic string
	// send commits offsets with one request (Generation.CommitOffsets).
	send func(offsets map[string]map[int]int64) error

	mu      sync.Mutex
	sending bool                    // a request is in flight, or its sender chosen
	pending map[int]int64           // partition -> next offset, for the next request
	waiters map[int]chan commitTurn // partition -> its caller, for the next request
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

// Commit commits next (the next offset to read) for partition and returns
// the answer of the request that carried it. Each partition's loop calls
// it one call at a time, with increasing offsets.
func (c *offsetCommitter) Commit(partition int, next int64) error {
	turn := make(chan commitTurn, 1)
	c.mu.Lock()
	c.pending[partition] = next
	c.waiters[partition] = turn
	if c.sending {
		c.mu.Unlock()
		t := <-turn
		if !t.send {
			return t.err
		}
		c.mu.Lock() // this caller's offset is still pending: send it
	}
	c.sending = true
	offsets, waiters := c.pending, c.waiters
	c.pending, c.waiters = map[int]int64{}, map[int]chan commitTurn{}
	c.mu.Unlock()

	err := c.send(map[string]map[int]int64{c.topic: offsets})

	c.mu.Lock()
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
	return err
}
