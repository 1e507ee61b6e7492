package settlement

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
)

// Service settles claimed events and keeps refund pre-registrations. Safe
// for concurrent use.
type Service struct {
	db      *bun.DB
	claims  *idempotent.Store
	log     *slog.Logger
	sqlite  bool
	engine  engine
	metrics *serviceMetrics
	// preregistered: every refund is expected to have been registered
	// before its callback (PAYCB_REFUNDS_PREREGISTERED).
	preregistered bool
	// noSettled: settled events are off (PAYCB_SETTLED_TOPIC=none), so no
	// outbox row is written and no trade's counter advances.
	noSettled bool
}

// SetSettledEvents says whether settlements write their settled events to
// the outbox (ss_settled_outbox), the default. Off (PAYCB_SETTLED_TOPIC=none),
// nothing is written and the trades' counters (settled_seq) stay where they
// are, so events written after turning them on again continue each trade's
// trade_seq without a gap. Call it before the Service settles anything: it
// is not synchronised.
func (s *Service) SetSettledEvents(on bool) { s.noSettled = !on }

// SetRefundsPreregistered says whether every refund is expected to have
// been registered (RegisterRefund) before the channel reports it
// (PAYCB_REFUNDS_PREREGISTERED). When on, a refund settled without a
// registration is logged at WARN; when off (the default) only at DEBUG.
// paycb_refund_unregistered_total counts it either way. A Shouqianba
// cancel is not a refund anyone registers: it is neither matched with a
// registration nor counted. Call it before the
// Service settles anything: it is not synchronised.
func (s *Service) SetRefundsPreregistered(on bool) { s.preregistered = on }

// Mismatch reasons, the reason label of
// paycb_refund_registration_mismatch_total.
const (
	// MismatchAmount: a per-refund amount (WeChat) differs from its
	// registration's.
	MismatchAmount = "amount"
	// MismatchCumulative: on a cumulative channel, the trade's refunded
	// total is outside [sum of succeeded registrations, that sum plus the
	// open ones]; above the range only when refunds are preregistered.
	MismatchCumulative = "cumulative"
	// MismatchClosed: a refund succeeded whose registration was CLOSED.
	MismatchClosed = "closed"
)

// New returns a Service on the pool db, settling claims of the store claims.
// Its metrics (paycb_ledger_duplicate_postings_total,
// paycb_order_total_mismatch_total, paycb_refund_unregistered_total,
// paycb_refund_registration_mismatch_total{reason}) are registered on reg;
// a nil reg keeps them unexported. A nil logger discards logs. New fails
// only when reg refuses a metric (for example a second Service on the same
// registry).
func New(db *bun.DB, claims *idempotent.Store, logger *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	if db == nil || claims == nil {
		return nil, errors.New("new settlement service: db and claims are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newServiceMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("new settlement service: %w", err)
	}
	return &Service{
		db:      db,
		claims:  claims,
		log:     logger,
		sqlite:  db.Dialect().Name() == dialect.SQLite,
		metrics: m,
	}, nil
}

// Result is what one settlement did.
type Result struct {
	// Outcome is POSTED, NO_MONEY or OVER_REFUND; empty when FenceLost.
	Outcome idempotent.Outcome
	// FenceLost means another settler had already settled the claim: a
	// final, successful outcome; nothing was written.
	FenceLost bool
	// Amount is the fen this settlement posted (0 unless POSTED, and 0
	// when AlreadyPosted).
	Amount int64
	// AlreadyPosted means the ledger already held this event's postings (a
	// bug bypassed the claim): the claim was settled POSTED with no new
	// business rows, counted and logged at ERROR.
	AlreadyPosted bool
	// SettledAt is when the settling transaction committed.
	SettledAt time.Time
}

// errAlreadyPosted rolls the business transaction back when the event's
// postings are already in the ledger.
var errAlreadyPosted = errors.New("event already posted")

// txOptions are the settlement transactions' options: none. On
// MySQL/MariaDB they run at READ COMMITTED, set on every connection of the
// pool (internal/sqldb), so every read sees the latest commit and InnoDB
// takes no gap locks on the searches (fewer deadlocks between unrelated
// trades); asking for it per transaction would cost a statement each.
// Every decision is made on rows locked with SELECT … FOR UPDATE and
// written through the fence's checked row count, never on a snapshot, so
// a pool at another isolation still decides alike. SQLite transactions
// begin IMMEDIATE (serialised).
func (s *Service) txOptions() *sql.TxOptions { return nil }

// Settle does the business work of the ACQUIRED claim for ev: SettleBatch
// with one event, in one transaction that creates or locks the order row,
// works out the outcome, updates the order, inserts the two ledger rows,
// moves a matching refund registration to SUCCEEDED and settles the claim
// through the fence, all committed together.
//
// A claim that is already SETTLED gives Result{FenceLost: true} and a nil
// error. An event whose postings are already in the ledger gives
// Result{Outcome: POSTED, AlreadyPosted: true} (see Result).
//
// Errors: permanent ones wrap ErrInvalidEvent (ev fails Validate),
// ErrFingerprintMismatch (ev is not the claimed event) or
// idempotent.ErrNotFound (no claim); do not retry those. Every other error
// (deadlock, lock wait timeout, lost connection, cancelled context) left
// nothing written and the claim ACQUIRED: retry in place.
func (s *Service) Settle(ctx context.Context, ev channels.Event) (Result, error) {
	return s.SettleFrom(ctx, ev, settled.SourceCallback)
}

// SettleFrom is Settle for an event produced by src (a callback, a
// statement line or a query answer; "" is a callback), the source of its
// settled event. An unknown src is refused with ErrInvalidEvent.
func (s *Service) SettleFrom(ctx context.Context, ev channels.Event, src settled.Source) (Result, error) {
	res, err := s.SettleBatchFrom(ctx, []channels.Event{ev}, []settled.Source{src})
	switch {
	case err == nil:
		return res[0], nil
	case errors.Is(err, errAlreadyPosted):
		return s.settleAlreadyPosted(ctx, ev, sourceOf([]settled.Source{src}, 0), err)
	default:
		return Result{}, err
	}
}

// SettleStored settles a claim from the canonical event stored on it (the
// sweeper, a duplicate that finds the claim ACQUIRED, operators). It decodes
// rec.Event and calls Settle. A record without an event (purged), an event
// that does not decode or validate, or one that names another tenant or key
// is an error wrapping ErrInvalidEvent; otherwise Settle's contract holds.
// The settled event's source is the stored event's "source" member when the
// worker stored one beside the event's fields, else a callback.
func (s *Service) SettleStored(ctx context.Context, rec idempotent.Record) (Result, error) {
	if len(rec.Event) == 0 {
		return Result{}, fmt.Errorf("settle stored %s: %w: the claim holds no event", rec.Key, ErrInvalidEvent)
	}
	var ev channels.Event
	if err := json.Unmarshal(rec.Event, &ev); err != nil {
		return Result{}, fmt.Errorf("settle stored %s: decode event: %w: %w", rec.Key, ErrInvalidEvent, err)
	}
	if ev.TenantID != rec.TenantID || ev.Key != rec.Key {
		return Result{}, fmt.Errorf("settle stored %s: %w: stored event is %d/%s", rec.Key, ErrInvalidEvent, ev.TenantID, ev.Key)
	}
	_, src, _ := storedOrigin(rec.Event)
	return s.SettleFrom(ctx, ev, src)
}

// settlement is the state of one Settle attempt; what it noticed is logged
// and counted only after the commit, so a retried or rolled-back attempt
// counts nothing.
type settlement struct {
	ev      channels.Event
	index   int            // ev's index in its batch
	source  settled.Source // what produced ev: its settled event's source
	outcome idempotent.Outcome
	amount  int64
	order   Order
	// reversal is the fen a payment's settlement reversed at once under
	// the key of the trade's earlier Shouqianba cancel (0: none);
	// cancelIndex is that cancel's index in the batch, -1 when its claim
	// was settled before.
	reversal    int64
	cancelIndex int

	totalMismatch    bool
	merchantMismatch bool
	unregistered     bool
	regMismatches    []string
	regDetail        string
}

// decide works out st.ev's outcome and amount on the locked order row ord
// and returns the order as it must be written; write is false when nothing
// about the order changes (an over-refund). It does no I/O.
func decide(st *settlement, ord Order, now time.Time) (next Order, write bool, err error) {
	ev := st.ev
	st.totalMismatch = ord.Amount != ev.OrderTotal
	st.merchantMismatch = ord.MerchantOrderNo != ev.MerchantOrderNo

	// (3) The outcome, decided on the locked row.
	next = ord
	switch ev.Type {
	case idempotent.PaymentReceived:
		if ord.PaidAmount > 0 {
			// Only one payment key exists per trade, so a posted payment
			// means this very event was posted without its claim.
			return Order{}, false, fmt.Errorf("%w: order already paid %d", errAlreadyPosted, ord.PaidAmount)
		}
		st.outcome, st.amount = idempotent.OutcomePosted, ev.OrderTotal
		next.PaidAmount = ev.OrderTotal
		next.BoundMerchantID = ev.BoundMerchant
		paidAt := dbTime(ev.OccurredAt)
		next.PaidAt = &paidAt
		if ord.cancel.pending {
			// The trade was cancelled before its payment was posted: the
			// payment is reversed in the same transaction, under the
			// cancel's key, whose claim then records that it moved money.
			next.cancel = pendingCancel{}
			st.cancelIndex = ord.cancel.batchIndex
			if rev := next.PaidAmount - next.RefundedAmount; rev > 0 {
				st.reversal = rev
				next.RefundedAmount += rev
			}
			next.MaxCumulativeRefund = max(next.MaxCumulativeRefund, next.Amount)
		}
	case idempotent.RefundSucceeded:
		if ev.IsCancel() {
			decideCancel(st, ord, &next)
		} else if st.outcome, st.amount = refundOutcome(ord, ev); st.outcome == idempotent.OutcomePosted {
			next.RefundedAmount += st.amount
			if ev.Cumulative() {
				next.MaxCumulativeRefund = ev.CumulativeRefunded
			}
		}
		if st.outcome != idempotent.OutcomeOverRefund {
			// The refund happened (a NO_MONEY one's money was carried by a
			// higher cumulative); the latest refund time is kept whatever
			// the arrival order.
			at := dbTime(ev.OccurredAt)
			if next.LastRefundAt == nil || at.After(*next.LastRefundAt) {
				next.LastRefundAt = &at
			}
		}
	default:
		return Order{}, false, fmt.Errorf("%w: event type %s", ErrInvalidEvent, ev.Type)
	}
	st.order = next
	if st.outcome == idempotent.OutcomeOverRefund {
		return next, false, nil
	}
	next.Status = DeriveStatus(next.Amount, next.PaidAmount, next.RefundedAmount)
	next.UpdatedAt = now
	st.order = next
	return next, true, nil
}

// Decision is what Decide worked out for one event on its order row.
type Decision struct {
	// Order is the order row as it must be written.
	Order Order
	// Write is false when nothing about the order changes (an
	// over-refund).
	Write bool
	// Outcome is the claim's settle outcome.
	Outcome idempotent.Outcome
	// Amount is the fen the event's own posting moves (0 when nothing is
	// posted).
	Amount int64
	// Reversal is the fen a payment's settlement reverses at once under the
	// key of the trade's earlier Shouqianba cancel decided in the same
	// batch (0: none).
	Reversal int64
}

// Decide applies ev to the order row ord exactly as Settle and SettleBatch
// do on the locked row, with no I/O: the outcome, the fen moved and the
// order as it must be written. It is the one decision, exported so that
// the benchmark's rule floor (internal/bench) measures what settlement
// decides rather than a copy of it. A payment on an order already paid is
// an error (its posting exists without its claim); so is an event type
// that is not the contract's, wrapping ErrInvalidEvent.
func Decide(ord Order, ev channels.Event, now time.Time) (Decision, error) {
	st := settlement{ev: ev, cancelIndex: -1}
	next, write, err := decide(&st, ord, now)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Order: next, Write: write, Outcome: st.outcome, Amount: st.amount, Reversal: st.reversal}, nil
}

// decideCancel decides a Shouqianba CANCELED order against the locked
// order row ord, writing what changes into next. A cancel nets the trade to
// zero, whatever the timestamps and whatever arrives later: with a payment
// posted it reverses what is left of it (paid − refunded; NO_MONEY when
// refunds already took it all) and raises the highest cumulative to the
// total, so a refund reported after it moves nothing; with no payment
// posted it moves nothing (NO_MONEY) and is remembered by its claim, so the
// payment, when it is settled, is reversed at once (decide). Never an
// over-refund.
func decideCancel(st *settlement, ord Order, next *Order) {
	if ord.PaidAmount == 0 {
		st.outcome, st.amount = idempotent.OutcomeNoMoney, 0
		next.cancel = pendingCancel{pending: true, batchIndex: st.index}
		return
	}
	rev := ord.PaidAmount - ord.RefundedAmount
	if rev <= 0 {
		st.outcome, st.amount = idempotent.OutcomeNoMoney, 0
	} else {
		st.outcome, st.amount = idempotent.OutcomePosted, rev
		next.RefundedAmount += rev
	}
	next.MaxCumulativeRefund = max(next.MaxCumulativeRefund, next.Amount)
}

// refundOutcome decides a refund against the locked order row ord: the
// outcome and the fen it moves.
func refundOutcome(ord Order, ev channels.Event) (idempotent.Outcome, int64) {
	var amount int64
	if ev.Cumulative() {
		if ev.CumulativeRefunded > ord.Amount {
			return idempotent.OutcomeOverRefund, 0
		}
		amount = ev.CumulativeRefunded - ord.MaxCumulativeRefund
		if amount <= 0 {
			return idempotent.OutcomeNoMoney, 0
		}
	} else {
		amount = ev.RefundAmount
	}
	if ord.RefundedAmount+amount > ord.Amount {
		return idempotent.OutcomeOverRefund, 0
	}
	return idempotent.OutcomePosted, amount
}

// settleAlreadyPosted handles a settlement whose postings the ledger
// already holds: the business transaction has rolled back; a fresh one
// writes the claim's settled event when the outbox lacks it (a claim
// settled POSTED always has its event: the amount its postings hold, the
// order row as it is) and fence-settles the claim POSTED. It is counted and
// logged once, when that commits.
func (s *Service) settleAlreadyPosted(ctx context.Context, ev channels.Event, src settled.Source, cause error) (Result, error) {
	err := s.db.RunInTx(ctx, s.txOptions(), func(ctx context.Context, tx bun.Tx) error {
		if err := s.writeMissingEvent(ctx, tx, ev, src); err != nil {
			return err
		}
		return s.claims.Settle(ctx, tx, ev.TenantID, ev.Key, idempotent.OutcomePosted)
	})
	switch {
	case err == nil:
	case errors.Is(err, idempotent.ErrFenceLost):
		return Result{FenceLost: true, SettledAt: s.claims.Now()}, nil
	default:
		return Result{}, fmt.Errorf("settle already-posted %s: %w", ev.Key, err)
	}
	s.metrics.LedgerDuplicatePosting()
	s.log.LogAttrs(ctx, slog.LevelError,
		"ledger already holds this event's postings: a path bypassed the claim; claim settled POSTED without new postings",
		slog.Int64("tenant", ev.TenantID), slog.String("key", string(ev.Key)),
		slog.String("channel", string(ev.Channel)), slog.String("trade_no", ev.TradeNo),
		slog.String("cause", cause.Error()))
	return Result{Outcome: idempotent.OutcomePosted, AlreadyPosted: true, SettledAt: s.claims.Now()}, nil
}

// writeMissingEvent writes, on the locked order row, the settled event of
// ev's claim whose postings the ledger already holds, unless the outbox
// holds it already: the amount is the postings', the order fields the
// row's.
func (s *Service) writeMissingEvent(ctx context.Context, tx bun.Tx, ev channels.Event, src settled.Source) error {
	if s.noSettled {
		return nil
	}
	ord, err := selectOrder(ctx, tx, ev.TenantID, ev.Channel, ev.TradeNo, !s.sqlite)
	if err != nil {
		return fmt.Errorf("settle already-posted %s: %w", ev.Key, err)
	}
	n, err := tx.NewSelect().Table("ss_settled_outbox").
		Where("tenant_id = ?", ev.TenantID).Where("idempotent_key = ?", string(ev.Key)).Count(ctx)
	if err != nil {
		return fmt.Errorf("settle already-posted %s: read its settled event: %w", ev.Key, err)
	}
	if n > 0 {
		return nil
	}
	var amount int64
	if err := tx.NewSelect().Table("ss_ledger_entry").ColumnExpr("COALESCE(SUM(amount), 0)").
		Where("tenant_id = ?", ev.TenantID).Where("idempotent_key = ?", string(ev.Key)).
		Where("direction = ?", string(Debit)).Scan(ctx, &amount); err != nil {
		return fmt.Errorf("settle already-posted %s: read its postings: %w", ev.Key, err)
	}
	now := s.claims.Now()
	row, err := outboxEvent(&ord, ord, claimOf(ev, amount, src), now)
	if err != nil {
		return fmt.Errorf("settle already-posted: %w", err)
	}
	if _, err := tx.NewUpdate().Table("ss_channel_order").Set("settled_seq = ?", ord.SettledSeq).
		Where("id = ?", ord.ID).Exec(ctx); err != nil {
		return fmt.Errorf("settle already-posted %s: advance the trade's counter: %w", ev.Key, err)
	}
	return insertOutbox(ctx, tx, []outboxRow{row})
}

// report counts and logs what a committed settlement noticed.
func (s *Service) report(ctx context.Context, st *settlement) {
	ev := st.ev
	attrs := func(extra ...slog.Attr) []slog.Attr {
		return append([]slog.Attr{
			slog.Int64("tenant", ev.TenantID), slog.String("key", string(ev.Key)),
			slog.String("channel", string(ev.Channel)), slog.String("trade_no", ev.TradeNo),
		}, extra...)
	}
	if st.totalMismatch {
		s.metrics.OrderTotalMismatch()
		s.log.LogAttrs(ctx, slog.LevelWarn, "order total differs from the first recorded; the first is kept",
			attrs(slog.Int64("recorded_total", st.order.Amount), slog.Int64("event_total", ev.OrderTotal))...)
	}
	if st.merchantMismatch {
		s.log.LogAttrs(ctx, slog.LevelWarn, "merchant order number differs from the first recorded; the first is kept",
			attrs(slog.String("recorded", st.order.MerchantOrderNo), slog.String("event", ev.MerchantOrderNo))...)
	}
	if st.outcome == idempotent.OutcomeOverRefund {
		s.log.LogAttrs(ctx, slog.LevelWarn, "refund exceeds the order total: nothing posted",
			attrs(slog.Int64("order_total", st.order.Amount), slog.Int64("refunded", st.order.RefundedAmount),
				slog.Int64("refund_amount", ev.RefundAmount), slog.Int64("cumulative_refunded", ev.CumulativeRefunded))...)
	}
	if st.unregistered {
		s.metrics.RefundUnregistered()
		level := slog.LevelDebug
		if s.preregistered {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(ctx, level, "refund settled without a pre-registration",
			attrs(slog.String("refund_no", ev.RefundNo), slog.String("outcome", string(st.outcome)))...)
	}
	for _, reason := range st.regMismatches {
		s.metrics.RegistrationMismatch(reason)
		s.log.LogAttrs(ctx, slog.LevelWarn, "refund callback disagrees with the pre-registrations",
			attrs(slog.String("reason", reason), slog.String("refund_no", ev.RefundNo), slog.String("detail", st.regDetail))...)
	}
	if st.reversal > 0 {
		s.log.LogAttrs(ctx, slog.LevelInfo, "payment of a cancelled order: reversed at once under the cancel's key",
			attrs(slog.Int64("amount", st.amount), slog.Int64("reversed", st.reversal))...)
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "settled",
		attrs(slog.String("outcome", string(st.outcome)), slog.Int64("amount", st.amount),
			slog.String("order_status", string(st.order.Status)))...)
}
