package registrations

import (
	"context"
	"fmt"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Closer closes the registration a closed query answer is about: the
// worker's pipeline.QueryCloser. A closed answer to a payment query moves
// the payment registration of (tenant, channel, merchant order number) to
// CLOSED; to a refund query, the refund registration of (tenant, channel,
// trade number, refund number). Each move is Store's conditional update,
// so a redelivered answer changes nothing, and a registration already
// SUCCEEDED stays so (the money moved: no answer undoes it), as does one
// already CLOSED or EXPIRED.
type Closer struct {
	Store *Store
}

// QueryClosed closes the registration q was asked for. An answer that
// names no registration (a payment asked by trade number alone, a refund
// without its trade number) closes nothing: registrations are keyed by
// what it does not carry. An error is the database's, and retries the
// message.
func (c Closer) QueryClosed(ctx context.Context, q channels.QueryAnswered) error {
	t := q.Target
	switch t.Kind {
	case channels.QueryPayment:
		if t.MerchantOrderNo == "" {
			return nil
		}
		if _, err := c.Store.SetPaymentStatus(ctx, t.TenantID, t.Channel, t.MerchantOrderNo, settlement.RegistrationClosed); err != nil {
			return fmt.Errorf("close on a closed query answer: %w", err)
		}
	case channels.QueryRefund:
		if t.TradeNo == "" || t.RefundNo == "" {
			return nil
		}
		if _, err := c.Store.SetRefundStatus(ctx, t.TenantID, t.Channel, t.TradeNo, t.RefundNo, settlement.RegistrationClosed); err != nil {
			return fmt.Errorf("close on a closed query answer: %w", err)
		}
	}
	return nil
}
