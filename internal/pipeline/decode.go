package pipeline

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
)

// decode turns msg into a canonical event (see Decoder); the WeChat key
// that decrypted it is counted (paycb_wechat_decrypt_key_total) once per
// message, whatever its retries.
func (p *Pipeline) decode(msg kafka.Message, st *MessageState) (channels.Result, error) {
	res, err := p.Decoder.DecodeMessage(msg.Value, statementSignature(msg))
	if k := res.APIv3Key; k.Position > 0 && !st.keyCounted {
		p.Metrics.WeChatDecrypted(res.Event.TenantID, k.Position, k.Keys)
		st.keyCounted = true
	}
	return res, err
}

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
	if q := res.Query; q != nil && q.Answer.Outcome == channels.QueryClosed && p.QueryClosed != nil {
		sctx, cancel := p.statementContext(ctx)
		err := p.QueryClosed.QueryClosed(sctx, *q)
		cancel()
		if err != nil {
			return failed(metrics.StageRefundUpdate, fmt.Errorf("close the registration query answer %s: %w", q.Answer.RawState, err))
		}
	}
	p.Logger.Debug("ignored event", "tenant", ev.TenantID, "channel", string(ev.Channel), "reason", res.IgnoreReason)
	p.Metrics.Event(string(ev.Channel), string(ev.Type), metrics.OutcomeIgnored)
	return nil
}

// QueryCloser is told of each authenticated query answer that says its
// order ended unpaid or its refund failed (channels.QueryClosed), once the
// answer passed the merchant check and before the message is done: the
// registration the query was sent for is closed there, and no query is
// sent for it again. It must be idempotent (a redelivered answer is told
// again) and an error retries the message. The worker's is
// registrations.Closer (wired in internal/app); with none, a closed answer
// is only counted ignored.
type QueryCloser interface {
	QueryClosed(ctx context.Context, q channels.QueryAnswered) error
}
