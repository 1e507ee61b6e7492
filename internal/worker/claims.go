package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// acquire claims the leaders' keys, one per distinct key; results[j] is
// leaders[j]'s. Several keys are looked up first, with one statement (a
// batch of duplicates costs that one round trip and never encodes its
// events), and the rest claimed with one insert, which the unique index
// decides. A single key goes straight to the insert and its duplicate-key
// error: one round trip for a new event, where the lookup would add one;
// but a key an earlier attempt found claimed (a held message looked at
// again) is looked up: one round trip where the refused insert and its
// read would be two.
func (p *Pipeline) acquire(ctx context.Context, leaders []moneyItem, states []MessageState) ([]idempotent.Result, error) {
	existing := map[idempotent.TenantKey]idempotent.Record{}
	if len(leaders) > 1 || (len(leaders) == 1 && states[leaders[0].i].claimSeen) {
		keys := make([]idempotent.TenantKey, len(leaders))
		for j, it := range leaders {
			keys[j] = it.key
		}
		lctx, cancel := p.statementContext(ctx)
		var err error
		existing, err = p.Claims.LookupMany(lctx, keys)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	results := make([]idempotent.Result, len(leaders))
	var fresh []int // indexes into leaders
	var claims []idempotent.Claim
	var buf []byte
	for j, it := range leaders {
		c := idempotent.Claim{
			TenantID: it.ev.TenantID, Key: it.ev.Key, EventType: it.ev.Type,
			Fingerprint: it.ev.Fingerprint, Source: it.src, OccurredAt: it.ev.OccurredAt,
		}
		if rec, ok := existing[it.key]; ok {
			results[j] = idempotent.Compare(c, rec)
			continue
		}
		// The stored event, encoded without reflection into one buffer
		// for the batch (a slice stays valid when the buffer grows).
		start := len(buf)
		buf = it.ev.AppendJSON(buf)
		c.Event = buf[start:len(buf):len(buf)]
		fresh = append(fresh, j)
		claims = append(claims, c)
	}
	if len(claims) == 0 {
		return results, nil
	}
	actx, cancel := p.statementContext(ctx)
	res, err := p.Claims.AcquireMany(actx, claims)
	cancel()
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

// settleFresh settles the batch's new claims in one transaction, and
// those it did not settle (it failed, or settled part) one transaction
// each, so one bad event never blocks or rolls back the others.
func (p *Pipeline) settleFresh(ctx context.Context, leaders []moneyItem, fresh []int) []settleOutcome {
	out := make([]settleOutcome, len(fresh))
	settled := make([]bool, len(fresh))
	if len(fresh) > 1 {
		evs := make([]channels.Event, len(fresh))
		for n, j := range fresh {
			evs[n] = leaders[j].ev
		}
		bctx, cancel := p.statementContext(ctx)
		res, err := p.Settler.SettleBatch(bctx, evs)
		cancel()
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
			sctx, cancel := p.statementContext(ctx)
			out[n].res, out[n].err = p.Settler.Settle(sctx, leaders[j].ev)
			cancel()
		}
	}
	return out
}

// statementContext bounds one database step of a batch (a lookup, the
// claims' insert, one settlement transaction with its COMMIT) by
// StatementTimeout, when set. A step cut short is an ordinary failure:
// the messages not done are retried, and what the step may have committed
// without an answer is found by the retry's claim lookup, never taken for
// a duplicate of another message.
func (p *Pipeline) statementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.StatementTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.StatementTimeout)
}

func (p *Pipeline) conflict(ctx context.Context, msg kafka.Message, ev channels.Event, claimedFP string, claimedBy idempotent.Source) error {
	reason := fmt.Sprintf("key %s already claimed with fingerprint %s (by %s); this message has %s",
		ev.Key, claimedFP, claimedBy, ev.Fingerprint)
	if err := p.deadLetter(ctx, msg, channels.KindConflict, reason, ev); err != nil {
		return err
	}
	p.Logger.Warn("conflicting event dead-lettered", "tenant", ev.TenantID, "key", string(ev.Key),
		"offset", msg.Offset, "claimed_by", claimedBy.String())
	p.count(ev, metrics.OutcomeConflict)
	return nil
}
