package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Registrar records registrations (content type
// channels.ContentTypeRegistration); *settlement.Service is the
// implementation. Each call commits a transaction of its own.
type Registrar interface {
	// RegisterPayment records a payment registration; the same one again
	// changes nothing, one that contradicts it fails wrapping
	// settlement.ErrRegistrationConflict.
	RegisterPayment(ctx context.Context, r settlement.PaymentRequest) (settlement.PaymentRegistration, error)
	// RegisterRefund records a refund registration; see
	// settlement.Service.RegisterRefund for its errors.
	RegisterRefund(ctx context.Context, r settlement.RefundRequest) (settlement.Registration, error)
}

// registrar is Pipeline.Registrar, or the Settler when it registers too;
// nil when neither does.
func (p *Pipeline) registrar() Registrar {
	if p.Registrar != nil {
		return p.Registrar
	}
	r, _ := p.Settler.(Registrar)
	return r
}

// registrationEventType is the event_type label a registration is counted
// under in paycb_events_total: the event it announces.
func registrationEventType(m *channels.RegistrationMessage) string {
	if m.Kind == channels.RegistrationRefund {
		return string(idempotent.RefundSucceeded)
	}
	return string(idempotent.PaymentReceived)
}

// register takes a decoded registration to its outcome: checked against
// the merchant binding (else dead-lettered tenant_mismatch), then recorded
// (Registrar). A registration recorded now or before, the same, is done
// and counted ignored (it moves no money and makes no claim); one that
// contradicts an earlier registration is dead-lettered conflict and
// counted conflict; a refund registration of a trade with no posted
// payment or beyond what is refundable is dead-lettered conflict too (a
// redrive after the payment settles records it). Any other error leaves
// the message for redelivery.
func (p *Pipeline) register(ctx context.Context, msg kafka.Message, res channels.Result) error {
	m, ev := res.Registration, res.Event
	eventType := registrationEventType(m)
	if reason := p.checkRegistrationMerchant(res); reason != "" {
		if err := p.deadLetter(ctx, msg, channels.KindTenantMismatch, reason, ev); err != nil {
			return err
		}
		p.Logger.Error("registration of a merchant not bound to its tenant dead-lettered", "kind", string(channels.KindTenantMismatch),
			"tenant", ev.TenantID, "channel", string(ev.Channel), "merchant", m.MerchantID, "merchant_order_no", m.MerchantOrderNo,
			"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
		p.Metrics.Event(string(ev.Channel), eventType, metrics.OutcomeDeadLettered)
		return nil
	}
	reg := p.registrar()
	if reg == nil {
		reason := "this worker records no registrations (no registrar configured)"
		if err := p.deadLetter(ctx, msg, channels.KindUnsupported, reason, ev); err != nil {
			return err
		}
		p.Metrics.Event(string(ev.Channel), eventType, metrics.OutcomeDeadLettered)
		return nil
	}
	sctx, cancel := p.statementContext(ctx)
	var err error
	switch m.Kind {
	case channels.RegistrationRefund:
		_, err = reg.RegisterRefund(sctx, settlement.RefundRequest{
			TenantID: ev.TenantID, Channel: ev.Channel, TradeNo: m.TradeNo, RefundNo: m.RefundNo, Amount: m.Amount,
			MerchantOrderNo: m.MerchantOrderNo,
		})
	default:
		_, err = reg.RegisterPayment(sctx, settlement.PaymentRequest{
			TenantID: ev.TenantID, Channel: ev.Channel, MerchantID: m.MerchantID, MerchantOrderNo: m.MerchantOrderNo,
			Amount: m.Amount, Currency: m.Currency, CreatedAt: m.CreatedAt, ExpiresAt: m.ExpiresAt,
		})
	}
	cancel()
	switch {
	case err == nil:
		p.Metrics.Event(string(ev.Channel), eventType, metrics.OutcomeIgnored)
		return nil
	case errors.Is(err, settlement.ErrRegistrationConflict), errors.Is(err, settlement.ErrRefundNoReused),
		errors.Is(err, settlement.ErrNotPaid), errors.Is(err, settlement.ErrExceedsRefundable):
		reason := fmt.Sprintf("%s registration of %s %s (tenant %d) not recorded: %v",
			m.Kind, ev.Channel, registrationName(m), ev.TenantID, err)
		if err := p.deadLetter(ctx, msg, channels.KindConflict, reason, ev); err != nil {
			return err
		}
		p.Logger.Error("registration dead-lettered", "kind", string(channels.KindConflict), "reason", reason,
			"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset)
		p.Metrics.Event(string(ev.Channel), eventType, metrics.OutcomeConflict)
		return nil
	case errors.Is(err, settlement.ErrInvalidRequest):
		// The decoder checked what the registrar checks; a request it
		// still refuses is refused for good.
		if err := p.deadLetter(ctx, msg, channels.KindMalformed, err.Error(), ev); err != nil {
			return err
		}
		p.Metrics.Event(string(ev.Channel), eventType, metrics.OutcomeDeadLettered)
		return nil
	default:
		return failed(metrics.StageRegister, fmt.Errorf("register %s %s: %w", m.Kind, registrationName(m), err))
	}
}

// registrationName names what m registers: the merchant order number of a
// payment, trade and refund number of a refund.
func registrationName(m *channels.RegistrationMessage) string {
	if m.Kind == channels.RegistrationRefund {
		return m.TradeNo + "/" + m.RefundNo
	}
	return m.MerchantOrderNo
}

// checkRegistrationMerchant returns why res's registration names a
// merchant not bound to its envelope's tenant, "" when it is bound or no
// binding is configured.
func (p *Pipeline) checkRegistrationMerchant(res channels.Result) string {
	if p.Merchants == nil {
		return ""
	}
	ev := res.Event
	owner, ok := p.Merchants.Current().TenantOf(ev.Channel, res.MerchantID)
	switch {
	case !ok:
		return fmt.Sprintf("the registration's %s merchant %s is not bound to tenant %d: %s binds it to no tenant",
			ev.Channel, channels.Quote(res.MerchantID), ev.TenantID, p.Merchants.Path())
	case owner != ev.TenantID:
		return fmt.Sprintf("the registration's %s merchant %s is not bound to tenant %d: %s binds it to tenant %d",
			ev.Channel, channels.Quote(res.MerchantID), ev.TenantID, p.Merchants.Path(), owner)
	}
	return ""
}

// sameRefundTrade reports whether a money event of run belongs to the trade
// the refund registration m names.
func sameRefundTrade(run []moneyItem, ev channels.Event, m *channels.RegistrationMessage) bool {
	if m.Kind != channels.RegistrationRefund {
		return false
	}
	ev.TradeNo = m.TradeNo
	return sameTrade(run, ev)
}
