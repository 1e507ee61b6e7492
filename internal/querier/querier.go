package querier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/querybudget"
	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/pkg/channels"
)

// Item is one registration leased to this querier to be asked about.
type Item struct {
	// ID identifies the registration to its Work store.
	ID string
	// Target is what the channel is asked.
	Target channels.QueryTarget
	// Registration is what the plan needs: kind, creation, expiry, the
	// transient failures in a row so far.
	Registration queryplan.Registration
}

// Record is what became of one leased item: written back by Work.Record,
// which releases the lease.
type Record struct {
	// Asked is false when no query was sent (the budget said wait); the
	// answer fields are then empty.
	Asked   bool
	AskedAt time.Time
	// Answer is the answer label (metrics.QueryAnswers), RawState the
	// channel's own state or error code, Detail a sentence for operators.
	Answer, RawState, Detail string
	// Published: the answer was published for the worker to settle.
	Published bool
	// Decision is the plan's: when to ask next, or stop, and the
	// registration's new status ("" leaves it; the querier never sets
	// Succeeded: settlement does).
	Decision queryplan.Decision
	// Retries is the registration's transient failures in a row after
	// this ask.
	Retries int
}

// Work is where the registrations to ask about are, shared by every
// querier.
type Work interface {
	// Lease returns up to limit registrations due at now (their next ask
	// at or before now, open), leased to owner until now+lease: no other
	// querier gets them before Record or the lease's end.
	Lease(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Item, error)
	// Record writes what became of item and releases its lease; it
	// changes nothing when owner no longer holds the lease.
	Record(ctx context.Context, owner string, item Item, rec Record) error
}

// Asker sends a query and returns the channel's answer as received. An
// error is a transport failure (no answer at all).
type Asker interface {
	Ask(ctx context.Context, target channels.QueryTarget) (channels.QueryResponse, error)
}

// Reader verifies an answer with the channel's keys and reads it. An
// error of kind channels.KindUnauthenticated means the answer is not the
// channel's; any other error, that it cannot be read.
type Reader interface {
	Read(target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error)
}

// Publisher publishes an answer to the input topic, signed, for the
// worker to verify and settle; answer is the querier's own reading of it
// (the worker reads it again).
type Publisher interface {
	Publish(ctx context.Context, target channels.QueryTarget, askedAt time.Time, resp channels.QueryResponse, answer channels.QueryAnswer) error
}

// Budget is the merchants' shared query budget (*querybudget.Store).
type Budget interface {
	// Take spends one of m's tokens: true and the token's time, or false
	// and when to try again.
	Take(ctx context.Context, m querybudget.Merchant) (ok bool, at time.Time, err error)
	Throttled(ctx context.Context, m querybudget.Merchant) (until time.Time, err error)
}

// Config is a Querier's setting.
type Config struct {
	// Owner names this querier in leases; unique per process.
	Owner string
	// Policy is the schedule (queryplan.DefaultPolicy).
	Policy queryplan.Policy
	// Lease is how long a leased registration is this querier's: longer
	// than one ask (the request timeout) and its recording.
	Lease time.Duration
	// Batch is how many registrations one round leases.
	Batch int
	// Parallel is how many queries are in flight at once.
	Parallel int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// PublishTimeout bounds the publishing of one answer (zero:
	// DefaultPublishTimeout): a broker that takes the connection and never
	// answers fails that one answer, kept leased and asked again after its
	// lease, instead of holding the round.
	PublishTimeout time.Duration
}

// DefaultPublishTimeout is Config.PublishTimeout's default.
const DefaultPublishTimeout = 30 * time.Second

// Querier asks the channels about the registrations no callback settled.
type Querier struct {
	cfg     Config
	work    Work
	asker   Asker
	reader  Reader
	pub     Publisher
	budget  Budget
	metrics *metrics.QueryMetrics
	log     *slog.Logger
}

// New returns a Querier. It fails when the configuration cannot be
// followed.
func New(cfg Config, work Work, asker Asker, reader Reader, pub Publisher, budget Budget, m *metrics.QueryMetrics, log *slog.Logger) (*Querier, error) {
	if cfg.Owner == "" {
		return nil, errors.New("querier: no owner name")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Lease <= 0 || cfg.Batch < 1 || cfg.Parallel < 1 {
		return nil, fmt.Errorf("querier: lease %s, batch %d and parallel %d must be positive", cfg.Lease, cfg.Batch, cfg.Parallel)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	return &Querier{cfg: cfg, work: work, asker: asker, reader: reader, pub: pub, budget: budget, metrics: m, log: log}, nil
}

// Round leases the registrations due now and handles each, at most
// Parallel at once; it returns how many it handled. An error of the Work
// store is returned (nothing was asked); an item whose handling failed
// keeps its lease until it ends, and is asked again after it.
func (q *Querier) Round(ctx context.Context) (int, error) {
	items, err := q.work.Lease(ctx, q.cfg.Owner, q.cfg.Now(), q.cfg.Lease, q.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("lease registrations: %w", err)
	}
	sem := make(chan struct{}, q.cfg.Parallel)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := q.handle(ctx, it); err != nil && ctx.Err() == nil {
				q.log.Warn("query of a registration failed; asked again after its lease", "registration", it.ID,
					"channel", it.Target.Channel, "kind", it.Target.Kind, "error", err)
			}
		})
	}
	wg.Wait()
	return len(items), nil
}

// handle asks about one item and records what became of it.
func (q *Querier) handle(ctx context.Context, it Item) error {
	t := it.Target
	merchant := querybudget.Merchant{TenantID: t.TenantID, Channel: string(t.Channel), MerchantID: t.MerchantID}
	ok, at, err := q.budget.Take(ctx, merchant)
	if err != nil {
		return fmt.Errorf("budget: %w", err) // no query on an error: the lease runs out
	}
	if !ok {
		return q.work.Record(ctx, q.cfg.Owner, it, Record{
			Decision: queryplan.Decision{Next: at, Reason: "the merchant's query budget is spent for now"},
			Retries:  it.Registration.Retries,
		})
	}
	// The token's time (the budget's clock) is what the budget bounds: a
	// look at the channel's side sees each query later, by however long
	// it took to send.
	q.log.Debug("query token taken", "channel", t.Channel, "kind", t.Kind, "merchant", t.MerchantID,
		"merchant_order_no", t.MerchantOrderNo, "trade_no", t.TradeNo, "refund_no", t.RefundNo, "token_at", at)
	askedAt := q.cfg.Now()
	rec := Record{Asked: true, AskedAt: askedAt}
	resp, err := q.asker.Ask(ctx, t)
	var answer channels.QueryAnswer
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		answer = channels.QueryAnswer{Outcome: channels.QueryRetry, Detail: err.Error()}
		rec.Answer = metrics.QueryAnswerError
	default:
		answer, err = q.reader.Read(t, resp)
		if err != nil {
			// Not the channel's answer, or not readable: never acted on.
			// Both are an operator's to look at; asked again slowly.
			rec.Answer = metrics.QueryAnswerAmbiguous
			if kind, _ := channels.KindOf(err); kind == channels.KindUnauthenticated {
				rec.Answer = metrics.QueryAnswerUnauthenticated
			}
			answer = channels.QueryAnswer{Outcome: channels.QueryUncertain, Detail: err.Error()}
		} else {
			rec.Answer = metrics.QueryAnswerLabel(t.Kind, answer)
		}
	}
	rec.RawState, rec.Detail = answer.RawState, answer.Detail
	q.metrics.Answered(t.Channel, rec.Answer)

	now := q.cfg.Now()
	reg := it.Registration
	if answer.Outcome == channels.QueryThrottled {
		if _, err := q.budget.Throttled(ctx, merchant); err != nil {
			return fmt.Errorf("budget: record a rate limit: %w", err)
		}
	}
	if answer.Outcome == channels.QuerySettled && len(answer.Events) == 0 {
		// The channel says money moved, but its answer is not the
		// callback's event (an Alipay partial refund's names this refund
		// alone, the callback the trade's cumulative): publishing it would
		// settle nothing, and asking again would learn nothing new.
		rec.Decision = queryplan.Decision{
			Stop: true, Alert: true,
			Reason: "the channel says it succeeded, but its answer proves no event the worker could settle: the callback or the statement must; see the answer's detail",
		}
		return q.record(ctx, it, rec)
	}
	if answer.Outcome == channels.QuerySettled {
		pctx, cancel := context.WithTimeout(ctx, q.cfg.PublishTimeout)
		err := q.pub.Publish(pctx, t, askedAt, resp, answer)
		cancel()
		if err != nil {
			return fmt.Errorf("publish the answer: %w", err)
		}
		rec.Published = true
		// Only settlement makes it true: ask again later if the worker has
		// not settled it by then (a registration it settled is not leased).
		rec.Decision = queryplan.Decision{
			Next:   now.Add(q.cfg.Policy.SettledRecheck),
			Reason: "the answer proves it and was published; the worker settles it through the claim",
		}
		return q.record(ctx, it, rec)
	}
	if answer.Outcome == channels.QueryRetry {
		rec.Retries = reg.Retries + 1
	}
	rec.Decision, err = q.cfg.Policy.After(reg, answer.Outcome, now)
	if err != nil {
		q.log.Warn("a query answer the schedule does not know: treated as uncertain", "outcome", answer.Outcome, "error", err)
	}
	return q.record(ctx, it, rec)
}

// record records what became of an ask; a decision that wants an
// operator's eye (queryplan.Decision.Alert: stopped past the horizon,
// or an answer that proves no event) is logged at WARN, with the
// registration and the reason.
func (q *Querier) record(ctx context.Context, it Item, rec Record) error {
	if rec.Decision.Alert {
		q.log.Warn("the querier stopped asking about a registration: an operator must settle it", "registration", it.ID,
			"channel", it.Target.Channel, "kind", it.Target.Kind, "merchant_order_no", it.Target.MerchantOrderNo,
			"trade_no", it.Target.TradeNo, "refund_no", it.Target.RefundNo, "answer", rec.Answer, "reason", rec.Decision.Reason, "detail", rec.Detail)
	}
	return q.work.Record(ctx, q.cfg.Owner, it, rec)
}
