package pipeline

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
)

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
