package idempotent

import "github.com/paycallback/paycallback/pkg/eventkey"

// The claim store's keys and event types are pkg/eventkey's: the names
// below let callers of the store keep writing idempotent.Key. The builder,
// its rules and its tests live in pkg/eventkey alone.

// MaxKeyLen is eventkey.MaxKeyLen: the largest key in bytes, the size of the
// VARBINARY(191) key column.
const MaxKeyLen = eventkey.MaxKeyLen

// EventType is eventkey.EventType, stored on every claim.
type EventType = eventkey.EventType

// The canonical event types of the contract (eventkey's).
const (
	PaymentReceived = eventkey.PaymentReceived
	RefundSucceeded = eventkey.RefundSucceeded
)

// Key is eventkey.Key, a validated idempotency key.
type Key = eventkey.Key

// ErrInvalidKey is eventkey.ErrInvalidKey.
var ErrInvalidKey = eventkey.ErrInvalidKey

// NewPaymentKey is eventkey.NewPaymentKey.
func NewPaymentKey(channel, tradeNo string) (Key, error) {
	return eventkey.NewPaymentKey(channel, tradeNo)
}

// NewRefundKey is eventkey.NewRefundKey.
func NewRefundKey(channel, tradeNo, refundNo string) (Key, error) {
	return eventkey.NewRefundKey(channel, tradeNo, refundNo)
}

// ParseKey is eventkey.ParseKey.
func ParseKey(s string) (Key, EventType, error) { return eventkey.ParseKey(s) }
