package queryplan

import (
	"errors"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Status is what a registration becomes when the querier stops asking
// about it, per the contract's registration states.
type Status string

// The registration statuses a plan can set. The empty Status leaves the
// registration as it is. SUCCEEDED is not among them: only the worker's
// settlement of the event, through the claim, makes a registration
// succeed.
const (
	// Closed: the channel says it ended without money moving.
	Closed Status = "CLOSED"
	// Expired: the channel never knew it, and it is past its time.
	Expired Status = "EXPIRED"
	// Abnormal: the channel cannot say; an operator looks. The querier goes
	// on asking slowly: a later final answer still settles it.
	Abnormal Status = "ABNORMAL"
)

// Policy is the schedule of the active query. Offsets are measured from the
// registration's creation; the Repeat intervals apply after the last
// offset. Every field is configurable; DefaultPolicy documents the
// defaults and their sources.
type Policy struct {
	// FirstWait is how long a registration waits for its callback before
	// the first query (PAYCB_QUERY_FIRST_WAIT).
	FirstWait time.Duration
	// PaymentOffsets are the later asks of a payment, from creation,
	// ascending, each after FirstWait.
	PaymentOffsets []time.Duration
	// PaymentRepeat is the interval after the last payment offset.
	PaymentRepeat time.Duration
	// RefundOffsets and RefundRepeat are the same for refunds.
	RefundOffsets []time.Duration
	RefundRepeat  time.Duration
	// RetryMin and RetryMax bound the back-off after a transient failure
	// (5xx, a timeout, a refused connection): RetryMin doubled per
	// consecutive failure, at most RetryMax, never later than the next
	// scheduled ask.
	RetryMin, RetryMax time.Duration
	// ThrottledWait is how long a registration waits after its merchant was
	// rate-limited (WeChat's refund query: "wait one minute").
	ThrottledWait time.Duration
	// SettledRecheck is how long after publishing an answer that proves
	// the payment or refund the registration is asked about again, should
	// the worker not have settled it by then (a registration it settled is
	// never leased again).
	SettledRecheck time.Duration
	// SlowEvery is the interval for answers an operator must look at:
	// uncertain (PAYERROR, ABNORMAL, *_ERROR) and refused (bad credentials,
	// a bad signature): asking goes on, slowly, so a fix or a final answer
	// is still seen.
	SlowEvery time.Duration
	// ExpiryGrace is how long past its expires_at a payment is still
	// asked about as usual: a payment may complete at the last second,
	// and a channel may close its order a little after.
	ExpiryGrace time.Duration
	// NotFoundFor is how long a refund, which has no expires_at, may be
	// unknown to the channel before it is Expired.
	NotFoundFor time.Duration
	// Horizon is the age past which nothing is asked any more ("请勿轮询超
	// 过一个月之前的订单"): the statement is the last witness.
	Horizon time.Duration
}

// DefaultPolicy is the default schedule; docs/queries.md gives the source
// of each figure.
func DefaultPolicy() Policy {
	return Policy{
		FirstWait:      60 * time.Second,
		PaymentOffsets: []time.Duration{3 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute},
		PaymentRepeat:  30 * time.Minute,
		RefundOffsets: []time.Duration{
			2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
			10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 70 * time.Minute,
		},
		RefundRepeat:   30 * time.Minute,
		RetryMin:       5 * time.Second,
		RetryMax:       5 * time.Minute,
		ThrottledWait:  time.Minute,
		SettledRecheck: 10 * time.Minute,
		SlowEvery:      30 * time.Minute,
		ExpiryGrace:    5 * time.Minute,
		NotFoundFor:    24 * time.Hour,
		Horizon:        30 * 24 * time.Hour,
	}
}

// Validate refuses a policy the querier cannot follow: a non-positive
// interval, offsets not ascending or not after FirstWait, or a horizon
// shorter than the schedule.
func (p Policy) Validate() error {
	for name, d := range map[string]time.Duration{
		"first wait": p.FirstWait, "payment repeat": p.PaymentRepeat, "refund repeat": p.RefundRepeat,
		"retry min": p.RetryMin, "retry max": p.RetryMax, "throttled wait": p.ThrottledWait,
		"slow interval": p.SlowEvery, "settled recheck": p.SettledRecheck, "not-found time": p.NotFoundFor, "horizon": p.Horizon,
	} {
		if d <= 0 {
			return fmt.Errorf("query policy: %s %s is not positive", name, d)
		}
	}
	if p.ExpiryGrace < 0 {
		return fmt.Errorf("query policy: expiry grace %s is negative", p.ExpiryGrace)
	}
	if p.RetryMax < p.RetryMin {
		return fmt.Errorf("query policy: retry max %s is below retry min %s", p.RetryMax, p.RetryMin)
	}
	for name, offs := range map[string][]time.Duration{"payment": p.PaymentOffsets, "refund": p.RefundOffsets} {
		prev := p.FirstWait
		for _, o := range offs {
			if o <= prev {
				return fmt.Errorf("query policy: %s offsets must ascend after the first wait %s, got %s after %s", name, p.FirstWait, o, prev)
			}
			prev = o
		}
		if p.Horizon <= prev {
			return fmt.Errorf("query policy: horizon %s is not after the last %s offset %s", p.Horizon, name, prev)
		}
	}
	return nil
}

// Registration is what the plan knows of one open registration.
type Registration struct {
	Kind channels.QueryKind
	// CreatedAt is when the payment or refund was started (the
	// registration's created_at).
	CreatedAt time.Time
	// ExpiresAt is when a payment can no longer be paid; zero for a refund.
	ExpiresAt time.Time
	// Retries is how many transient failures came in a row since the last
	// answer that was not one.
	Retries int
}

// Decision is what to do after an answer: ask again at Next, or stop.
type Decision struct {
	// Stop: ask no more about this registration.
	Stop bool
	// Next is when to ask again; zero when Stop.
	Next time.Time
	// Status is the registration's new status, "" to leave it as it is.
	Status Status
	// Alert: an operator should look (uncertain or refused answers, a
	// payment still not final past its time, the horizon reached).
	Alert bool
	// Reason says why, in a sentence, for logs and consumer trade.
	Reason string
}

// ErrUnknownOutcome is returned for an outcome the plan does not know: the
// querier treats it as uncertain, never as final.
var ErrUnknownOutcome = errors.New("query plan: unknown answer outcome")

// First returns when a registration is first asked about: FirstWait after
// its creation.
func (p Policy) First(r Registration) time.Time { return r.CreatedAt.Add(p.FirstWait) }

// After decides what follows an answer with outcome o received at now.
// A settled answer is asked again after SettledRecheck (the worker's
// settlement, not the querier, ends a registration that succeeded); a
// closed one stops the asking and closes the registration;
// pending and not-found answers follow the schedule until the
// registration is past its time; throttled, retry, uncertain and refused
// answers wait as their fields say. Past the Horizon nothing is asked any
// more, whatever the answer. An outcome the plan does not know is treated
// as uncertain and returned with ErrUnknownOutcome.
func (p Policy) After(r Registration, o channels.QueryOutcome, now time.Time) (Decision, error) {
	if o == channels.QuerySettled {
		return Decision{
			Next:   now.Add(p.SettledRecheck),
			Reason: "the answer proves it and is published; the worker settles it through the claim, else it is asked again",
		}, nil
	}
	if o == channels.QueryClosed {
		return Decision{Stop: true, Status: Closed, Reason: "the channel says it ended without money moving"}, nil
	}
	if now.Sub(r.CreatedAt) >= p.Horizon {
		return Decision{Stop: true, Alert: true, Reason: fmt.Sprintf("older than the query horizon %s: the statement is the last witness", p.Horizon)}, nil
	}
	var err error
	switch o {
	case channels.QueryPending:
		if p.pastTime(r, now) {
			return Decision{
				Stop: true, Alert: true,
				Reason: "still not final past its time: left open for an operator (the alert on registrations past expiry fires)",
			}, nil
		}
		return p.scheduled(r, now, "not final yet"), nil
	case channels.QueryNotFound:
		if p.pastTime(r, now) {
			return Decision{Stop: true, Status: Expired, Reason: "the channel does not know it, and it is past its time"}, nil
		}
		return p.scheduled(r, now, "the channel does not know it yet"), nil
	case channels.QueryThrottled:
		return Decision{Next: now.Add(p.ThrottledWait), Reason: "the channel limits the rate: this merchant backs off"}, nil
	case channels.QueryRetry:
		return p.retry(r, now), nil
	case channels.QueryRefused:
		return Decision{
			Next: now.Add(p.SlowEvery), Alert: true,
			Reason: "the channel refuses our request or credentials: asked again slowly until they are fixed",
		}, nil
	case channels.QueryUncertain:
	default:
		err = fmt.Errorf("%w %q", ErrUnknownOutcome, o)
	}
	return Decision{
		Next: now.Add(p.SlowEvery), Status: Abnormal, Alert: true,
		Reason: "the channel cannot say: nothing is posted, an operator looks, asked again slowly",
	}, err
}

// pastTime reports whether r is past its time: a payment ExpiryGrace past
// its expires_at, a refund NotFoundFor past its creation.
func (p Policy) pastTime(r Registration, now time.Time) bool {
	return !now.Before(p.lastChance(r))
}

// lastChance is when r is past its time: the last scheduled ask, so that
// its final state is seen once.
func (p Policy) lastChance(r Registration) time.Time {
	if r.Kind == channels.QueryPayment && !r.ExpiresAt.IsZero() {
		return r.ExpiresAt.Add(p.ExpiryGrace)
	}
	return r.CreatedAt.Add(p.NotFoundFor)
}

// scheduled returns the next ask on the schedule strictly after now, never
// later than the registration's last chance (lastChance) when that is
// still ahead, so its final state is seen once.
func (p Policy) scheduled(r Registration, now time.Time, why string) Decision {
	offsets, repeat := p.PaymentOffsets, p.PaymentRepeat
	if r.Kind == channels.QueryRefund {
		offsets, repeat = p.RefundOffsets, p.RefundRepeat
	}
	next := time.Time{}
	for _, o := range offsets {
		if at := r.CreatedAt.Add(o); at.After(now) {
			next = at
			break
		}
	}
	if next.IsZero() {
		next = now.Add(repeat)
	}
	if last := p.lastChance(r); last.After(now) && next.After(last) {
		next = last
	}
	return Decision{Next: next, Reason: why}
}

// retry backs off after a transient failure: RetryMin doubled per failure
// in a row, at most RetryMax, never later than the next scheduled ask.
// Past its last chance a registration still needs one answer: retries go
// on at the back-off.
func (p Policy) retry(r Registration, now time.Time) Decision {
	wait := p.RetryMin
	for i := 0; i < r.Retries && wait < p.RetryMax; i++ {
		wait *= 2
	}
	wait = min(wait, p.RetryMax)
	d := p.scheduled(r, now, "")
	next := now.Add(wait)
	if d.Next.Before(next) {
		next = d.Next
	}
	return Decision{Next: next, Reason: fmt.Sprintf("a transient failure (%d in a row): asked again after %s", r.Retries+1, next.Sub(now))}
}
