package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/eventkey"
)

// ContentTypeStatement is the media type of an envelope whose body is a
// canonical event rebuilt from a channel statement (consumer statement
// reconcile --publish-missing), not a callback: the body is the Event as
// JSON (Event.AppendJSON), with the key and fingerprint the channel's
// callback of the same event has. It is accepted for every channel.
const ContentTypeStatement = "application/vnd.paycb.statement+json"

// NewStatementEvent completes an event rebuilt from a statement line: from
// its tenant, channel, type, trade, merchant order and refund numbers,
// amounts and times it sets Currency (CNY), Key and Fingerprint exactly as
// decoding the channel's callback of the same event would, and validates
// the result (Event.Validate). OccurredAt and ReceivedAt are turned to UTC.
//
// Only events a statement describes exactly are accepted: payments of
// every channel and WeChat refunds (RefundAmount is the refund's own
// amount, OrderTotal the order's total). A refund of a cumulative channel
// (Alipay, Shouqianba) fails with KindUnsupported: its callback reports the
// total refunded so far, which a statement's per-refund line does not
// give. Other refusals are a *Error of KindMalformed or KindInvalidAmount.
func NewStatementEvent(ev Event) (Event, error) {
	ev.OccurredAt = ev.OccurredAt.UTC()
	ev.ReceivedAt = ev.ReceivedAt.UTC()
	ev.Currency = CurrencyCNY
	if err := checkStatementShape(ev); err != nil {
		return Event{}, err
	}
	var err error
	switch ev.Type {
	case eventkey.PaymentReceived:
		ev.Key, err = paymentKey(ev.Channel, ev.TradeNo)
	case eventkey.RefundSucceeded:
		ev.Key, err = refundKey(ev.Channel, ev.TradeNo, ev.RefundNo)
	}
	if err != nil {
		return Event{}, err
	}
	ev.Fingerprint = Fingerprint(ev)
	if err := ev.Validate(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// checkStatementShape refuses what a statement cannot rebuild exactly, and
// a raw status that is not a short printable string.
func checkStatementShape(ev Event) error {
	if !ev.Channel.Valid() {
		return errorf(KindMalformed, "statement event channel %s", quote(string(ev.Channel)))
	}
	switch ev.Type {
	case eventkey.PaymentReceived:
	case eventkey.RefundSucceeded:
		if ev.Channel.Cumulative() {
			return errorf(KindUnsupported,
				"statement event: a %s refund is reported by its callback as the total refunded so far; a statement line cannot rebuild it", ev.Channel)
		}
	default:
		return errorf(KindMalformed, "statement event type %s", quote(string(ev.Type)))
	}
	if ev.RawStatus != "" {
		if err := checkID("statement event raw_status", ev.RawStatus); err != nil {
			return err
		}
	}
	return nil
}

// StatementEnvelope returns the Kafka value carrying ev, an event made by
// NewStatementEvent, for tenant ev.TenantID and channel ev.Channel, with
// content type ContentTypeStatement and received_at receivedAt (the time of
// publishing). It fails when ev does not validate or the envelope would
// exceed MaxEnvelopeBytes.
func StatementEnvelope(ev Event, receivedAt time.Time) ([]byte, error) {
	if err := checkStatementShape(ev); err != nil {
		return nil, err
	}
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	value, err := json.Marshal(Envelope{
		TenantID: ev.TenantID, Channel: string(ev.Channel), ReceivedAt: receivedAt.UTC(),
		ContentType: ContentTypeStatement, Body: string(ev.AppendJSON(nil)),
	})
	if err != nil {
		return nil, fmt.Errorf("statement envelope: %w", err)
	}
	if len(value) > MaxEnvelopeBytes {
		return nil, errorf(KindMalformed, "statement envelope is %d bytes, at most %d", len(value), MaxEnvelopeBytes)
	}
	return value, nil
}

// statementAmountFields are the JSON names of the amounts of an Event:
// a non-integer there is KindInvalidAmount, as in a callback.
var statementAmountFields = map[string]bool{"order_total": true, "refund_amount": true, "cumulative_refunded": true}

// decodeStatement reads the body of a ContentTypeStatement envelope: the
// canonical event, which must be of the envelope's tenant and channel, of a
// kind a statement rebuilds exactly (NewStatementEvent), with the key and
// fingerprint its own fields build and amounts in range. Its received_at
// is the envelope's.
func decodeStatement(env Envelope) (Result, error) {
	var ev Event
	if err := decodeJSON([]byte(env.Body), &ev); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && statementAmountFields[te.Field] {
			return Result{}, errorf(KindInvalidAmount, "decode statement event: %s: %w", te.Field, err)
		}
		return Result{}, wrapKind(err, "decode statement event")
	}
	if ev.TenantID != env.TenantID {
		return Result{}, errorf(KindMalformed, "statement event of tenant %d in an envelope of tenant %d", ev.TenantID, env.TenantID)
	}
	if string(ev.Channel) != env.Channel {
		return Result{}, errorf(KindMalformed, "statement event of channel %s in an envelope of channel %s", quote(string(ev.Channel)), env.Channel)
	}
	if err := checkStatementShape(ev); err != nil {
		return Result{}, err
	}
	if ev.BoundMerchant != "" {
		// Only the worker's merchant check sets it, never a message.
		return Result{}, errorf(KindMalformed, "statement event names a bound merchant %s: only the worker's merchant check sets one",
			quote(ev.BoundMerchant))
	}
	if ev.StatementMerchant != "" {
		if err := checkID("statement event statement_merchant", ev.StatementMerchant); err != nil {
			return Result{}, err
		}
	}
	ev.OccurredAt = ev.OccurredAt.UTC()
	ev.ReceivedAt = env.ReceivedAt.UTC()
	if err := ev.Validate(); err != nil {
		return Result{}, wrapKind(err, "statement event")
	}
	res := Result{Event: ev, MerchantID: ev.StatementMerchant}
	if ev.Type == eventkey.RefundSucceeded {
		res.RefundStatus = RefundSuccess
	}
	return res, nil
}
