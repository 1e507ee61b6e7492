package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// A Shouqianba refund or cancel that the receiver forwards as the refund or
// cancel API's answer names no merchant: the published answers carry no
// terminal_sn (the terminal is in the request's Authorization header). With
// a merchant binding, checkMerchant refuses every callback that names none;
// such a refund is then checked against its trade instead: the trade's
// order row records the merchant its payment was checked and bound for
// (settlement.Order.BoundMerchantID, from channels.Event.BoundMerchant), and
// the refund is the tenant's when that merchant still is. The rule, and
// what happens when the payment is not in yet, is checkMerchantless's.

// DefaultMerchantlessHold is Pipeline.MerchantlessHold's default: long
// enough for a payment callback that a refund answer overtook in the
// receiver or on another partition, and shorter than the default
// stall_threshold (1m), so that a held refund alone never reports its
// partition stalled.
const DefaultMerchantlessHold = 30 * time.Second

// TradeMerchants tells what a trade's order row records of its payment's
// merchant check: the merchant the payment was checked and bound for (""
// when none) and whether a payment is posted. *settlement.Service
// implements it (Service.TradeMerchant); the pipeline asks its Settler.
type TradeMerchants interface {
	TradeMerchant(ctx context.Context, tenantID int64, ch channels.Channel, tradeNo string) (merchant string, paid bool, err error)
}

// merchantCheck is checkMerchant, with the one exception a refund that
// names no merchant may have (checkMerchantless). It returns why the
// message is refused (dead-lettered tenant_mismatch), "" when it passes,
// or an error: one wrapping ErrClaimInFlight holds the message (see
// checkMerchantless), any other is a database error and the message is
// retried.
func (p *Pipeline) merchantCheck(ctx context.Context, res channels.Result, st *MessageState) (string, error) {
	reason := p.checkMerchant(res)
	if reason != "" && res.Ignored && res.MerchantID == "" {
		// An answer that moves no money (a REFUND_ERROR, a CREATED) and
		// names no merchant has nothing to bind or refuse: it is ignored as
		// it would be without a binding. One naming another tenant's
		// merchant is still refused.
		return "", nil
	}
	if reason == "" || res.MerchantID != "" || !refundMayNameNoMerchant(res) {
		return reason, nil
	}
	return p.checkMerchantless(ctx, res, st)
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
	case !p.Merchants.Current().AppAllowed(ev.TenantID, ev.Channel, res.AppID):
		spec, _ := channels.Lookup(ev.Channel) // a decoded callback's channel is registered
		return fmt.Sprintf("the %s callback of tenant %d is of %s %s, not one of the tenant's (%s in %s)",
			ev.Channel, ev.TenantID, spec.AppField, channels.Quote(res.AppID),
			strings.Join(p.Merchants.Current().Apps(ev.TenantID, ev.Channel), ", "), p.Merchants.Path())
	}
	return ""
}

// merchantField names the field a channel's callback names its merchant
// by (channels.Spec.MerchantField).
func merchantField(ch channels.Channel) string {
	spec, _ := channels.Lookup(ch) // a decoded callback's channel is registered
	return spec.MerchantField
}

// refundMayNameNoMerchant reports whether res is a refund or cancel of a
// channel whose refund answers may carry no merchant
// (channels.Spec.RefundMayNameNoMerchant; docs/channels.md).
func refundMayNameNoMerchant(res channels.Result) bool {
	if res.Ignored || res.Event.Type != idempotent.RefundSucceeded {
		return false
	}
	spec, ok := channels.Lookup(res.Event.Channel)
	return ok && spec.RefundMayNameNoMerchant
}

// boundMerchant is the merchant the check passed res for, which the event
// carries to its claim and, for a payment, to its order row: the merchant
// the callback names under a binding; for a statement event the merchant
// its line names (checked at import), while the binding still gives it to
// the event's tenant; "" when nothing was checked (no binding) or it names
// none.
func (p *Pipeline) boundMerchant(res channels.Result) string {
	if p.Merchants == nil || res.MerchantID == "" {
		return ""
	}
	if res.FromStatement {
		owner, ok := p.Merchants.Current().TenantOf(res.Event.Channel, res.MerchantID)
		if !ok || owner != res.Event.TenantID {
			return ""
		}
	}
	return res.MerchantID
}

// checkMerchantless decides a Shouqianba refund or cancel that names no
// merchant, under a merchant binding, by its trade's order row (read from
// the pool):
//
//   - the trade's payment was checked for a merchant that the binding
//     still gives the envelope's tenant: the refund is the tenant's, and
//     passes;
//   - a cancel of a trade with no payment posted passes: it posts nothing
//     (its claim remembers it), and it moves money only together with a
//     payment of the trade settled later, which is checked itself before
//     anything is posted;
//   - the payment was checked for a merchant the binding now gives another
//     tenant, or none: refused (tenant_mismatch), as that merchant's own
//     callback would be;
//   - a payment is posted that was never checked (settled before the
//     binding or before the order row recorded it, or rebuilt from a
//     statement): refused at once, saying so; nothing that may come later
//     can bind the trade;
//   - no payment is posted yet (a refund that overtook its payment): the
//     message is held, as a message whose claim is in flight is (an error
//     wrapping ErrClaimInFlight): nothing claimed, nothing posted, nothing
//     committed past it, the partition going on with the messages after it
//     and looking at it again after each batch, so that a payment arriving
//     meanwhile, on any partition, lets it settle as it would have in
//     order. Held for Pipeline.MerchantlessHold since it was first looked
//     at; then refused (tenant_mismatch) with a reason of its own: redriven
//     once the payment is posted, it settles.
//
// Never posted on a guess, never dropped: what is refused is a dead letter,
// which a redrive brings back.
func (p *Pipeline) checkMerchantless(ctx context.Context, res channels.Result, st *MessageState) (string, error) {
	ev := res.Event
	what := fmt.Sprintf("the %s refund %s of trade %s (tenant %d) %s (%s: a forwarded refund or cancel answer)",
		ev.Channel, ev.RefundNo, ev.TradeNo, ev.TenantID, namesNoMerchant, merchantField(ev.Channel))
	trades, ok := p.Settler.(TradeMerchants)
	var merchant string
	var paid bool
	if ok {
		sctx, cancel := p.statementContext(ctx)
		var err error
		merchant, paid, err = trades.TradeMerchant(sctx, ev.TenantID, ev.Channel, ev.TradeNo)
		cancel()
		if err != nil {
			return "", fmt.Errorf("merchant check of %s: %w", ev.Key, err)
		}
	}
	switch {
	case merchant != "":
		owner, bound := p.Merchants.Current().TenantOf(ev.Channel, merchant)
		switch {
		case bound && owner == ev.TenantID:
			return "", nil
		case bound:
			return fmt.Sprintf("%s, and its payment was checked for merchant %s, which %s now binds to tenant %d",
				what, merchant, p.Merchants.Path(), owner), nil
		default:
			return fmt.Sprintf("%s, and its payment was checked for merchant %s, which %s now binds to no tenant",
				what, merchant, p.Merchants.Path()), nil
		}
	case paid:
		return fmt.Sprintf("%s, and the trade's payment was posted without a merchant check (before %s bound merchants, "+
			"before orders recorded the merchant checked, or rebuilt from a statement), so it cannot be bound to the tenant; "+
			"it is not posted: have the receiver add terminal_sn to the answer and publish it again",
			what, p.Merchants.Path()), nil
	case ev.IsCancel():
		// Posts nothing now; a later payment is checked itself.
		return "", nil
	}
	hold := p.MerchantlessHold
	if hold <= 0 {
		hold = DefaultMerchantlessHold
	}
	now := time.Now()
	if st.merchantHeldAt.IsZero() {
		st.merchantHeldAt = now
	}
	if waited := now.Sub(st.merchantHeldAt); waited < hold {
		return "", fmt.Errorf("%s and no payment of the trade checked for the tenant is posted yet: held up to %s for it: %w",
			what, hold, ErrClaimInFlight)
	}
	return fmt.Sprintf("%s, and no payment of the trade checked and bound to the tenant was posted within %s; %s binds merchants "+
		"to tenants, so it is not posted: the worker redrives it once the payment is posted", what, hold, p.Merchants.Path()), nil
}
