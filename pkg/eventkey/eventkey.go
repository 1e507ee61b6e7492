package eventkey

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the largest idempotency key in bytes. It matches the
// VARBINARY(191) key column; longer keys are refused, never truncated.
const MaxKeyLen = 191

// EventType is a canonical event type. It is part of every key and is stored
// on every claim.
type EventType string

// The canonical event types of the contract.
const (
	PaymentReceived EventType = "PAYMENT_RECEIVED"
	RefundSucceeded EventType = "REFUND_SUCCEEDED"
)

// Valid reports whether t is one of the contract's event types.
func (t EventType) Valid() bool { return t == PaymentReceived || t == RefundSucceeded }

// Key is a validated idempotency key in the contract's format:
//
//	<CHANNEL>:<channel trade no>:PAYMENT_RECEIVED
//	<CHANNEL>:<channel trade no>:REFUND_SUCCEEDED:<refund no>
//
// Keys compare byte for byte: "rf-1" and "RF-1" are two refunds. The zero
// value is not a valid key; build keys with NewPaymentKey, NewRefundKey or
// ParseKey.
type Key string

// String returns the key as stored.
func (k Key) String() string { return string(k) }

// ErrInvalidKey is returned, wrapped with the reason, for every key or key
// part the builder refuses. Test for it with errors.Is.
var ErrInvalidKey = errors.New("invalid idempotency key")

// NewPaymentKey builds the key of a PAYMENT_RECEIVED event. channel and
// tradeNo must be non-empty and free of whitespace, control characters and
// ':'. The error wraps ErrInvalidKey.
func NewPaymentKey(channel, tradeNo string) (Key, error) {
	if err := checkParts(channel, tradeNo); err != nil {
		return "", err
	}
	return finish(channel + ":" + tradeNo + ":" + string(PaymentReceived))
}

// NewRefundKey builds the key of a REFUND_SUCCEEDED event. channel and
// tradeNo follow NewPaymentKey's rules; refundNo must be non-empty and free
// of whitespace and control characters, and may contain ':'. The error wraps
// ErrInvalidKey.
func NewRefundKey(channel, tradeNo, refundNo string) (Key, error) {
	if err := checkParts(channel, tradeNo); err != nil {
		return "", err
	}
	if err := checkPart("refund no", refundNo, true); err != nil {
		return "", err
	}
	return finish(channel + ":" + tradeNo + ":" + string(RefundSucceeded) + ":" + refundNo)
}

// ParseKey validates s as a key in the contract's format and returns it with
// its event type. The error wraps ErrInvalidKey.
func ParseKey(s string) (Key, EventType, error) {
	parts := strings.SplitN(s, ":", 4)
	if len(parts) < 3 {
		return "", "", fmt.Errorf("%w: %q has fewer than three parts", ErrInvalidKey, s)
	}
	switch EventType(parts[2]) {
	case PaymentReceived:
		if len(parts) != 3 {
			return "", "", fmt.Errorf("%w: payment key %q has a fourth part", ErrInvalidKey, s)
		}
		k, err := NewPaymentKey(parts[0], parts[1])
		return k, PaymentReceived, err
	case RefundSucceeded:
		if len(parts) != 4 {
			return "", "", fmt.Errorf("%w: refund key %q has no refund number", ErrInvalidKey, s)
		}
		k, err := NewRefundKey(parts[0], parts[1], parts[3])
		return k, RefundSucceeded, err
	default:
		return "", "", fmt.Errorf("%w: unknown event type %q", ErrInvalidKey, parts[2])
	}
}

func checkParts(channel, tradeNo string) error {
	if err := checkPart("channel", channel, false); err != nil {
		return err
	}
	return checkPart("channel trade no", tradeNo, false)
}

// checkPart refuses empty parts, invalid UTF-8, whitespace and control
// characters, and ':' unless colonOK.
func checkPart(name, v string, colonOK bool) error {
	if v == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, name)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, name)
	}
	for _, r := range v {
		switch {
		case unicode.IsSpace(r):
			return fmt.Errorf("%w: %s %q contains whitespace", ErrInvalidKey, name, v)
		case unicode.IsControl(r) || r == utf8.RuneError:
			return fmt.Errorf("%w: %s %q contains a control character", ErrInvalidKey, name, v)
		case r == ':' && !colonOK:
			return fmt.Errorf("%w: %s %q contains ':'", ErrInvalidKey, name, v)
		}
	}
	return nil
}

func finish(s string) (Key, error) {
	if len(s) > MaxKeyLen {
		return "", fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidKey, len(s), MaxKeyLen)
	}
	return Key(s), nil
}
