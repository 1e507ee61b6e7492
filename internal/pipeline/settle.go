package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

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
	done := make([]bool, len(fresh))
	if len(fresh) > 1 {
		evs := make([]channels.Event, len(fresh))
		sources := make([]settled.Source, len(fresh))
		for n, j := range fresh {
			evs[n], sources[n] = leaders[j].ev, leaders[j].origin
		}
		bctx, cancel := p.statementContext(ctx)
		res, err := p.Settler.SettleBatchFrom(bctx, evs, sources)
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
					out[n].res, done[n] = res[n], true
				}
			}
		}
	}
	for n, j := range fresh {
		if !done[n] {
			sctx, cancel := p.statementContext(ctx)
			out[n].res, out[n].err = p.Settler.SettleFrom(sctx, leaders[j].ev, leaders[j].origin)
			cancel()
		}
	}
	return out
}

// afterSettle records a settlement and dead-letters an over-refund.
func (p *Pipeline) afterSettle(ctx context.Context, msg kafka.Message, ev channels.Event, r settlement.Result) error {
	if r.FenceLost {
		p.Metrics.Settled(metrics.SettleFenceLost)
		// The winner may have settled OVER_REFUND and died before its dead
		// letter: look once, from the pool, so it is written.
		cur, err := p.Claims.Get(ctx, ev.TenantID, ev.Key)
		if err != nil {
			return failed(metrics.StageSettle, err)
		}
		if cur.Outcome == idempotent.OutcomeOverRefund && cur.DeadLetteredAt == nil {
			return p.deadLetterOverRefund(ctx, msg, ev)
		}
		return nil
	}
	p.Metrics.Settled(metrics.SettleOutcome(r.Outcome))
	if r.Outcome == idempotent.OutcomePosted {
		p.notifySettled(ev)
	}
	if !ev.ReceivedAt.IsZero() && !r.SettledAt.IsZero() {
		p.Metrics.ObserveSettleDuration(r.SettledAt.Sub(ev.ReceivedAt))
	}
	if r.Outcome == idempotent.OutcomeOverRefund {
		return p.deadLetterOverRefund(ctx, msg, ev)
	}
	return nil
}

// InFlightGrace is how long a duplicate waits for the settler of a claim
// that another message made moments ago before settling it itself: a
// claim younger than this is most likely being settled right now by the
// worker that made it (a concurrent channel retry on another partition),
// and two settlers racing for one claim only make each other wait. Past
// it, the claim's maker is presumed dead and the duplicate settles the
// claim through the fence. Either way nothing is committed until the claim
// is settled.
const InFlightGrace = 5 * time.Second

// finishExisting brings an existing claim to a durable outcome: an ACQUIRED
// claim (its first settler died, or is settling right now) is settled
// through the fence from its stored event; an OVER_REFUND claim whose dead
// letter was never written gets it now.
func (p *Pipeline) finishExisting(ctx context.Context, msg kafka.Message, ev channels.Event, rec idempotent.Record) error {
	if rec.Status == idempotent.StatusAcquired {
		src := idempotent.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
		if !rec.MadeBy(src) && time.Since(rec.CreatedAt) < InFlightGrace {
			return ErrClaimInFlight
		}
		sctx, cancel := p.statementContext(ctx)
		r, err := p.Settler.SettleStored(sctx, rec)
		cancel()
		if err != nil {
			p.recordFailure(ctx, ev, err)
			return failed(metrics.StageSettle, err)
		}
		return p.afterSettle(ctx, msg, ev, r)
	}
	if rec.Outcome == idempotent.OutcomeOverRefund && rec.DeadLetteredAt == nil {
		return p.deadLetterOverRefund(ctx, msg, ev)
	}
	return nil
}

// recordFailure keeps the settle error on the claim for operators. It is
// bookkeeping: its own failure is logged, never returned.
func (p *Pipeline) recordFailure(ctx context.Context, ev channels.Event, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.Claims.RecordFailure(ctx, ev.TenantID, ev.Key, cause); err != nil {
		p.Logger.Debug("could not record settle failure", "key", string(ev.Key), "error", err.Error())
	}
}

// notifySettled tells p.Settled of the settled events that ev's settlement,
// POSTED, wrote (settledRefs).
func (p *Pipeline) notifySettled(ev channels.Event) {
	if p.Settled == nil {
		return
	}
	p.Settled.Notify(settledRefs(ev))
}

// settledRefs are the settled events that ev's settlement, POSTED, wrote:
// ev's own and, for a payment of a channel with cancels, the event of a
// cancel whose reversal it may have posted (a ref without a row publishes
// nothing).
func settledRefs(ev channels.Event) []settledpub.Ref {
	ref := settledpub.Ref{TenantID: ev.TenantID, Channel: string(ev.Channel), TradeNo: ev.TradeNo, Key: string(ev.Key)}
	refs := []settledpub.Ref{ref}
	if ev.Type == idempotent.PaymentReceived && ev.Channel.HasCancel() {
		if k, err := channels.CancelKey(ev.Channel, ev.TradeNo); err == nil {
			ref.Key = string(k)
			refs = append(refs, ref)
		}
	}
	return refs
}
