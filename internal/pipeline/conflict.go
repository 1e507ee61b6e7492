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
