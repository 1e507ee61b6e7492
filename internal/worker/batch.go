package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// BatchSettler settles many claimed events in one transaction. When the
// Settler also implements it, a batch's new claims are settled together;
// any failure there falls back to one transaction per event for the events
// it did not settle (an error wrapping settlement.ErrBatchIncomplete comes
// with the results of those it did), so one bad event never blocks or
// rolls back the others' outcomes.
type BatchSettler interface {
	SettleBatch(ctx context.Context, evs []channels.Event) ([]settlement.Result, error)
}

// moneyItem is one decoded money event of a batch.
type moneyItem struct {
	i   int // index in the batch
	ev  channels.Event
	src idempotent.Source
	key idempotent.TenantKey
}

// HandleBatch takes every message of a batch from one partition to a
// durable outcome, or returns an error; states (one per message, kept by
// the caller across retries of the same batch) remember which messages are
// done, so a retry neither dead-letters nor counts a message twice. A nil
// error means the offset after the last message may be committed.
//
// Its outcomes are exactly Handle's: the claims of the batch's distinct
// keys are looked up together and the missing ones made with one insert
// (one round trip when all are duplicates), new claims are settled
// together, and each message is counted once.
func (p *Pipeline) HandleBatch(ctx context.Context, msgs []kafka.Message, states []MessageState) error {
	var money []moneyItem
	for i, msg := range msgs {
		if states[i].done {
			continue
		}
		res, err := p.Decoder.Decode(msg.Value)
		if err != nil {
			if err := p.deadLetterUndecodable(ctx, msg, res, err); err != nil {
				return err
			}
			states[i].done = true
			continue
		}
		if res.Ignored {
			if err := p.ignore(ctx, res); err != nil {
				return err
			}
			states[i].done = true
			continue
		}
		money = append(money, moneyItem{
			i: i, ev: res.Event,
			src: idempotent.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset},
			key: idempotent.TenantKey{TenantID: res.Event.TenantID, Key: res.Event.Key},
		})
	}
	if len(money) == 0 {
		return nil
	}

	// One claim per distinct key: the first message with it leads.
	leader := map[idempotent.TenantKey]int{} // key -> index in leaders
	var leaders []moneyItem
	for _, it := range money {
		if _, ok := leader[it.key]; ok {
			continue
		}
		leader[it.key] = len(leaders)
		leaders = append(leaders, it)
	}
	results, err := p.acquireLeaders(ctx, leaders, states)
	if err != nil {
		return failed(metrics.StageAcquire, err)
	}

	// Settle what this batch claimed, together.
	var fresh []int // indexes into leaders
	for j, r := range results {
		if r.Kind == idempotent.Acquired {
			states[leaders[j].i].acquired = true
			fresh = append(fresh, j)
		}
	}
	settledOK := map[int]bool{} // leader index -> its settlement is durable
	var firstErr error
	if len(fresh) > 0 {
		if err := p.Fault.at(ctx, FaultAfterAcquire); err != nil {
			return failed(metrics.StageSettle, err)
		}
		outcomes := p.settleFresh(ctx, leaders, fresh)
		for n, j := range fresh {
			it := leaders[j]
			o := outcomes[n]
			if o.err != nil {
				p.recordFailure(ctx, it.ev, o.err)
				if firstErr == nil {
					firstErr = failed(metrics.StageSettle, o.err)
				}
				continue
			}
			if err := p.afterSettle(ctx, msgs[it.i], it.ev, o.res); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			settledOK[j] = true
		}
		if err := p.Fault.at(ctx, FaultAfterSettle); err != nil {
			return failed(metrics.StageCommit, err)
		}
	}

	// Every money message, in order, to its outcome.
	for _, it := range money {
		j := leader[it.key]
		r := results[j]
		st := &states[it.i]
		msg := msgs[it.i]
		isLeader := leaders[j].i == it.i
		switch {
		case r.Kind == idempotent.Acquired && isLeader:
			if !settledOK[j] {
				continue // its error is in firstErr; retried with the batch
			}
			p.count(it.ev, metrics.OutcomeAcquired)
		case r.Kind == idempotent.Acquired: // a retry of an event this batch claimed
			if !settledOK[j] {
				continue
			}
			if it.ev.Fingerprint != leaders[j].ev.Fingerprint {
				if err := p.conflict(ctx, msg, it.ev, leaders[j].ev.Fingerprint, leaders[j].src); err != nil {
					return errors.Join(firstErr, err)
				}
				break
			}
			p.count(it.ev, metrics.OutcomeDuplicate)
		default: // the key was claimed before this batch
			if r.Existing.Fingerprint != it.ev.Fingerprint {
				if err := p.conflict(ctx, msg, it.ev, r.Existing.Fingerprint, r.Existing.Source); err != nil {
					return errors.Join(firstErr, err)
				}
				break
			}
			if isLeader {
				// Settle an ACQUIRED claim, or write a pending over-refund
				// dead letter, once for the key.
				if err := p.finishExisting(ctx, msg, it.ev, r.Existing); err != nil {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
			} else if !states[leaders[j].i].done && leaders[j].i != it.i {
				continue // wait for the leader, retried with the batch
			}
			p.count(it.ev, outcomeOfDuplicate(st, r.Existing, it.src))
		}
		st.done = true
	}
	return firstErr
}

// acquireLeaders claims the leaders' keys: one lookup of the claims that
// exist (a batch of duplicates costs that one round trip and never encodes
// its events), then one insert of the rest, which the unique index decides.
// results[j] is leaders[j]'s.
func (p *Pipeline) acquireLeaders(ctx context.Context, leaders []moneyItem, states []MessageState) ([]idempotent.Result, error) {
	keys := make([]idempotent.TenantKey, len(leaders))
	for j, it := range leaders {
		keys[j] = it.key
	}
	existing, err := p.Claims.LookupMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	results := make([]idempotent.Result, len(leaders))
	var fresh []int // indexes into leaders
	var claims []idempotent.Claim
	for j, it := range leaders {
		c := idempotent.Claim{
			TenantID: it.ev.TenantID, Key: it.ev.Key, EventType: it.ev.Type,
			Fingerprint: it.ev.Fingerprint, Source: it.src,
		}
		if rec, ok := existing[it.key]; ok {
			results[j] = idempotent.Compare(c, rec)
			continue
		}
		body, err := json.Marshal(it.ev)
		if err != nil {
			return nil, fmt.Errorf("encode event %s: %w", it.ev.Key, err)
		}
		c.Event = body
		fresh = append(fresh, j)
		claims = append(claims, c)
	}
	if len(claims) == 0 {
		return results, nil
	}
	res, err := p.Claims.AcquireMany(ctx, claims)
	if err != nil {
		// The insert may have committed without an answer.
		for _, j := range fresh {
			states[leaders[j].i].acquireUnknown = true
		}
		return nil, err
	}
	for n, j := range fresh {
		results[j] = res[n]
	}
	return results, nil
}

// settleOutcome is one event's settlement in a batch.
type settleOutcome struct {
	res settlement.Result
	err error
}

// settleFresh settles the batch's new claims in one transaction when the
// settler can, else (or when that fails) one transaction each.
func (p *Pipeline) settleFresh(ctx context.Context, leaders []moneyItem, fresh []int) []settleOutcome {
	out := make([]settleOutcome, len(fresh))
	settled := make([]bool, len(fresh))
	if bs, ok := p.Settler.(BatchSettler); ok && len(fresh) > 1 {
		evs := make([]channels.Event, len(fresh))
		for n, j := range fresh {
			evs[n] = leaders[j].ev
		}
		res, err := bs.SettleBatch(ctx, evs)
		if err == nil && len(res) == len(fresh) {
			for n := range res {
				out[n].res = res[n]
			}
			return out
		}
		if err != nil {
			p.Logger.Debug("batch settlement failed; settling one by one", "events", len(fresh), "error", err.Error())
		}
		if errors.Is(err, settlement.ErrBatchIncomplete) && len(res) == len(fresh) {
			// Part of the batch committed: keep those results (a zero
			// Result is an event left unsettled).
			for n := range res {
				if !res[n].SettledAt.IsZero() {
					out[n].res, settled[n] = res[n], true
				}
			}
		}
	}
	for n, j := range fresh {
		if !settled[n] {
			out[n].res, out[n].err = p.Settler.Settle(ctx, leaders[j].ev)
		}
	}
	return out
}

func (p *Pipeline) conflict(ctx context.Context, msg kafka.Message, ev channels.Event, claimedFP string, claimedBy idempotent.Source) error {
	reason := fmt.Sprintf("key %s already claimed with fingerprint %s (by %s); this message has %s",
		ev.Key, claimedFP, claimedBy, ev.Fingerprint)
	if err := p.deadLetter(ctx, msg, channels.KindConflict, reason); err != nil {
		return err
	}
	p.Logger.Warn("conflicting event dead-lettered", "tenant", ev.TenantID, "key", string(ev.Key),
		"offset", msg.Offset, "claimed_by", claimedBy.String())
	p.count(ev, metrics.OutcomeConflict)
	return nil
}
