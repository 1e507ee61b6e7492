package pipeline

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
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Settler does the business work of claimed events; *settlement.Service is
// the implementation.
type Settler interface {
	// SettleFrom settles one claimed event in a transaction of its own;
	// src is what produced it, its settled event's source.
	SettleFrom(ctx context.Context, ev channels.Event, src settled.Source) (settlement.Result, error)
	// SettleBatchFrom settles many claimed events together, sources[i]
	// being what produced evs[i]; an error wrapping
	// settlement.ErrBatchIncomplete comes with the results of those it
	// settled (the zero Result for the others); any other error settled
	// none of them.
	SettleBatchFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]settlement.Result, error)
	// SettleMergedFrom settles the events of several batches in one
	// transaction, as SettleBatchFrom but never waiting or trying again:
	// any error settled none of them, except one wrapping
	// settlement.ErrBatchIncomplete, which comes with the results of those
	// it settled.
	SettleMergedFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]settlement.Result, error)
	SettleStored(ctx context.Context, rec idempotent.Record) (settlement.Result, error)
	ApplyRefundStatus(ctx context.Context, tenantID int64, channel channels.Channel, tradeNo, refundNo string, status channels.RefundStatus) error
}

// SettledNotifier is told of the settled events a committed settlement
// wrote, to publish them; *settledpub.Publisher is the implementation. Notify
// never blocks and never fails: what it does not publish, the outbox
// sweeper does.
type SettledNotifier interface {
	Notify(refs []settledpub.Ref)
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

// Pipeline takes a partition's messages, a batch at a time (a single
// message is a batch of one), to durable outcomes: decode, acquire the
// claims, settle, or dead-letter. It holds no per-partition state;
// MessageState carries what each message's retries must remember (and the
// pipeline, which dead letters were written but not yet recorded).
type Pipeline struct {
	Decoder      Decoder
	Claims       ClaimStore
	Settler      Settler
	DeadLetterer DeadLetterer

	// Registrar records registration messages; nil: the Settler, when it
	// implements Registrar (as *settlement.Service does), else every
	// registration is dead-lettered unsupported.
	Registrar Registrar

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

	// Settled, when set, hears of the settled events of each settlement
	// right after its commit (see notifySettled), to publish them at once;
	// it must never block. Nil: the outbox sweeper publishes them.
	Settled SettledNotifier

	// QueryClosed, when set, closes the registration a closed query answer
	// answers (see QueryCloser); nil: such an answer is only ignored.
	QueryClosed QueryCloser

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
	// more are the states of the further events of a message that proves
	// several (a query answer: channels.Result.More), each claimed on its
	// own key and judged as a message of that one event would be; the
	// fields above are then the first event's.
	more []MessageState
}

// Done reports whether the message reached a durable outcome (each of its
// events, for a message that proves several): the offset after it may be
// committed once every message before it is done too.
func (st *MessageState) Done() bool {
	if !st.done {
		return false
	}
	for i := range st.more {
		if !st.more[i].done {
			return false
		}
	}
	return true
}

// finish marks the message done whole: dead-lettered or ignored, none of
// its events is claimed.
func (st *MessageState) finish() {
	st.done = true
	for i := range st.more {
		st.more[i].done = true
	}
}

// eventState is the state of the message's event k of n (0 is the first,
// channels.Result.Event; the others are Result.More), the same n on every
// attempt: decoding is deterministic.
func (st *MessageState) eventState(k, n int) *MessageState {
	if k == 0 {
		return st
	}
	if len(st.more) != n-1 {
		st.more = make([]MessageState, n-1)
	}
	return &st.more[k-1]
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
// settler through the fence), a duplicate, ignored, or dead-lettered, and
// each registration recorded or dead-lettered (register). Any
// error means some outcome is not durable: retry the messages not done.
// An error wrapping only ErrClaimInFlight means the messages not done wait
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
	var errs firstErrors // a run's ErrClaimInFlight does not stop the batch
	settleRun := func() error {
		if len(run) == 0 {
			return nil
		}
		if err := p.handleMoney(ctx, msgs, run); err != nil {
			errs.add(err)
		}
		run, runBytes = run[:0], 0
		return errs.failed
	}
	for i := range states[:len(msgs)] {
		msg, ms := msgs[i], &states[i]
		if ms.Done() {
			continue
		}
		res, err := p.decode(msg, ms)
		if err != nil {
			if err := p.deadLetterUndecodable(ctx, msg, res, err); err != nil {
				return err
			}
			ms.finish()
			continue
		}
		if res.Registration != nil {
			// A refund registration follows the money events of its trade
			// before it (it needs the payment posted); a payment's may be
			// recorded before or after its payment settles.
			if sameRefundTrade(run, res.Event, res.Registration) {
				if err := settleRun(); err != nil {
					return err
				}
			}
			if err := p.register(ctx, msg, res); err != nil {
				return err
			}
			ms.finish()
			continue
		}
		reason, err := p.merchantCheck(ctx, res, ms)
		if err != nil {
			if !errors.Is(err, ErrClaimInFlight) {
				return failed(metrics.StageAcquire, err)
			}
			errs.add(err) // held for its trade's payment
			continue
		}
		bound := p.boundMerchant(res)
		res.Event.BoundMerchant = bound
		if reason != "" {
			// Nothing of it is claimed, as for an undecodable message.
			if err := p.deadLetterTenantMismatch(ctx, msg, res, reason); err != nil {
				return err
			}
			ms.finish()
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
			ms.finish()
			continue
		}
		if maxBytes == 0 {
			if maxBytes, err = p.Claims.MaxStatementBytes(ctx); err != nil {
				return failed(metrics.StageAcquire, err)
			}
		}
		// Each event the message proves (one, but for a query answer that
		// proves several) is claimed on its own key, as a message of that
		// event alone would be; the message is done when all are.
		evs := append([]channels.Event{res.Event}, res.More...)
		origin := settlement.SourceOf(res)
		for k, ev := range evs {
			st := ms.eventState(k, len(evs))
			if st.done {
				continue
			}
			ev.BoundMerchant = bound
			// A run is bounded in bytes too, so that none of its statements
			// exceeds what the server accepts: an over-large batch is
			// settled as several runs, in order.
			size := statementBytes(ev)
			if len(run) > 0 && runBytes+size > maxBytes {
				if err := settleRun(); err != nil {
					return err
				}
			}
			runBytes += size
			run = append(run, moneyItem{
				i: i, st: st, ev: ev,
				src:    idempotent.Source{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset},
				key:    idempotent.TenantKey{TenantID: ev.TenantID, Key: ev.Key},
				origin: origin,
			})
		}
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
	i   int           // index in the batch
	st  *MessageState // the state of this event of message i
	ev  channels.Event
	src idempotent.Source
	key idempotent.TenantKey
	// origin is what produced ev (settlement.SourceOf): stored on its
	// claim and named by its settled event.
	origin settled.Source
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
// preferring any other error to ErrClaimInFlight.
//
// Each distinct key is acquired once, by its first message (its leader).
// Every message of the key is then judged against the key's claim, exactly
// as a message alone would be: a fingerprint that differs from the claim's
// is a conflict; the others share the claim's outcome. A claim this batch
// made is settled with the batch's others; a claim found existing is
// finished (an ACQUIRED one settled through the fence, a pending
// over-refund dead letter written) by the first message whose fingerprint
// matches it, whichever position that message has.
func (p *Pipeline) handleMoney(ctx context.Context, msgs []kafka.Message, money []moneyItem) error {
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
	results, fresh, outcomes, err := p.claimAndSettle(ctx, leaders)
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
		st := it.st
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

// firstErrors keeps the first error, and the first ErrClaimInFlight apart:
// a message that waits for another worker's settlement must not hide one
// that failed.
type firstErrors struct{ failed, inFlight error }

func (e *firstErrors) add(err error) {
	switch {
	case errors.Is(err, ErrClaimInFlight):
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

// ErrClaimInFlight means the claim is being settled by its maker: retry
// the message shortly. It is routine, not a processing error.
var ErrClaimInFlight = errors.New("claim is being settled by the worker that made it")

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

func (p *Pipeline) count(ev channels.Event, outcome metrics.Outcome) {
	p.Metrics.Event(string(ev.Channel), string(ev.Type), outcome)
}
