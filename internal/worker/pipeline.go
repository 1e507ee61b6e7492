package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Settler does the business work of claimed events; *settlement.Service is
// the implementation.
type Settler interface {
	// Settle settles one claimed event in a transaction of its own.
	Settle(ctx context.Context, ev channels.Event) (settlement.Result, error)
	// SettleBatch settles many claimed events together; an error wrapping
	// settlement.ErrBatchIncomplete comes with the results of those it
	// settled (the zero Result for the others); any other error settled
	// none of them.
	SettleBatch(ctx context.Context, evs []channels.Event) ([]settlement.Result, error)
	// SettleMerged settles the events of several batches in one
	// transaction, as SettleBatch but never waiting or trying again: any
	// error settled none of them, except one wrapping
	// settlement.ErrBatchIncomplete, which comes with the results of those
	// it settled.
	SettleMerged(ctx context.Context, evs []channels.Event) ([]settlement.Result, error)
	SettleStored(ctx context.Context, rec idempotent.Record) (settlement.Result, error)
	ApplyRefundStatus(ctx context.Context, tenantID int64, channel channels.Channel, tradeNo, refundNo string, status channels.RefundStatus) error
}

// Decoder turns a Kafka message into a canonical event; *channels.Decoder
// is the implementation. signature is the message's
// x-paycb-statement-signature header ("" when it has none), which a
// statement event must carry, valid, to be decoded (see
// channels.Decoder.DecodeMessage).
type Decoder interface {
	DecodeMessage(value []byte, signature string) (channels.Result, error)
}

// DeadLetterer writes messages that can never succeed to the dead-letter
// topic, each with the contract's headers (see deadletters.Sender);
// *deadletters.KafkaWriter is the implementation.
type DeadLetterer = deadletters.Sender

// DeadLetterRecords is the record of the dead letters written
// (ss_dead_letter) that makes each written once (see deadletters.Once);
// *deadletters.Store is the implementation.
type DeadLetterRecords = deadletters.Records

// statementSignature is msg's x-paycb-statement-signature header, "" when
// it has none.
func statementSignature(msg kafka.Message) string {
	for _, h := range msg.Headers {
		if h.Key == statementauth.HeaderSignature {
			return string(h.Value)
		}
	}
	return ""
}

// Pipeline takes a partition's messages, a batch at a time (a single
// message is a batch of one), to durable outcomes: decode, acquire the
// claims, settle, or dead-letter. It holds no per-partition state;
// MessageState carries what each message's retries must remember (and the
// pipeline, which dead letters were written but not yet recorded).
type Pipeline struct {
	Decoder      Decoder
	Claims       *idempotent.Store
	Settler      Settler
	DeadLetterer DeadLetterer

	// Merchants, when set, binds merchants to tenants: a callback whose
	// merchant (channels.Result.MerchantID) the binding does not give to
	// its envelope's tenant, or that names none, is dead-lettered
	// tenant_mismatch before anything is claimed (see checkMerchant).
	// Statement events are not checked. Nil checks nothing. The file's
	// current contents are read for each message, so an edit picked up by
	// its Watch applies to the next message.
	Merchants *merchantbinding.File
	// MerchantlessHold is how long, under a binding, a Shouqianba refund
	// that names no merchant and whose trade has no payment posted yet is
	// held for that payment before it is dead-lettered (see
	// checkMerchantless); zero means DefaultMerchantlessHold.
	MerchantlessHold time.Duration

	// DeadLetterRecords, when set, makes each dead letter written once:
	// one already recorded for the same message and kind (by an earlier
	// run, a replay, another group) is not written again, and each one
	// written is recorded. Nil writes every dead letter the pipeline
	// decides on.
	DeadLetterRecords DeadLetterRecords

	// Orders, when set, reads a trade's order row (settlement.GetOrder): a
	// conflict whose first claim's stored event purge has cleared names the
	// differing field from it. Nil: such a conflict says only that the
	// stored event was purged.
	Orders func(ctx context.Context, tenantID int64, ch channels.Channel, tradeNo string) (settlement.Order, error)

	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// StatementTimeout bounds each database step of a batch (zero: no
	// bound beyond the caller's context); see statementContext.
	StatementTimeout time.Duration
	// Fault injects failures at boundaries, for tests; nil in production.
	Fault FaultFunc
	// MergeMax, 2 or more, merges the small batches (fewer than 8 distinct
	// keys) that concurrently active partitions have ready into one lookup,
	// one claims insert and one business transaction of up to MergeMax
	// events (see merger); below 2 each batch goes alone.
	MergeMax int
	// MergeWait is the least time from one merged round's start to the
	// next's: at steady load a round gathers what comes meanwhile, and a
	// worker idle that long starts one at once (see merger); zero starts
	// each round as soon as the one before ends.
	MergeWait time.Duration

	mergeOnce sync.Once
	merge     *merger

	once deadletters.Once
}

// MessageState is what a message's earlier attempts learnt, kept across
// in-place retries of that one message.
type MessageState struct {
	// acquired: an earlier attempt made the claim, so this message is still
	// the one that counts as "acquired" when a retry finds the claim.
	acquired bool
	// done: the message reached its outcome and was counted (a batch is
	// retried whole; its done messages are skipped).
	done bool
	// acquireUnknown: an earlier attempt's acquire failed without an
	// answer (a lost connection, a refused read-back), so its insert may
	// have committed: a claim this very message made is then still its own
	// "acquired", not a redelivery.
	acquireUnknown bool
	// keyCounted: the WeChat key that decrypted the message was counted
	// (paycb_wechat_decrypt_key_total), so a retry does not count it again.
	keyCounted bool
	// claimSeen: an earlier attempt found the message's key claimed by
	// another message (a held duplicate, or one whose finishing failed):
	// claims are never deleted, so a retry looks the claim up rather than
	// trying an insert the unique index would refuse.
	claimSeen bool
	// merchantHeldAt: when the message, a refund that names no merchant,
	// was first held for its trade's payment (checkMerchantless).
	merchantHeldAt time.Time
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

// Handle takes every message of msgs, a partition's messages in offset
// order, to a durable outcome, or returns an error; states (one per
// message, kept by the caller across retries of the same messages)
// remember which are done, so a retry neither dead-letters nor counts a
// message twice. A nil error means the offset after the last message may
// be committed: each event is claimed and settled (here, or by another
// settler through the fence), a duplicate, ignored, or dead-lettered. Any
// error means some outcome is not durable: retry the messages not done.
// An error wrapping only errClaimInFlight means the messages not done wait
// for a claim another worker is settling right now, or (a Shouqianba
// refund that names no merchant) for their trade's payment (see
// checkMerchantless). Each message is
// counted in paycb_events_total once, when it is done.
//
// The outcome of every message is decided by the claim of its key, as
// for a message alone (the table in docs/design.md): the money events of a
// run of messages are acquired together (the distinct keys looked up at
// once, the missing ones claimed by one insert) and the new claims settled
// together. A refund status update (WeChat REFUND.CLOSED, ABNORMAL) that
// follows a money event of the same trade waits for that event's outcome,
// so status updates and settlements apply in offset order. A run of money
// events is bounded in bytes by the server's largest statement
// (idempotent.Store.MaxStatementBytes); a longer one is split, in order.
func (p *Pipeline) Handle(ctx context.Context, msgs []kafka.Message, states []MessageState) error {
	var run []moneyItem
	runBytes, maxBytes := 0, 0
	var errs firstErrors // a run's errClaimInFlight does not stop the batch
	settleRun := func() error {
		if len(run) == 0 {
			return nil
		}
		if err := p.handleMoney(ctx, msgs, states, run); err != nil {
			errs.add(err)
		}
		run, runBytes = run[:0], 0
		return errs.failed
	}
	for i, msg := range msgs {
		if states[i].done {
			continue
		}
		res, err := p.Decoder.DecodeMessage(msg.Value, statementSignature(msg))
		if k := res.APIv3Key; k.Position > 0 && !states[i].keyCounted {
			p.Metrics.WeChatDecrypted(res.Event.TenantID, k.Position, k.Keys)
			states[i].keyCounted = true
		}
		if err != nil {
			if err := p.deadLetterUndecodable(ctx, msg, res, err); err != nil {
				return err
			}
			states[i].done = true
			continue
		}
		reason, err := p.merchantCheck(ctx, res, &states[i])
		if err != nil {
			if !errors.Is(err, errClaimInFlight) {
				return failed(metrics.StageAcquire, err)
			}
			errs.add(err) // held for its trade's payment
			continue
		}
		res.Event.BoundMerchant = p.boundMerchant(res)
		if reason != "" {
			// Nothing of it is claimed, as for an undecodable message.
			if err := p.deadLetterTenantMismatch(ctx, msg, res, reason); err != nil {
				return err
			}
			states[i].done = true
			continue
		}
		if res.Ignored {
			if sameTrade(run, res.Event) {
				if err := settleRun(); err != nil {
					return err
				}
			}
			if err := p.ignore(ctx, res); err != nil {
				return err
			}
			states[i].done = true
			continue
		}
		if maxBytes == 0 {
			if maxBytes, err = p.Claims.MaxStatementBytes(ctx); err != nil {
				return failed(metrics.StageAcquire, err)
			}
		}
		// A run is bounded in bytes too, so that none of its statements
		// exceeds what the server accepts: an over-large batch is settled
		// as several runs, in order.
		size := statementBytes(res.Event)
		if len(run) > 0 && runBytes+size > maxBytes {
			if err := settleRun(); err != nil {
				return err
			}
		}
		runBytes += size
		run = append(run, moneyItem{
			i: i, ev: res.Event,
			src: idempotent.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset},
			key: idempotent.TenantKey{TenantID: res.Event.TenantID, Key: res.Event.Key},
		})
	}
	if err := settleRun(); err != nil {
		return err
	}
	return errs.err()
}

// statementBytes bounds what one money event adds to the largest
// statement of its run, the claims' insert: its stored event, whose
// strings JSON may escape to six bytes each, every byte of that possibly
// escaped again in SQL, and the row's other columns and the event's field
// names. The settlement's statements add less per event.
func statementBytes(ev channels.Event) int {
	strs := len(ev.TradeNo) + len(ev.MerchantOrderNo) + len(ev.RefundNo) + len(ev.RawStatus) + len(ev.Key) + len(ev.Fingerprint)
	return 12*strs + 2048
}

// moneyItem is one decoded money event of a batch.
type moneyItem struct {
	i   int // index in the batch
	ev  channels.Event
	src idempotent.Source
	key idempotent.TenantKey
}

// sameTrade reports whether a money event of run belongs to ev's trade.
func sameTrade(run []moneyItem, ev channels.Event) bool {
	for _, it := range run {
		if it.ev.TenantID == ev.TenantID && it.ev.Channel == ev.Channel && it.ev.TradeNo == ev.TradeNo {
			return true
		}
	}
	return false
}

// handleMoney takes the money events of money (in offset order) to their
// outcomes. It returns the first error that left a message not done,
// preferring any other error to errClaimInFlight.
//
// Each distinct key is acquired once, by its first message (its leader).
// Every message of the key is then judged against the key's claim, exactly
// as a message alone would be: a fingerprint that differs from the claim's
// is a conflict; the others share the claim's outcome. A claim this batch
// made is settled with the batch's others; a claim found existing is
// finished (an ACQUIRED one settled through the fence, a pending
// over-refund dead letter written) by the first message whose fingerprint
// matches it, whichever position that message has.
func (p *Pipeline) handleMoney(ctx context.Context, msgs []kafka.Message, states []MessageState, money []moneyItem) error {
	leader := map[idempotent.TenantKey]int{} // key -> index in leaders
	var leaders []moneyItem
	for _, it := range money {
		if _, ok := leader[it.key]; ok {
			continue
		}
		leader[it.key] = len(leaders)
		leaders = append(leaders, it)
	}
	// The claims, and the settlement of those this batch made: together,
	// possibly with other partitions' batches (claimAndSettle).
	results, fresh, outcomes, err := p.claimAndSettle(ctx, leaders, states)
	if err != nil {
		return err
	}

	var errs firstErrors
	settledOK := make([]bool, len(leaders)) // the claim this batch made is settled
	if len(fresh) > 0 {
		for n, j := range fresh {
			it := leaders[j]
			o := outcomes[n]
			if o.err != nil {
				p.recordFailure(ctx, it.ev, o.err)
				errs.add(failed(metrics.StageSettle, o.err))
				continue
			}
			if err := p.afterSettle(ctx, msgs[it.i], it.ev, o.res); err != nil {
				errs.add(err)
				continue
			}
			settledOK[j] = true
		}
		if err := p.Fault.at(ctx, FaultAfterSettle); err != nil {
			return failed(metrics.StageCommit, err)
		}
	}

	// Every money message, in order, to its outcome.
	// Whether an existing claim was finished, once per key per pass: a
	// key's later messages share the first matching message's result.
	finished, tried := make([]bool, len(leaders)), make([]bool, len(leaders))
	for _, it := range money {
		j := leader[it.key]
		r := results[j]
		st := &states[it.i]
		msg := msgs[it.i]
		claim := r.Existing
		if r.Kind != idempotent.Acquired {
			st.claimSeen = true
		}
		var first *channels.Event // the claim's event, when this batch made the claim
		if r.Kind == idempotent.Acquired {
			claim = idempotent.Record{Fingerprint: leaders[j].ev.Fingerprint, Source: leaders[j].src}
			first = &leaders[j].ev
		}
		if it.ev.Fingerprint != claim.Fingerprint {
			if err := p.conflict(ctx, msg, it.ev, claim, first); err != nil {
				errs.add(err)
				continue
			}
			st.done = true
			continue
		}
		switch {
		case r.Kind == idempotent.Acquired:
			if !settledOK[j] {
				continue // its error is in errs; retried
			}
			if leaders[j].i == it.i {
				p.count(it.ev, metrics.OutcomeAcquired)
			} else {
				p.count(it.ev, metrics.OutcomeDuplicate) // a channel retry of the event this batch claimed
			}
		case !tried[j]:
			// The first message that matches the existing claim finishes it
			// for the key; the key's later messages share its outcome.
			tried[j] = true
			if err := p.finishExisting(ctx, msg, it.ev, claim); err != nil {
				errs.add(err)
				continue
			}
			finished[j] = true
			p.count(it.ev, outcomeOfDuplicate(st, claim, it.src))
		case !finished[j]:
			continue // its error is in errs; retried
		default:
			p.count(it.ev, outcomeOfDuplicate(st, claim, it.src))
		}
		st.done = true
	}
	return errs.err()
}

// firstErrors keeps the first error, and the first errClaimInFlight apart:
// a message that waits for another worker's settlement must not hide one
// that failed.
type firstErrors struct{ failed, inFlight error }

func (e *firstErrors) add(err error) {
	switch {
	case errors.Is(err, errClaimInFlight):
		if e.inFlight == nil {
			e.inFlight = err
		}
	case e.failed == nil:
		e.failed = err
	}
}

func (e *firstErrors) err() error {
	if e.failed != nil {
		return e.failed
	}
	return e.inFlight
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
	if err := p.deadLetter(ctx, msg, channels.KindOverRefund, reason, ev); err != nil {
		return err
	}
	if err := p.Claims.MarkDeadLettered(ctx, ev.TenantID, ev.Key); err != nil {
		return failed(metrics.StageDeadLetter, err)
	}
	p.Logger.Error("over-refund dead-lettered", "tenant", ev.TenantID, "key", string(ev.Key),
		"cumulative_refunded", ev.CumulativeRefunded, "refund_amount", ev.RefundAmount, "order_total", ev.OrderTotal)
	return nil
}

// checkMerchant returns why res's merchant is not bound to its envelope's
// tenant, or "" when it is (or when nothing is checked: no binding, or a
// statement event, whose tenant was bound when its statement was
// imported).
func (p *Pipeline) checkMerchant(res channels.Result) string {
	if p.Merchants == nil || res.FromStatement {
		return ""
	}
	ev := res.Event
	if res.MerchantID == "" {
		return fmt.Sprintf("the %s callback of tenant %d names no merchant (%s); %s binds merchants to tenants, so it is not posted",
			ev.Channel, ev.TenantID, merchantField(ev.Channel), p.Merchants.Path())
	}
	owner, ok := p.Merchants.Current().TenantOf(ev.Channel, res.MerchantID)
	switch {
	case !ok:
		return fmt.Sprintf("%s merchant %s is not bound to tenant %d: %s binds it to no tenant",
			ev.Channel, res.MerchantID, ev.TenantID, p.Merchants.Path())
	case owner != ev.TenantID:
		return fmt.Sprintf("%s merchant %s is not bound to tenant %d: %s binds it to tenant %d",
			ev.Channel, res.MerchantID, ev.TenantID, p.Merchants.Path(), owner)
	}
	return ""
}

// merchantField names the field a channel's callback names its merchant
// by (channels.Spec.MerchantField).
func merchantField(ch channels.Channel) string {
	spec, _ := channels.Lookup(ch) // a decoded callback's channel is registered
	return spec.MerchantField
}

// deadLetterTenantMismatch dead-letters a decoded callback whose merchant
// is not its tenant's; nothing was claimed.
func (p *Pipeline) deadLetterTenantMismatch(ctx context.Context, msg kafka.Message, res channels.Result, reason string) error {
	if err := p.deadLetter(ctx, msg, channels.KindTenantMismatch, reason, res.Event); err != nil {
		return err
	}
	ev := res.Event
	p.Logger.Error("callback of a merchant not bound to its tenant dead-lettered", "kind", string(channels.KindTenantMismatch),
		"tenant", ev.TenantID, "channel", string(ev.Channel), "merchant", res.MerchantID, "trade_no", ev.TradeNo,
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
	p.Metrics.Event(string(ev.Channel), string(ev.Type), metrics.OutcomeDeadLettered)
	return nil
}

// deadLetterUndecodable dead-letters a message the decoder refused; res
// carries its channel when the envelope told it (for the metric label).
func (p *Pipeline) deadLetterUndecodable(ctx context.Context, msg kafka.Message, res channels.Result, decodeErr error) error {
	kind, ok := channels.KindOf(decodeErr)
	if !ok {
		kind = channels.KindMalformed
	}
	if err := p.deadLetter(ctx, msg, kind, decodeErr.Error(), res.Event); err != nil {
		return err
	}
	p.Logger.Warn("undecodable message dead-lettered", "kind", string(kind), "error", decodeErr.Error(),
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
	p.Metrics.Event(string(res.Event.Channel), metrics.EventTypeUnknown, metrics.OutcomeDeadLettered)
	return nil
}

// deadLetter writes msg's dead letter of kind, once (see
// DeadLetterRecords); ev is its event as far as it decoded, for the record.
func (p *Pipeline) deadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string, ev channels.Event) error {
	if err := p.Fault.at(ctx, FaultBeforeDeadLetter); err != nil {
		return failed(metrics.StageDeadLetter, err)
	}
	d := deadletters.Letter{Msg: msg, Kind: kind, Reason: reason, Event: ev}
	if err := p.once.Write(ctx, p.DeadLetterer, p.DeadLetterRecords, p.Metrics, p.Logger, d); err != nil {
		return failed(metrics.StageDeadLetter, err)
	}
	return nil
}

func (p *Pipeline) ignore(ctx context.Context, res channels.Result) error {
	ev := res.Event
	if res.RefundStatus == channels.RefundAbnormal || res.RefundStatus == channels.RefundClosed {
		sctx, cancel := p.statementContext(ctx)
		err := p.Settler.ApplyRefundStatus(sctx, ev.TenantID, ev.Channel, ev.TradeNo, ev.RefundNo, res.RefundStatus)
		cancel()
		if err != nil {
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
