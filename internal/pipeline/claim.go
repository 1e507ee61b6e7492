package pipeline

import (
	"context"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// claimAndSettle acquires the leaders' claims and settles those it made:
// results[j] is leaders[j]'s claim result, fresh the leaders whose claims
// it made, outcomes[n] fresh[n]'s settlement. An error means no claim
// result is known (nothing settled). A small batch goes through the
// merger when there is one; the claims still commit before any business
// transaction, and a merged transaction that fails hands each batch its
// own unsettled events, which it settles alone, as a batch not merged
// would.
func (p *Pipeline) claimAndSettle(ctx context.Context, leaders []moneyItem) (results []idempotent.Result, fresh []int, outcomes []settleOutcome, err error) {
	m := p.merger()
	if m == nil || len(leaders) >= mergeBelow {
		return p.claimAndSettleAlone(ctx, leaders, nil)
	}
	return p.claimAndSettleMerged(ctx, m, leaders)
}

// claimAndSettleAlone is claimAndSettle for one batch on its own: acquire,
// then settleFresh. claimed, when not nil, is called once the claims step
// is over (whatever its outcome) and before any settlement: a batch alone
// in a merger's round gives the round back there, so that no other
// partition waits while this one's settlement waits for a row lock, a lock
// timeout or the statement timeout.
func (p *Pipeline) claimAndSettleAlone(ctx context.Context, leaders []moneyItem, claimed func()) ([]idempotent.Result, []int, []settleOutcome, error) {
	results, err := p.acquire(ctx, leaders)
	if claimed != nil {
		claimed()
	}
	if err != nil {
		return nil, nil, nil, failed(metrics.StageAcquire, err)
	}
	fresh := markAcquired(results, leaders)
	if len(fresh) == 0 {
		return results, nil, nil, nil
	}
	if err := p.Fault.at(ctx, FaultAfterAcquire); err != nil {
		return nil, nil, nil, failed(metrics.StageSettle, err)
	}
	return results, fresh, p.settleFresh(ctx, leaders, fresh), nil
}

// markAcquired records, on each leader whose claim this batch made
// (results[j] Acquired), that its message made it, and returns those
// leaders.
func markAcquired(results []idempotent.Result, leaders []moneyItem) []int {
	var fresh []int
	for j, r := range results {
		if r.Kind == idempotent.Acquired {
			leaders[j].st.acquired = true
			fresh = append(fresh, j)
		}
	}
	return fresh
}

// acquire claims the leaders' keys, one per distinct key; results[j] is
// leaders[j]'s. Several keys are looked up first, with one statement (a
// batch of duplicates costs that one round trip and never encodes its
// events), and the rest claimed with one insert, which the unique index
// decides. A single key goes straight to the insert and its duplicate-key
// error: one round trip for a new event, where the lookup would add one;
// but a key an earlier attempt found claimed (a held message looked at
// again) is looked up: one round trip where the refused insert and its
// read would be two (lookupFirst).
func (p *Pipeline) acquire(ctx context.Context, leaders []moneyItem) ([]idempotent.Result, error) {
	look := lookupFirst(leaders)
	results, inserted, err := p.claimAll(ctx, leaders, look)
	if err != nil {
		// The insert may have committed without an answer.
		for _, j := range inserted {
			leaders[j].st.acquireUnknown = true
		}
		return nil, err
	}
	return results, nil
}

// lookupFirst is acquire's rule: the keys of leaders are looked up before
// they are inserted when there are several, or when an earlier attempt
// found the one key claimed.
func lookupFirst(leaders []moneyItem) bool {
	return len(leaders) > 1 || (len(leaders) == 1 && leaders[0].st.claimSeen)
}

// claimAll claims items, each of a distinct key: when lookup is set they
// are looked up first, with one statement, and every key not found is
// claimed with one insert (AcquireMany), which the unique index decides row
// by row; results[n] is items[n]'s. Each step is bounded by the statement
// timeout. On an error no result is known; inserted, the items the failed
// insert carried (none when the lookup failed), may have been claimed
// without an answer.
func (p *Pipeline) claimAll(ctx context.Context, items []moneyItem, lookup bool) (results []idempotent.Result, inserted []int, err error) {
	existing := map[idempotent.TenantKey]idempotent.Record{}
	if lookup {
		keys := make([]idempotent.TenantKey, len(items))
		for n, it := range items {
			keys[n] = it.key
		}
		lctx, cancel := p.statementContext(ctx)
		existing, err = p.Claims.LookupMany(lctx, keys)
		cancel()
		if err != nil {
			return nil, nil, err
		}
	}
	results = make([]idempotent.Result, len(items))
	var claims []idempotent.Claim
	var buf []byte
	for n, it := range items {
		c := idempotent.Claim{
			TenantID: it.ev.TenantID, Key: it.ev.Key, EventType: it.ev.Type,
			Fingerprint: it.ev.Fingerprint, Source: it.src, OccurredAt: it.ev.OccurredAt,
		}
		if rec, ok := existing[it.key]; ok {
			results[n] = idempotent.Compare(c, rec)
			continue
		}
		// The stored event, encoded without reflection into one buffer
		// for the batch (a slice stays valid when the buffer grows).
		start := len(buf)
		buf = settlement.AppendStoredEvent(buf, it.ev, it.origin)
		c.Event = buf[start:len(buf):len(buf)]
		inserted = append(inserted, n)
		claims = append(claims, c)
	}
	if len(claims) == 0 {
		return results, nil, nil
	}
	actx, cancel := p.statementContext(ctx)
	res, err := p.Claims.AcquireMany(actx, claims)
	cancel()
	if err != nil {
		return nil, inserted, err
	}
	for k, n := range inserted {
		results[n] = res[k]
	}
	return results, inserted, nil
}

// outcomeOfDuplicate is how a message that found its key claimed counts.
func outcomeOfDuplicate(st *MessageState, rec idempotent.Record, src idempotent.Source) metrics.Outcome {
	switch {
	case st.acquired, st.acquireUnknown && rec.MadeBy(src):
		return metrics.OutcomeAcquired
	case rec.MadeBy(src):
		return metrics.OutcomeRedelivered
	default:
		return metrics.OutcomeDuplicate
	}
}
