package channels

import "github.com/paycallback/paycallback/pkg/eventkey"

// What a channel package's decoder builds its Result with. Each is the
// one rule the built-in channels share; a channel package must not write
// its own.

// Errorf returns a *Error of kind whose message is format's.
func Errorf(kind ErrorKind, format string, args ...any) *Error { return errorf(kind, format, args...) }

// WrapKind adds context to a *Error, keeping its kind (KindMalformed for
// an error without one).
func WrapKind(err error, context string) error { return wrapKind(err, context) }

// Quote quotes a value read from a body for an error message, cut short
// when long.
func Quote(s string) string { return quote(s) }

// CheckID validates an identifier read from a body: non-empty, at most
// MaxIDLen bytes, valid UTF-8 without control characters; refusals are
// KindMalformed and name the identifier as name.
func CheckID(name, v string) error { return checkID(name, v) }

// PaymentKey checks tradeNo and builds the payment key of channel ch;
// refusals are KindMalformed.
func PaymentKey(ch Channel, tradeNo string) (eventkey.Key, error) { return paymentKey(ch, tradeNo) }

// RefundKey checks tradeNo and refundNo and builds the refund key of
// channel ch; refusals are KindMalformed.
func RefundKey(ch Channel, tradeNo, refundNo string) (eventkey.Key, error) {
	return refundKey(ch, tradeNo, refundNo)
}

// Ignored builds an ignored Result: ev moves no money, for reason.
func Ignored(reason string, ev Event) Result { return ignored(reason, ev) }

// Unmarshal decodes one JSON document as DecodeJSON does, what naming it
// in errors; a *Error raised inside (an amount's UnmarshalJSON) keeps its
// kind, anything else (a repeated member name included) is KindMalformed.
func Unmarshal(data []byte, v any, what string) error { return unmarshal(data, v, what) }

// DecodeJSON is json.Unmarshal reading every JSON document from outside
// one way only: a member name that repeats within one object, exactly or
// differing only in case, at any depth, fails with a *Error of
// KindMalformed that names it (never a value); a document that is not
// JSON fails with json.Unmarshal's *json.SyntaxError; otherwise it returns
// what json.Unmarshal does.
func DecodeJSON(data []byte, v any) error { return decodeJSON(data, v) }

// AmountError is the error of an amount s that err refused: it names s
// and unwraps to err. Wrap it in a *Error of KindInvalidAmount.
func AmountError(s string, err error) error { return errWithValue(s, err) }

// ParseUint parses a non-negative decimal integer of ASCII digits, without
// sign or leading zeros, up to limit.
func ParseUint(s string, limit int64) (int64, error) { return parseUint(s, limit) }
