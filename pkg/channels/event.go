package channels

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/paycallback/paycallback/pkg/eventkey"
)

// CurrencyCNY is the only currency the decoder accepts; anything else is
// KindUnsupported.
const CurrencyCNY = "CNY"

// MaxAmount is the largest amount, in fen, the decoder accepts anywhere:
// 10^12 fen, ten billion yuan. Larger values are KindInvalidAmount.
const MaxAmount int64 = 1_000_000_000_000

// MaxIDLen caps channel trade numbers, merchant order numbers and refund
// numbers, in bytes. Longer identifiers are KindMalformed.
const MaxIDLen = 64

// minTime and maxTime bound every time the decoder accepts (occurred-at,
// received_at): outside [2000-01-01, 2100-01-01) UTC a time is
// KindMalformed, which also keeps every event JSON-encodable.
var (
	minTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// checkTime refuses times outside [minTime, maxTime).
func checkTime(what string, t time.Time) error {
	if t.Before(minTime) || !t.Before(maxTime) {
		return errorf(KindMalformed, "%s %s is outside [2000, 2100)", what, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Event is the canonical event one money-moving callback becomes. It is
// stored with the claim and re-read to settle without Kafka, so it
// round-trips through encoding/json unchanged.
//
// Amounts are int64 fen exactly as the channel reported them; which of the
// refund amounts is set depends on the channel (see Cumulative).
type Event struct {
	// TenantID is the envelope's tenant.
	TenantID int64 `json:"tenant_id"`
	// Channel is the envelope's channel.
	Channel Channel `json:"channel"`
	// Type is PAYMENT_RECEIVED or REFUND_SUCCEEDED.
	Type eventkey.EventType `json:"type"`
	// TradeNo is the channel's trade number (WeChat transaction_id, Alipay
	// trade_no, Shouqianba sn); unique only within the channel.
	TradeNo string `json:"trade_no"`
	// MerchantOrderNo is the merchant's order number (out_trade_no,
	// client_sn); not unique across channels.
	MerchantOrderNo string `json:"merchant_order_no"`
	// RefundNo is the refund's number for refunds (WeChat out_refund_no,
	// Alipay out_biz_no, Shouqianba refund_request_no or its fallbacks,
	// "CANCEL" for a Shouqianba reversal); empty for payments. Compared byte
	// for byte.
	RefundNo string `json:"refund_no"`
	// OrderTotal is the order's total as reported, in fen.
	OrderTotal int64 `json:"order_total"`
	// RefundAmount is this refund's own amount in fen on WeChat refunds;
	// 0 otherwise.
	RefundAmount int64 `json:"refund_amount"`
	// CumulativeRefunded is the amount refunded so far, as reported, in fen
	// on Alipay and Shouqianba refunds; 0 otherwise. Settlement works out
	// the refund's own amount from it.
	CumulativeRefunded int64 `json:"cumulative_refunded"`
	// Currency is the ISO 4217 code; always CNY.
	Currency string `json:"currency"`
	// OccurredAt is when the channel says the payment or refund happened,
	// in UTC, within [2000, 2100).
	OccurredAt time.Time `json:"occurred_at"`
	// ReceivedAt is the envelope's received_at, in UTC, within [2000, 2100).
	ReceivedAt time.Time `json:"received_at"`
	// RawStatus is the channel's own status (WeChat trade_state or
	// refund_status, Alipay trade_status, Shouqianba order_status). It is
	// informational and not part of the fingerprint.
	RawStatus string `json:"raw_status"`
	// Key is the idempotency key; empty on ignored results.
	Key eventkey.Key `json:"key"`
	// Fingerprint is Fingerprint(e), fixed when the event was decoded.
	Fingerprint string `json:"fingerprint"`
	// BoundMerchant is the merchant the worker's merchant check passed the
	// event for: Result.MerchantID, bound to TenantID by
	// PAYCB_TENANT_MERCHANTS_FILE. The decoder never sets it (nor accepts
	// it in a statement event); the worker sets it, or clears it, after the
	// check and before the claim, so it is stored with the claim and an
	// orphan settled by the sweeper keeps it. Settlement records a
	// payment's on the trade's order row, where a Shouqianba refund or
	// cancel that names no merchant is checked against it. Empty when
	// nothing was checked. Not part of the fingerprint.
	BoundMerchant string `json:"bound_merchant,omitempty"`
	// StatementMerchant is, on a statement event only, the merchant its
	// statement line names (Spec.StatementMerchantField), which the import
	// checked against the binding; it is signed with the event. The worker
	// binds a statement payment to it (BoundMerchant) while the binding
	// still gives it to the tenant, so that a refund naming no merchant
	// can be checked against the trade as for a callback's payment. Not
	// part of the fingerprint.
	StatementMerchant string `json:"statement_merchant,omitempty"`
}

// Cumulative reports whether the event's refund amount is cumulative
// (CumulativeRefunded, Alipay and Shouqianba) rather than per refund
// (RefundAmount, WeChat).
func (e Event) Cumulative() bool { return e.Channel.Cumulative() }

// Fingerprint returns the payload fingerprint of e: the hex SHA-256 of
// exactly the event type, OrderTotal, RefundAmount, CumulativeRefunded,
// Currency and MerchantOrderNo, each string length-prefixed and each amount
// as 8 big-endian bytes, so no two different payloads share an encoding.
// Delivery fields, times, statuses and the raw body never enter it.
func Fingerprint(e Event) string {
	var buf [256]byte
	b := buf[:0]
	b = appendString(b, string(e.Type))
	b = appendInt64(b, e.OrderTotal)
	b = appendInt64(b, e.RefundAmount)
	b = appendInt64(b, e.CumulativeRefunded)
	b = appendString(b, e.Currency)
	b = appendString(b, e.MerchantOrderNo)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendInt64 appends v's two's-complement bytes, an injective encoding of
// every int64 (negative amounts never reach a decoded event anyway).
func appendInt64(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)) //nolint:gosec // bit-for-bit reinterpretation is the point
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s))) //nolint:gosec // lengths are capped far below 2^32
	return append(b, s...)
}

// Validate checks that e is a well-formed money-moving event: a valid type,
// channel, tenant and identifiers, a key that is exactly the one its fields
// build, amounts in range with the right one set for the channel, CNY, UTC
// times, and a fingerprint equal to Fingerprint(e). It is meant for events
// re-read from storage; the error is a *Error of KindMalformed or
// KindInvalidAmount.
func (e Event) Validate() error {
	if e.TenantID <= 0 {
		return errorf(KindMalformed, "event tenant_id %d is not positive", e.TenantID)
	}
	if !e.Channel.Valid() {
		return errorf(KindMalformed, "event channel %s", quote(string(e.Channel)))
	}
	if err := checkID("merchant order no", e.MerchantOrderNo); err != nil {
		return err
	}
	var want eventkey.Key
	var err error
	switch e.Type {
	case eventkey.PaymentReceived:
		if e.RefundNo != "" || e.RefundAmount != 0 || e.CumulativeRefunded != 0 {
			return errorf(KindMalformed, "payment event carries refund fields")
		}
		want, err = paymentKey(e.Channel, e.TradeNo)
	case eventkey.RefundSucceeded:
		want, err = refundKey(e.Channel, e.TradeNo, e.RefundNo)
		if err == nil {
			err = checkRefundAmounts(e)
		}
	default:
		return errorf(KindMalformed, "event type %s", quote(string(e.Type)))
	}
	if err != nil {
		return err
	}
	if e.Key != want {
		return errorf(KindMalformed, "event key %s, its fields build %s", quote(string(e.Key)), quote(string(want)))
	}
	if e.OrderTotal <= 0 || e.OrderTotal > MaxAmount {
		return errorf(KindInvalidAmount, "event order total %d out of range", e.OrderTotal)
	}
	if e.Currency != CurrencyCNY {
		return errorf(KindMalformed, "event currency %s", quote(e.Currency))
	}
	if e.OccurredAt.IsZero() || e.OccurredAt.Location() != time.UTC ||
		e.ReceivedAt.IsZero() || e.ReceivedAt.Location() != time.UTC {
		return errorf(KindMalformed, "event times must be set and in UTC")
	}
	if err := checkTime("event occurred_at", e.OccurredAt); err != nil {
		return err
	}
	if err := checkTime("event received_at", e.ReceivedAt); err != nil {
		return err
	}
	if fp := Fingerprint(e); e.Fingerprint != fp {
		return errorf(KindMalformed, "event fingerprint %s, its fields give %s", quote(e.Fingerprint), fp)
	}
	return nil
}

func checkRefundAmounts(e Event) error {
	if e.Cumulative() {
		if e.RefundAmount != 0 || e.CumulativeRefunded <= 0 || e.CumulativeRefunded > MaxAmount {
			return errorf(KindInvalidAmount, "cumulative refund event: refund amount %d, cumulative %d",
				e.RefundAmount, e.CumulativeRefunded)
		}
		return nil
	}
	if e.CumulativeRefunded != 0 || e.RefundAmount <= 0 || e.RefundAmount > MaxAmount {
		return errorf(KindInvalidAmount, "per-refund event: refund amount %d, cumulative %d",
			e.RefundAmount, e.CumulativeRefunded)
	}
	return nil
}

// RefundStatus is the normalised status of a refund notification.
type RefundStatus string

// The refund statuses. Only RefundSuccess moves money; WeChat's ABNORMAL
// can still become SUCCESS for the same refund number, CLOSED is final.
const (
	RefundSuccess  RefundStatus = "SUCCESS"
	RefundAbnormal RefundStatus = "ABNORMAL"
	RefundClosed   RefundStatus = "CLOSED"
)

// Result is what one callback decodes into.
//
// When Ignored is false, Event is a complete money-moving event (its
// Validate returns nil). When Ignored is true no money moves: IgnoreReason
// says why, and Event carries what was read (tenant, channel, status, and
// identifiers where present) but no Key or Fingerprint.
//
// RefundStatus is set on every refund notification: RefundSuccess on
// REFUND_SUCCEEDED events of all channels, and RefundAbnormal or
// RefundClosed on the ignored WeChat REFUND.ABNORMAL and REFUND.CLOSED
// results, which always carry TradeNo and RefundNo so that a refund
// pre-registration can be updated.
//
// APIv3Key is set whenever a WeChat resource was decrypted, even when its
// content was then refused: which of the tenant's keys opened it.
//
// MerchantID is the merchant the callback names, on money-moving and
// ignored results alike: WeChat sub_mchid when present (partner mode),
// else mchid, from the decrypted resource; Alipay seller_id; Shouqianba
// terminal_sn (inside biz_response.data for a forwarded API response).
// It is empty when the callback names none. On a statement event, whose
// FromStatement is true (its tenant was bound at import), it is the
// statement line's merchant (Event.StatementMerchant), or empty.
// FromStatement is not part of the event stored with the claim.
//
// AppID is the application the callback names (Spec.AppField: Alipay
// app_id), empty for a channel without one; like MerchantID it is checked
// against the merchant binding and not stored.
type Result struct {
	Event         Event
	Ignored       bool
	IgnoreReason  string
	RefundStatus  RefundStatus
	APIv3Key      KeyUse
	MerchantID    string
	AppID         string
	FromStatement bool
	// FromQuery is set on a query answer (ContentTypeQuery): Query holds
	// what was asked and the verified answer, and More the answer's
	// further events, beyond Event, each claimed on its own key (a
	// Shouqianba refunded order proves its payment and its refund). Like
	// FromStatement, none of them is stored with the claim.
	FromQuery bool
	Query     *QueryAnswered
	More      []Event
	// Registration is set, and Event is not an event, when the envelope
	// carries a registration (ContentTypeRegistration).
	Registration *RegistrationMessage
}

// checkID validates an identifier read from a body: non-empty, at most
// MaxIDLen bytes, valid UTF-8 without control characters.
func checkID(name, v string) error {
	if v == "" {
		return errorf(KindMalformed, "%s is missing", name)
	}
	if len(v) > MaxIDLen {
		return errorf(KindMalformed, "%s %s is %d bytes, at most %d", name, quote(v), len(v), MaxIDLen)
	}
	if !utf8.ValidString(v) {
		return errorf(KindMalformed, "%s is not valid UTF-8", name)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return errorf(KindMalformed, "%s %s contains a control character", name, quote(v))
		}
	}
	return nil
}

// paymentKey checks tradeNo and builds the payment key; refusals are
// KindMalformed.
func paymentKey(ch Channel, tradeNo string) (eventkey.Key, error) {
	if err := checkID("channel trade no", tradeNo); err != nil {
		return "", err
	}
	k, err := eventkey.NewPaymentKey(string(ch), tradeNo)
	if err != nil {
		return "", &Error{Kind: KindMalformed, Err: fmt.Errorf("build payment key: %w", err)}
	}
	return k, nil
}

// refundKey checks tradeNo and refundNo and builds the refund key;
// refusals are KindMalformed.
func refundKey(ch Channel, tradeNo, refundNo string) (eventkey.Key, error) {
	if err := checkID("channel trade no", tradeNo); err != nil {
		return "", err
	}
	if err := checkID("refund no", refundNo); err != nil {
		return "", err
	}
	k, err := eventkey.NewRefundKey(string(ch), tradeNo, refundNo)
	if err != nil {
		return "", &Error{Kind: KindMalformed, Err: fmt.Errorf("build refund key: %w", err)}
	}
	return k, nil
}

// IsCancel reports whether e is the cancel of a channel that has one
// (Spec.CancelRefundNo; a Shouqianba CANCELED order, refund number
// CANCEL): it nets the trade to zero rather than refunding an amount. It
// reverses the payment posted for the trade; with none posted it moves
// nothing, and a payment settled later for the trade is reversed with it.
func (e Event) IsCancel() bool {
	if e.Type != eventkey.RefundSucceeded {
		return false
	}
	no := e.Channel.CancelRefundNo()
	return no != "" && e.RefundNo == no
}
