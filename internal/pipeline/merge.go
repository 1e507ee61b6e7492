package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// mergeBelow is the largest batch (in distinct keys, plus one) that is
// merged with other partitions' batches; a batch this size or bigger
// amortises its statements and transaction alone (it is also where
// settlement creates a batch's order rows ahead of its transaction).
const mergeBelow = 8

// merger is the group commit in front of the database, one per Pipeline
// (one per worker process), as the offset committer is for Kafka: the
// small batches that concurrently active partitions have ready share one
// lookup, one claims insert and one business transaction.
//
// One round is in flight at a time, led by one request's goroutine; the
// merger has none of its own. A partition that finds no round in flight
// leads the next one; partitions that come while a round is in flight
// queue, and when it ends the first of them leads the next. A leader
// first waits until wait has passed since the last round started
// (gathering), then takes the queued batches, in arrival order, each
// whole, up to max events, itself first; a batch holding a key already in
// the round, or whose statements would pass the server's largest
// statement with the round's, waits for the one after (a round settles
// each key once). So a worker idle for wait starts a round at once, and
// at steady load rounds start at most every wait, each holding what came
// meanwhile: fewer, larger rounds, at the cost of up to wait of latency.
//
// Nothing that can wait for a lock runs while a round is in flight: a
// round of several batches settles in a transaction that hands back the
// order rows another transaction holds (settlement.Service.SettleMerged),
// each batch settling what it left after the round ended, and a batch
// alone in its round ends it once its claims are made, before its own
// settlement. So a partition waiting for a held order row never holds up
// another partition's batch.
type merger struct {
	max  int           // most events (distinct keys) of one round
	wait time.Duration // least time from one round's start to the next's
	// sleep waits out a leader's gathering pause (nil: time.Sleep); tests
	// replace it to gather deterministically.
	sleep func(time.Duration)

	mu        sync.Mutex
	inFlight  bool // a round is in flight, or its leader is gathering
	queue     []*mergeRequest
	lastStart time.Time // when the last round was taken
}

// mergeRequest is one partition's batch in the merger: its money events,
// one per distinct key (leaders), and, once done is closed, what the round
// made of them.
type mergeRequest struct {
	leaders []moneyItem
	lookup  bool // acquire's rule: look the keys up before inserting
	// bytes bounds what the batch adds to the round's largest statement
	// (statementBytes); limit is the server's largest statement.
	bytes, limit int

	// Set by the round before done is closed.
	results    []idempotent.Result
	inserted   []int // leaders a failed claims insert carried (their claims unknown)
	acquireErr error // the lookup or the claims' insert failed
	fresh      []int // leaders whose claims the round made
	outcomes   []settleOutcome
	settled    []bool // outcomes[n] is final; the others, the caller settles alone
	faultErr   error  // the after-acquire fault point failed

	done  chan struct{} // closed when the round is done, or when this request leads the next
	leads bool          // set (under merger.mu) before done is closed to make it lead
}

// join queues req, and returns the round req leads (req first) or nil
// when another request's round took req and is done. A request that finds
// no round in flight, or is first in the queue when one ends, leads: it
// gathers (see merger) and takes the next round. A ctx that ends while
// req waits in the queue takes it out: ctx's error, nothing done. Once a
// round has taken req, or req leads, join goes on without ctx: a round
// is not given up (its statements are bounded by the statement timeout),
// and the gathering wait is at most the merger's wait.
func (m *merger) join(ctx context.Context, req *mergeRequest) ([]*mergeRequest, error) {
	req.done = make(chan struct{})
	m.mu.Lock()
	m.queue = append(m.queue, req)
	if !m.inFlight {
		m.inFlight = true
		req.leads = true
		m.mu.Unlock()
		return m.lead(), nil
	}
	m.mu.Unlock()
	select {
	case <-req.done:
	case <-ctx.Done():
		m.mu.Lock()
		if !req.leads {
			if i := slices.Index(m.queue, req); i >= 0 {
				m.queue = slices.Delete(m.queue, i, i+1)
				m.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		m.mu.Unlock()
		<-req.done
	}
	if req.leads {
		return m.lead(), nil
	}
	return nil, nil
}

// lead is the leader's part: it waits out the rest of the gathering wait,
// then takes the next round, which the leader, first in the queue, heads.
func (m *merger) lead() []*mergeRequest {
	m.mu.Lock()
	pause := m.wait - time.Since(m.lastStart)
	m.mu.Unlock()
	if pause > 0 {
		if m.sleep != nil {
			m.sleep(pause)
		} else {
			time.Sleep(pause)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastStart = time.Now()
	return m.take()
}

// finish ends round (its results set): it wakes the others of round and
// makes the first queued request, if any, the next leader.
func (m *merger) finish(round []*mergeRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range round[1:] {
		close(r.done)
	}
	if len(m.queue) == 0 {
		m.inFlight = false
		return
	}
	next := m.queue[0]
	next.leads = true
	close(next.done)
}

// take removes the next round from the queue (m.mu held): queued requests
// in arrival order while the round holds at most max events and its
// statements stay within the first request's limit, the first (the
// leader) always; a request holding a key already in the round stays
// queued.
func (m *merger) take() []*mergeRequest {
	if len(m.queue) == 0 {
		return nil
	}
	var round []*mergeRequest
	keys := map[idempotent.TenantKey]bool{}
	events, bytes := 0, 0
	rest := m.queue[:0]
	for _, r := range m.queue {
		if len(round) > 0 && (events+len(r.leaders) > m.max || bytes+r.bytes > round[0].limit || holdsAny(r, keys)) {
			rest = append(rest, r)
			continue
		}
		round = append(round, r)
		events += len(r.leaders)
		bytes += r.bytes
		for _, it := range r.leaders {
			keys[it.key] = true
		}
	}
	clear(m.queue[len(rest):])
	m.queue = rest
	return round
}

// holdsAny reports whether r holds one of keys.
func holdsAny(r *mergeRequest, keys map[idempotent.TenantKey]bool) bool {
	for _, it := range r.leaders {
		if keys[it.key] {
			return true
		}
	}
	return false
}

// merger returns the pipeline's merger, nil when batches are not merged
// (MergeMax below 2).
func (p *Pipeline) merger() *merger {
	if p.MergeMax < 2 {
		return nil
	}
	p.mergeOnce.Do(func() { p.merge = &merger{max: p.MergeMax, wait: p.MergeWait} })
	return p.merge
}

// claimAndSettleMerged is claimAndSettle for a small batch through the
// merger m: the batch joins a round; alone in it, it takes the path of a
// batch not merged (claimAndSettleAlone), ending the round when its claims
// are made, before its settlement; otherwise the round's claims
// and merged transaction (runRound) give it its claim results, and it
// settles alone what the merged transaction left.
func (p *Pipeline) claimAndSettleMerged(ctx context.Context, m *merger, leaders []moneyItem) ([]idempotent.Result, []int, []settleOutcome, error) {
	limit, err := p.Claims.MaxStatementBytes(ctx)
	if err != nil {
		return nil, nil, nil, failed(metrics.StageAcquire, err)
	}
	req := &mergeRequest{
		leaders: leaders,
		lookup:  lookupFirst(leaders),
		limit:   limit,
	}
	for _, it := range leaders {
		req.bytes += statementBytes(it.ev)
	}
	round, err := m.join(ctx, req)
	if err != nil {
		return nil, nil, nil, failed(metrics.StageAcquire, err)
	}
	if len(round) == 1 {
		// Alone in its round: the path of a batch not merged, the round
		// given back once its claims are made. Its settlement may wait for
		// an order row another transaction holds (and then settle its
		// events one by one); every other partition's batch would queue
		// behind that wait.
		return p.claimAndSettleAlone(ctx, leaders, func() { m.finish(round) })
	}
	if round != nil {
		p.runRound(ctx, round)
		m.finish(round)
	}
	if req.acquireErr != nil {
		// The insert may have committed without an answer.
		for _, j := range req.inserted {
			leaders[j].st.acquireUnknown = true
		}
		// The round's claims failed as a whole (a deadlock, a lock wait
		// timeout or a certification failure on one batch's row fails the
		// statement): each batch claims its own alone, now that the round
		// is over, as a failed merged transaction hands each its events
		// back. Only the batch whose own claims fail again pays an attempt.
		p.Logger.Debug("merged claims failed; each batch claims its own", "events", len(leaders), "error", req.acquireErr)
		return p.claimAndSettleAlone(ctx, leaders, nil)
	}
	markAcquired(req.results, leaders)
	if req.faultErr != nil {
		return nil, nil, nil, req.faultErr
	}
	// What the merged transaction left: settled here, alone.
	var rest []int // indexes into req.fresh
	for n := range req.fresh {
		if !req.settled[n] {
			rest = append(rest, n)
		}
	}
	if len(rest) > 0 {
		sub := make([]int, len(rest))
		for k, n := range rest {
			sub[k] = req.fresh[n]
		}
		for k, o := range p.settleFresh(ctx, leaders, sub) {
			req.outcomes[rest[k]] = o
		}
	}
	return req.results, req.fresh, req.outcomes, nil
}

// runRound does the database work of a round of several batches: one
// lookup of every key when one of them looks up, one insert of every claim
// not found, then, after the after-acquire fault point, one transaction
// settling every claim the round made (settlement.Service.SettleMerged).
// It runs on ctx without its cancellation (the leader's partition may be
// revoked; the others' work goes on), each step bounded by the statement
// timeout. Results go into each request; a failed lookup or insert, and a
// failed merged transaction, leave each request's events to its caller
// (which claims, or settles, them alone).
func (p *Pipeline) runRound(ctx context.Context, round []*mergeRequest) {
	dbctx := context.WithoutCancel(ctx)
	// (1) The claims: one lookup of every key when a batch looks up, one
	// insert of every key not found (claimAll, as a batch alone).
	type owner struct {
		r *mergeRequest
		j int
	}
	var items []moneyItem
	var owners []owner
	for _, r := range round {
		for j, it := range r.leaders {
			items = append(items, it)
			owners = append(owners, owner{r, j})
		}
	}
	// A lookup that one batch's rule asks for takes every key of the round:
	// it costs no statement more, and a key it finds needs neither the
	// insert nor the read that a refused row of the insert costs (a
	// channel retry of an event settled a round before is one).
	look := slices.ContainsFunc(round, func(r *mergeRequest) bool { return r.lookup })
	results, inserted, err := p.claimAll(dbctx, items, look)
	if err != nil {
		for _, n := range inserted {
			o := owners[n]
			o.r.inserted = append(o.r.inserted, o.j)
		}
		for _, r := range round {
			r.acquireErr = err
		}
		return
	}
	for _, r := range round {
		r.results = make([]idempotent.Result, len(r.leaders))
	}
	for n, res := range results {
		owners[n].r.results[owners[n].j] = res
	}
	// (2) The claims the round made, settled in one transaction.
	var evs []channels.Event
	var sources []settled.Source
	var settledBy []owner // evs[n] is settledBy[n].r.fresh[settledBy[n].j]
	for _, r := range round {
		for j, res := range r.results {
			if res.Kind == idempotent.Acquired {
				settledBy = append(settledBy, owner{r, len(r.fresh)})
				r.fresh = append(r.fresh, j)
				evs = append(evs, r.leaders[j].ev)
				sources = append(sources, r.leaders[j].origin)
			}
		}
		r.outcomes = make([]settleOutcome, len(r.fresh))
		r.settled = make([]bool, len(r.fresh))
	}
	if len(evs) == 0 {
		return
	}
	if err := p.Fault.at(ctx, FaultAfterAcquire); err != nil {
		for _, r := range round {
			if len(r.fresh) > 0 {
				r.faultErr = failed(metrics.StageSettle, err)
			}
		}
		return
	}
	sctx, cancel := p.statementContext(dbctx)
	res, err := p.Settler.SettleMergedFrom(sctx, evs, sources)
	cancel()
	result := metrics.MergeSettled
	if err != nil {
		result = metrics.MergeSplit
	}
	p.Metrics.Merged(len(evs), result)
	if len(res) != len(evs) || (err != nil && !errors.Is(err, settlement.ErrBatchIncomplete)) {
		// Nothing settled: each batch settles its own events.
		p.Logger.Debug("merged settlement failed; each batch settles its own", "batches", len(round), "events", len(evs), "error", err)
		return
	}
	for n, o := range settledBy {
		if err == nil || !res[n].SettledAt.IsZero() {
			o.r.outcomes[o.j].res, o.r.settled[o.j] = res[n], true
		}
	}
}
