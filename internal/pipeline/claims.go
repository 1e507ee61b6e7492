package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
// read would be two (lookupFirst).
func (p *Pipeline) acquire(ctx context.Context, leaders []moneyItem, states []MessageState) ([]idempotent.Result, error) {
	look := lookupFirst(leaders, states)
	results, inserted, err := p.claimAll(ctx, leaders, look)
	if err != nil {
		// The insert may have committed without an answer.
		for _, j := range inserted {
			states[leaders[j].i].acquireUnknown = true
		}
		return nil, err
	}
	return results, nil
}

// lookupFirst is acquire's rule: the keys of leaders are looked up before
// they are inserted when there are several, or when an earlier attempt
// found the one key claimed.
func lookupFirst(leaders []moneyItem, states []MessageState) bool {
	return len(leaders) > 1 || (len(leaders) == 1 && states[leaders[0].i].claimSeen)
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
		buf = it.ev.AppendJSON(buf)
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

// conflict dead-letters msg, whose event ev has another fingerprint than
// the claim of its key, with an x-error naming each differing field and
// both values. first is the claim's event when this batch made the claim
// (nil otherwise: it is read from the claim's stored event, or, once purge
// has cleared that, from the trade's order row).
func (p *Pipeline) conflict(ctx context.Context, msg kafka.Message, ev channels.Event, claim idempotent.Record, first *channels.Event) error {
	diff, err := p.conflictDiff(ctx, ev, claim, first)
	if err != nil {
		return failed(metrics.StageDeadLetter, fmt.Errorf("read what key %s was first claimed with: %w", ev.Key, err))
	}
	reason := fmt.Sprintf("key %s already claimed (by %s) with another payload: %s; fingerprint %s, this message's %s",
		ev.Key, claim.Source, diff, claim.Fingerprint, ev.Fingerprint)
	if err := p.deadLetter(ctx, msg, channels.KindConflict, reason, ev); err != nil {
		return err
	}
	p.Logger.Warn("conflicting event dead-lettered", "tenant", ev.TenantID, "key", string(ev.Key),
		"offset", msg.Offset, "claimed_by", claim.Source.String(), "differs", diff)
	p.count(ev, metrics.OutcomeConflict)
	return nil
}

// conflictDiff says which of the fingerprinted fields of ev differ from
// what the key was first claimed with, first value against ev's. An error
// is a failed read (the message is retried); a stored event that cannot be
// decoded or a trade without an order row is said in the text instead.
func (p *Pipeline) conflictDiff(ctx context.Context, ev channels.Event, claim idempotent.Record, first *channels.Event) (string, error) {
	if first != nil {
		return eventDiff(*first, ev), nil
	}
	stored := claim.Event
	if stored == nil && p.Claims != nil {
		// Lookups return the stored event of ACQUIRED claims only.
		rec, err := p.Claims.Get(ctx, ev.TenantID, ev.Key)
		if err != nil {
			return "", err
		}
		stored = rec.Event
	}
	if stored != nil {
		var was channels.Event
		if err := json.Unmarshal(stored, &was); err != nil {
			return "the first claim's stored event is unreadable (" + err.Error() + ")", nil
		}
		return eventDiff(was, ev), nil
	}
	if p.Orders == nil {
		return "the first claim's stored event was purged", nil
	}
	ord, err := p.Orders(ctx, ev.TenantID, ev.Channel, ev.TradeNo)
	if errors.Is(err, settlement.ErrOrderNotFound) {
		return "the first claim's stored event was purged and the trade has no order row", nil
	}
	if err != nil {
		return "", err
	}
	return orderDiff(ord, ev), nil
}

// eventDiff names the fingerprinted fields in which ev differs from was.
func eventDiff(was, ev channels.Event) string {
	var d []string
	amount := func(name string, a, b int64) {
		if a != b {
			d = append(d, fmt.Sprintf("%s differs: first %d, this message %d", name, a, b))
		}
	}
	amount("amount (order_total)", was.OrderTotal, ev.OrderTotal)
	amount("amount (refund_amount)", was.RefundAmount, ev.RefundAmount)
	amount("amount (cumulative_refunded)", was.CumulativeRefunded, ev.CumulativeRefunded)
	if was.Currency != ev.Currency {
		d = append(d, fmt.Sprintf("currency differs: first %q, this message %q", was.Currency, ev.Currency))
	}
	if was.MerchantOrderNo != ev.MerchantOrderNo {
		d = append(d, fmt.Sprintf("merchant_order_no differs: first %q, this message %q", was.MerchantOrderNo, ev.MerchantOrderNo))
	}
	if len(d) == 0 {
		return "no fingerprinted field differs from the first claim's stored event"
	}
	return strings.Join(d, "; ")
}

// orderDiff names the fields in which ev differs from the trade's order
// row (what the first claim's stored event held before purge cleared it):
// the order total, currency and merchant order number. The row keeps no
// refund's own amount, so when those match, a refund's amount is what
// differs.
func orderDiff(ord settlement.Order, ev channels.Event) string {
	const purged = "the first claim's stored event was purged, compared with the order row: "
	var d []string
	if ord.Amount != ev.OrderTotal {
		d = append(d, fmt.Sprintf("amount (order_total) differs: order row %d, this message %d", ord.Amount, ev.OrderTotal))
	}
	if ord.Currency != ev.Currency {
		d = append(d, fmt.Sprintf("currency differs: order row %q, this message %q", ord.Currency, ev.Currency))
	}
	if ord.MerchantOrderNo != ev.MerchantOrderNo {
		d = append(d, fmt.Sprintf("merchant_order_no differs: order row %q, this message %q", ord.MerchantOrderNo, ev.MerchantOrderNo))
	}
	if len(d) > 0 {
		return purged + strings.Join(d, "; ")
	}
	if ev.Type == idempotent.RefundSucceeded {
		amount, value := "refund_amount", ev.RefundAmount
		if ev.Cumulative() {
			amount, value = "cumulative_refunded", ev.CumulativeRefunded
		}
		return fmt.Sprintf("%sorder total, currency and merchant_order_no match, so the refund's amount (%s) differs: this message %d (the order row keeps no refund's own amount)",
			purged, amount, value)
	}
	return purged + "order total, currency and merchant_order_no match it"
}
