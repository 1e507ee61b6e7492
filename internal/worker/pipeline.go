package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Settler does the business work of claimed events; *settlement.Service is
// the implementation.
type Settler interface {
	Settle(ctx context.Context, ev channels.Event) (settlement.Result, error)
	SettleStored(ctx context.Context, rec idempotent.Record) (settlement.Result, error)
	ApplyRefundStatus(ctx context.Context, tenantID int64, channel channels.Channel, tradeNo, refundNo string, status channels.RefundStatus) error
}

// Decoder turns a Kafka value into a canonical event; *channels.Decoder is
// the implementation.
type Decoder interface {
	Decode(value []byte) (channels.Result, error)
}

// Pipeline handles one message at a time: decode, acquire the claim, settle,
// or dead-letter. It holds no per-partition state; MessageState carries what
// one message's retries must remember.
type Pipeline struct {
	Decoder      Decoder
	Claims       *idempotent.Store
	Settler      Settler
	DeadLetterer DeadLetterer
	Metrics      *metrics.Metrics
	Logger       *slog.Logger
	// Fault injects failures at boundaries, for tests; nil in production.
	Fault FaultFunc
}

// MessageState is what a message's earlier attempts learnt, kept across
// in-place retries of that one message.
type MessageState struct {
	// acquired: an earlier attempt made the claim, so this message is still
	// the one that counts as "acquired" when a retry finds the claim.
	acquired bool
	// done: the message reached its outcome and was counted (batches are
	// retried whole; done messages are skipped).
	done bool
	// acquireUnknown: an earlier attempt's acquire failed without an
	// answer (a lost connection, a refused read-back), so its insert may
	// have committed: a claim this very message made is then still its own
	// "acquired", not a redelivery.
	acquireUnknown bool
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

// stageError tags an error with the pipeline stage that failed, for
// paycb_processing_errors_total.
type stageError struct {
	stage metrics.Stage
	err   error
}

func (e *stageError) Error() string { return fmt.Sprintf("%s: %v", e.stage, e.err) }
func (e *stageError) Unwrap() error { return e.err }

func failed(stage metrics.Stage, err error) error { return &stageError{stage: stage, err: err} }

// StageOf returns the stage a Handle error failed in.
func StageOf(err error) metrics.Stage {
	var se *stageError
	if errors.As(err, &se) {
		return se.stage
	}
	return metrics.StageOther
}

// Handle takes msg to a durable outcome or returns an error. A nil error
// means the offset after msg may be committed: the event is claimed and
// settled (here, or by another settler through the fence), a duplicate, an
// ignored event, or dead-lettered. Any error means the outcome is not
// durable; retry the same message. Each message is counted in
// paycb_events_total once, when Handle returns nil.
func (p *Pipeline) Handle(ctx context.Context, msg kafka.Message, st *MessageState) error {
	res, err := p.Decoder.Decode(msg.Value)
	if err != nil {
		return p.deadLetterUndecodable(ctx, msg, res, err)
	}
	ev := res.Event
	if res.Ignored {
		return p.ignore(ctx, res)
	}

	body, err := json.Marshal(ev)
	if err != nil {
		return failed(metrics.StageAcquire, fmt.Errorf("encode event %s: %w", ev.Key, err))
	}
	src := idempotent.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
	ar, err := p.Claims.Acquire(ctx, idempotent.Claim{
		TenantID:    ev.TenantID,
		Key:         ev.Key,
		EventType:   ev.Type,
		Fingerprint: ev.Fingerprint,
		Event:       body,
		Source:      src,
	})
	if err != nil {
		st.acquireUnknown = true
		return failed(metrics.StageAcquire, err)
	}

	switch ar.Kind {
	case idempotent.Acquired:
		st.acquired = true
		if err := p.Fault.at(ctx, FaultAfterAcquire); err != nil {
			return failed(metrics.StageSettle, err)
		}
		r, err := p.Settler.Settle(ctx, ev)
		if err != nil {
			p.recordFailure(ctx, ev, err)
			return failed(metrics.StageSettle, err)
		}
		if err := p.afterSettle(ctx, msg, ev, r); err != nil {
			return err
		}
		if err := p.Fault.at(ctx, FaultAfterSettle); err != nil {
			return failed(metrics.StageCommit, err)
		}
		p.count(ev, metrics.OutcomeAcquired)
		return nil

	case idempotent.Duplicate:
		outcome := outcomeOfDuplicate(st, ar.Existing, src)
		if err := p.finishExisting(ctx, msg, ev, ar.Existing); err != nil {
			return err
		}
		p.count(ev, outcome)
		return nil

	case idempotent.Conflict:
		return p.conflict(ctx, msg, ev, ar.Existing.Fingerprint, ar.Existing.Source)
	}
	return failed(metrics.StageAcquire, fmt.Errorf("acquire %s: unexpected result %v", ev.Key, ar.Kind))
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

// errClaimInFlight means the claim is being settled by its maker: retry
// the message shortly. It is routine, not a processing error.
var errClaimInFlight = errors.New("claim is being settled by the worker that made it")

// finishExisting brings an existing claim to a durable outcome: an ACQUIRED
// claim (its first settler died, or is settling right now) is settled
// through the fence from its stored event; an OVER_REFUND claim whose dead
// letter was never written gets it now.
func (p *Pipeline) finishExisting(ctx context.Context, msg kafka.Message, ev channels.Event, rec idempotent.Record) error {
	if rec.Status == idempotent.StatusAcquired {
		src := idempotent.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
		if !rec.MadeBy(src) && time.Since(rec.CreatedAt) < InFlightGrace {
			return errClaimInFlight
		}
		r, err := p.Settler.SettleStored(ctx, rec)
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
	if !ev.ReceivedAt.IsZero() && !r.SettledAt.IsZero() {
		p.Metrics.ObserveSettleDuration(r.SettledAt.Sub(ev.ReceivedAt))
	}
	if r.Outcome == idempotent.OutcomeOverRefund {
		return p.deadLetterOverRefund(ctx, msg, ev)
	}
	return nil
}

func (p *Pipeline) deadLetterOverRefund(ctx context.Context, msg kafka.Message, ev channels.Event) error {
	reason := fmt.Sprintf("refunds of trade %s:%s would exceed the order total %d fen; nothing was posted",
		ev.Channel, ev.TradeNo, ev.OrderTotal)
	if err := p.deadLetter(ctx, msg, channels.KindOverRefund, reason); err != nil {
		return err
	}
	if err := p.Claims.MarkDeadLettered(ctx, ev.TenantID, ev.Key); err != nil {
		return failed(metrics.StageDeadLetter, err)
	}
	p.Logger.Error("over-refund dead-lettered", "tenant", ev.TenantID, "key", string(ev.Key),
		"cumulative_refunded", ev.CumulativeRefunded, "refund_amount", ev.RefundAmount, "order_total", ev.OrderTotal)
	return nil
}

// deadLetterUndecodable dead-letters a message the decoder refused; res
// carries its channel when the envelope told it (for the metric label).
func (p *Pipeline) deadLetterUndecodable(ctx context.Context, msg kafka.Message, res channels.Result, decodeErr error) error {
	kind, ok := channels.KindOf(decodeErr)
	if !ok {
		kind = channels.KindMalformed
	}
	if err := p.deadLetter(ctx, msg, kind, decodeErr.Error()); err != nil {
		return err
	}
	p.Logger.Warn("undecodable message dead-lettered", "kind", string(kind), "error", decodeErr.Error(),
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
	p.Metrics.Event(string(res.Event.Channel), metrics.EventTypeUnknown, metrics.OutcomeDeadLettered)
	return nil
}

func (p *Pipeline) deadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error {
	if err := p.Fault.at(ctx, FaultBeforeDeadLetter); err != nil {
		return failed(metrics.StageDeadLetter, err)
	}
	if err := p.DeadLetterer.DeadLetter(ctx, msg, kind, reason); err != nil {
		return failed(metrics.StageDeadLetter, err)
	}
	p.Metrics.DeadLetter(metrics.DeadLetterKind(kind))
	return nil
}

func (p *Pipeline) ignore(ctx context.Context, res channels.Result) error {
	ev := res.Event
	if res.RefundStatus == channels.RefundAbnormal || res.RefundStatus == channels.RefundClosed {
		if err := p.Settler.ApplyRefundStatus(ctx, ev.TenantID, ev.Channel, ev.TradeNo, ev.RefundNo, res.RefundStatus); err != nil {
			return failed(metrics.StageRefundUpdate, err)
		}
	}
	p.Logger.Debug("ignored event", "tenant", ev.TenantID, "channel", string(ev.Channel), "reason", res.IgnoreReason)
	p.Metrics.Event(string(ev.Channel), string(ev.Type), metrics.OutcomeIgnored)
	return nil
}

func (p *Pipeline) count(ev channels.Event, outcome metrics.Outcome) {
	p.Metrics.Event(string(ev.Channel), string(ev.Type), outcome)
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
