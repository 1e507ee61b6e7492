package channels

import (
	"errors"
	"fmt"
)

// ErrorKind classifies why a message cannot be handled. Its values are the
// contract's dead-letter kinds and are used verbatim as the x-error-kind
// header, so they never change.
type ErrorKind string

// The dead-letter kinds. The decoder only ever returns the first six and
// KindUnauthenticated; the worker uses KindConflict, KindOverRefund and
// KindTenantMismatch for the same header.
const (
	// KindMalformed: the envelope or body does not have the documented
	// shape (bad JSON or form, a required field missing, an identifier too
	// long or with forbidden characters, a time that does not parse).
	KindMalformed ErrorKind = "malformed"
	// KindUnknownChannel: the envelope names a channel that is not
	// registered (All: WECHAT, ALIPAY, SQB), or one the decoder does not
	// accept (see Accept).
	KindUnknownChannel ErrorKind = "unknown_channel"
	// KindDecryptFailed: a WeChat resource failed AES-256-GCM
	// authentication with every one of the tenant's keys (wrong keys or
	// associated data, tampered ciphertext).
	KindDecryptFailed ErrorKind = "decrypt_failed"
	// KindNoKey: no usable WeChat APIv3 key is configured for the tenant.
	KindNoKey ErrorKind = "no_key"
	// KindInvalidAmount: an amount is not a well-formed, non-negative,
	// in-range number in the channel's unit, or is zero where money must
	// move.
	KindInvalidAmount ErrorKind = "invalid_amount"
	// KindUnsupported: a well-formed message this package does not handle
	// (an unknown event type or status, a currency other than CNY, an
	// encryption algorithm other than AEAD_AES_256_GCM).
	KindUnsupported ErrorKind = "unsupported"
	// KindConflict: the key was already claimed with a different payload
	// fingerprint. Never returned by the decoder.
	KindConflict ErrorKind = "conflict"
	// KindOverRefund: a refund would take more than was paid. Never
	// returned by the decoder.
	KindOverRefund ErrorKind = "over_refund"
	// KindUnauthenticated: a statement event (ContentTypeStatement) whose
	// signature is missing or does not verify with any statement key, or
	// no statement key is configured. Returned by Decoder.DecodeMessage
	// only, before the body is read.
	KindUnauthenticated ErrorKind = "unauthenticated"
	// KindTenantMismatch: the merchant the callback names (see
	// Result.MerchantID) is not bound to the envelope's tenant by the
	// merchant binding, or the callback names none. Never returned by the
	// decoder; the worker checks it before the claim.
	KindTenantMismatch ErrorKind = "tenant_mismatch"
)

// Valid reports whether k is one of the contract's dead-letter kinds.
func (k ErrorKind) Valid() bool {
	switch k {
	case KindMalformed, KindUnknownChannel, KindDecryptFailed, KindNoKey,
		KindInvalidAmount, KindUnsupported, KindConflict, KindOverRefund,
		KindUnauthenticated, KindTenantMismatch:
		return true
	}
	return false
}

// Error is the error type of every decode failure. Kind says how the message
// is dead-lettered; Err carries the readable reason (never a key or secret).
type Error struct {
	Kind ErrorKind
	Err  error
}

// Error returns "<kind>: <reason>".
func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Kind)
	}
	return string(e.Kind) + ": " + e.Err.Error()
}

// Unwrap returns the underlying reason.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of the first *Error in err's chain, and false when
// err carries none (nil included).
func KindOf(err error) (ErrorKind, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind, true
	}
	return "", false
}

// errorf builds an *Error of the given kind with a formatted reason.
func errorf(kind ErrorKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// quote renders an outside value for an error message, shortened so that a
// hostile body cannot blow up a dead-letter header.
func quote(s string) string {
	const limit = 40
	if len(s) > limit {
		return fmt.Sprintf("%q…(%d bytes)", s[:limit], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// wrapKind adds context to a *Error, keeping its kind.
func wrapKind(err error, context string) error {
	kind, ok := KindOf(err)
	if !ok {
		kind = KindMalformed
	}
	var e *Error
	if errors.As(err, &e) {
		err = e.Err
	}
	return &Error{Kind: kind, Err: fmt.Errorf("%s: %w", context, err)}
}
