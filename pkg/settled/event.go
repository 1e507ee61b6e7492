package settled

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ContentType is the value's media type, carried in the HeaderContentType
// header of every settled-event message.
const ContentType = "application/vnd.paycb.settled+json"

// The headers of every settled-event message.
const (
	// HeaderEventID carries the value's event_id.
	HeaderEventID = "x-paycb-event-id"
	// HeaderContentType carries ContentType.
	HeaderContentType = "content-type"
)

// The event types (the settled claim's; a Shouqianba cancel is a
// RefundSucceeded).
const (
	// PaymentReceived: the trade's payment.
	PaymentReceived = "PAYMENT_RECEIVED"
	// RefundSucceeded: one of the trade's refunds, or a Shouqianba cancel's
	// reversal.
	RefundSucceeded = "REFUND_SUCCEEDED"
)

// The order statuses of an event's order_status.
const (
	// OrderPendingPayment: the trade is known so far only from refunds.
	OrderPendingPayment = "PENDING_PAYMENT"
	// OrderPaid: paid, nothing refunded.
	OrderPaid = "PAID"
	// OrderPartiallyRefunded: paid, part of the total refunded.
	OrderPartiallyRefunded = "PARTIALLY_REFUNDED"
	// OrderRefunded: paid, the whole total refunded.
	OrderRefunded = "REFUNDED"
)

// Source is what settled the event: the channel's callback, a line of the
// channel's statement (an event published by statement reconcile
// --publish-missing) or the channel's answer to a query.
type Source string

// The sources of an event.
const (
	SourceCallback  Source = "callback"
	SourceStatement Source = "statement"
	SourceQuery     Source = "query"
)

// Valid reports whether s is one of the contract's sources.
func (s Source) Valid() bool {
	return s == SourceCallback || s == SourceStatement || s == SourceQuery
}

// Event is the value of one settled-event message. Amounts are fen.
type Event struct {
	// EventID is <tenant_id>:<idempotency key> (EventID builds it); it
	// never changes, whoever publishes the event and however often.
	EventID string `json:"event_id"`
	// EventType is PaymentReceived or RefundSucceeded.
	EventType string `json:"event_type"`
	// TenantID is the tenant the trade belongs to.
	TenantID int64 `json:"tenant_id"`
	// Channel is the payment channel's code (WECHAT, ALIPAY, SQB).
	Channel string `json:"channel"`
	// ChannelTradeNo is the channel's trade number.
	ChannelTradeNo string `json:"channel_trade_no"`
	// MerchantOrderNo is the merchant's order number, as the order row
	// records it.
	MerchantOrderNo string `json:"merchant_order_no"`
	// RefundNo is the refund's number; "" for a payment.
	RefundNo string `json:"refund_no"`
	// Amount is what this settlement moved, in fen: paid for a payment,
	// refunded for a refund; 0 when only the order's state changed.
	Amount int64 `json:"amount"`
	// Currency is the ISO 4217 code (CNY).
	Currency string `json:"currency"`
	// OrderStatus is the order's status after this settlement.
	OrderStatus string `json:"order_status"`
	// OrderAmount is the order's total after this settlement, in fen.
	OrderAmount int64 `json:"order_amount"`
	// RefundedAmount is the order's refunded total after this settlement,
	// in fen.
	RefundedAmount int64 `json:"refunded_amount"`
	// TradeSeq counts the trade's settled events from 1, without gaps, in
	// the order they were settled.
	TradeSeq int64 `json:"trade_seq"`
	// OccurredAt is when the channel says the payment or refund happened.
	OccurredAt time.Time `json:"occurred_at"`
	// SettledAt is when the worker settled it.
	SettledAt time.Time `json:"settled_at"`
	// Source is what settled it.
	Source Source `json:"source"`
}

// ErrInvalid marks an event that Encode refuses or a value that Decode
// refuses.
var ErrInvalid = errors.New("invalid settled event")

// EventID is the event_id of the event of idempotency key key under
// tenant: "<tenant>:<key>".
func EventID(tenant int64, key string) string {
	return strconv.FormatInt(tenant, 10) + ":" + key
}

// MessageKey is the Kafka key of a trade's settled events:
// "<tenant>:<CHANNEL>:<channel trade no>", so a trade's events share a
// partition.
func MessageKey(tenant int64, channel, tradeNo string) string {
	return strconv.FormatInt(tenant, 10) + ":" + channel + ":" + tradeNo
}

// MessageKey is the Kafka key of e's message (MessageKey of its trade).
func (e Event) MessageKey() string { return MessageKey(e.TenantID, e.Channel, e.ChannelTradeNo) }

// idempotencyKey is the contract's key of e's event.
func (e Event) idempotencyKey() string {
	k := e.Channel + ":" + e.ChannelTradeNo + ":" + e.EventType
	if e.EventType == RefundSucceeded {
		k += ":" + e.RefundNo
	}
	return k
}

// Validate checks e against the contract; the error wraps ErrInvalid and
// names the first field that fails.
func (e Event) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	switch e.EventType {
	case PaymentReceived:
		if e.RefundNo != "" {
			return bad("refund_no", "%q on a payment", e.RefundNo)
		}
	case RefundSucceeded:
		if e.RefundNo == "" {
			return bad("refund_no", "empty on a refund")
		}
	default:
		return bad("event_type", "%q", e.EventType)
	}
	if e.TenantID <= 0 {
		return bad("tenant_id", "%d is not positive", e.TenantID)
	}
	if !isCode(e.Channel, 1, 16) {
		return bad("channel", "%q is not an upper-case code", e.Channel)
	}
	for _, f := range []struct{ name, v string }{{"channel_trade_no", e.ChannelTradeNo}, {"refund_no", e.RefundNo}} {
		if !idPart(f.v, f.name == "refund_no") {
			return bad(f.name, "%q is not printable without spaces, or is too long", f.v)
		}
	}
	if !printable(e.MerchantOrderNo) {
		return bad("merchant_order_no", "%q has a control character, or is too long", e.MerchantOrderNo)
	}
	if e.ChannelTradeNo == "" {
		return bad("channel_trade_no", "empty")
	}
	if want := EventID(e.TenantID, e.idempotencyKey()); e.EventID != want {
		return bad("event_id", "%q, want %q", e.EventID, want)
	}
	if e.Amount < 0 || e.OrderAmount < 0 || e.RefundedAmount < 0 {
		return bad("amount", "negative (amount %d, order_amount %d, refunded_amount %d)", e.Amount, e.OrderAmount, e.RefundedAmount)
	}
	if !isCode(e.Currency, 3, 3) || strings.ContainsAny(e.Currency, "0123456789_") {
		return bad("currency", "%q is not an ISO 4217 code", e.Currency)
	}
	switch e.OrderStatus {
	case OrderPendingPayment, OrderPaid, OrderPartiallyRefunded, OrderRefunded:
	default:
		return bad("order_status", "%q", e.OrderStatus)
	}
	if e.TradeSeq < 1 {
		return bad("trade_seq", "%d, the first is 1", e.TradeSeq)
	}
	if e.OccurredAt.IsZero() || e.SettledAt.IsZero() {
		return bad("occurred_at", "a time is missing (occurred_at %v, settled_at %v)", e.OccurredAt, e.SettledAt)
	}
	if y := e.OccurredAt.UTC().Year(); y < 1 || y > 9999 {
		return bad("occurred_at", "year %d", y)
	}
	if y := e.SettledAt.UTC().Year(); y < 1 || y > 9999 {
		return bad("settled_at", "year %d", y)
	}
	if !e.Source.Valid() {
		return bad("source", "%q", e.Source)
	}
	return nil
}

// isCode reports whether s is min to max bytes of A-Z, 0-9 and '_',
// starting with a letter.
func isCode(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// maxIDLen is the longest trade, merchant order or refund number: the
// VARBINARY(64) columns that hold them.
const maxIDLen = 64

// idPart reports whether s may be a part of a key: valid UTF-8 of at most
// maxIDLen bytes, no whitespace or control characters, and no ':' unless
// colon (the refund number, the key's last part).
func idPart(s string, colon bool) bool {
	if !printable(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || (r == ':' && !colon) {
			return false
		}
	}
	return true
}

// printable reports whether s is valid UTF-8 of at most maxIDLen bytes
// without control characters: what the decoder accepts of a merchant order
// number, which may hold spaces and colons.
func printable(s string) bool {
	if len(s) > maxIDLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return false
		}
	}
	return true
}

// Encode returns e's value: its members in the contract's order, strings
// quoted as encoding/json quotes them, times in UTC as RFC 3339 with the
// fraction's trailing zeros dropped. The same event always gives the same
// bytes. An event that fails Validate is refused (ErrInvalid).
func Encode(e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("encode settled event %s: %w", e.EventID, err)
	}
	return AppendEncoded(make([]byte, 0, 512), e), nil
}

// AppendEncoded appends e's value (as Encode writes it) to b without
// validating it; callers validate first.
func AppendEncoded(b []byte, e Event) []byte {
	b = append(b, `{"event_id":`...)
	b = appendString(b, e.EventID)
	b = append(b, `,"event_type":`...)
	b = appendString(b, e.EventType)
	b = append(b, `,"tenant_id":`...)
	b = strconv.AppendInt(b, e.TenantID, 10)
	b = append(b, `,"channel":`...)
	b = appendString(b, e.Channel)
	b = append(b, `,"channel_trade_no":`...)
	b = appendString(b, e.ChannelTradeNo)
	b = append(b, `,"merchant_order_no":`...)
	b = appendString(b, e.MerchantOrderNo)
	b = append(b, `,"refund_no":`...)
	b = appendString(b, e.RefundNo)
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, e.Amount, 10)
	b = append(b, `,"currency":`...)
	b = appendString(b, e.Currency)
	b = append(b, `,"order_status":`...)
	b = appendString(b, e.OrderStatus)
	b = append(b, `,"order_amount":`...)
	b = strconv.AppendInt(b, e.OrderAmount, 10)
	b = append(b, `,"refunded_amount":`...)
	b = strconv.AppendInt(b, e.RefundedAmount, 10)
	b = append(b, `,"trade_seq":`...)
	b = strconv.AppendInt(b, e.TradeSeq, 10)
	b = append(b, `,"occurred_at":"`...)
	b = e.OccurredAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","settled_at":"`...)
	b = e.SettledAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","source":`...)
	b = appendString(b, string(e.Source))
	return append(b, '}')
}

// appendString appends s quoted as encoding/json quotes a string (HTML
// characters escaped). The contract's strings are ASCII codes and channel
// identifiers, so the standard library's quoting, fixed by its
// compatibility promise, keeps the bytes stable.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// members are the value's member names, each required exactly once.
var members = []string{
	"event_id", "event_type", "tenant_id", "channel", "channel_trade_no", "merchant_order_no", "refund_no",
	"amount", "currency", "order_status", "order_amount", "refunded_amount", "trade_seq", "occurred_at",
	"settled_at", "source",
}

// Decode reads a value as Encode writes it. It refuses (ErrInvalid)
// anything but one JSON object, a member name given twice in one object
// (exactly or differing only in case, as encoding/json would read both
// into one field; at any depth, in the members it ignores too), a missing or
// null member, a member of the wrong JSON type, a number that is not an
// integer, and an event that fails Validate. Members it does not know are
// ignored (a later version may add some).
func Decode(value []byte) (Event, error) {
	fail := func(format string, args ...any) (Event, error) {
		return Event{}, fmt.Errorf("decode settled event: %w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if !utf8.Valid(value) {
		return fail("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fail("not a JSON object")
	}
	raw := make(map[string]json.RawMessage, len(members))
	folded := make(map[string]string, len(members)) // folded name -> first spelling
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail("%v", err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fail("member %q: %v", name, err)
		}
		key := foldName(name)
		if first, dup := folded[key]; dup {
			return fail("member %q repeats %q", name, first)
		}
		folded[key] = name
		switch inner, err := repeatWithin(v); {
		case err != nil:
			return fail("member %q: %v", name, err)
		case inner != "":
			return fail("member %q: member name %q repeats within it", name, inner)
		}
		raw[name] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return fail("unterminated object")
	}
	if _, err := dec.Token(); err == nil {
		return fail("data after the object")
	}
	var e Event
	targets := map[string]any{
		"event_id": &e.EventID, "event_type": &e.EventType, "tenant_id": &e.TenantID, "channel": &e.Channel,
		"channel_trade_no": &e.ChannelTradeNo, "merchant_order_no": &e.MerchantOrderNo, "refund_no": &e.RefundNo,
		"amount": &e.Amount, "currency": &e.Currency, "order_status": &e.OrderStatus, "order_amount": &e.OrderAmount,
		"refunded_amount": &e.RefundedAmount, "trade_seq": &e.TradeSeq, "occurred_at": &e.OccurredAt,
		"settled_at": &e.SettledAt, "source": &e.Source,
	}
	for _, name := range members {
		v, ok := raw[name]
		switch {
		case !ok:
			return fail("member %q missing", name)
		case string(v) == "null":
			return fail("member %q is null", name)
		}
		if _, isInt := targets[name].(*int64); isInt && bytes.ContainsAny(v, ".eE") {
			return fail("member %q: %s is not an integer", name, v)
		}
		if err := json.Unmarshal(v, targets[name]); err != nil {
			return fail("member %q: %v", name, err)
		}
	}
	e.OccurredAt, e.SettledAt = e.OccurredAt.UTC(), e.SettledAt.UTC()
	if err := e.Validate(); err != nil {
		return Event{}, fmt.Errorf("decode settled event: %w", err)
	}
	return e, nil
}

// foldName is the same for two member names exactly when strings.EqualFold
// calls them equal: each rune becomes the least of its simple-folding
// orbit, as encoding/json folds names to match them to fields.
func foldName(name string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, name)
}

// repeatWithin returns the first member name that repeats within one
// object of the JSON value v (foldName), at any depth, or "" when none
// does; v is a value json.Decoder has read whole.
func repeatWithin(v json.RawMessage) (string, error) {
	if len(v) == 0 || (v[0] != '{' && v[0] != '[') {
		return "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var walk func() (string, error)
	walk = func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		delim, _ := tok.(json.Delim)
		if delim != '{' && delim != '[' {
			return "", nil
		}
		seen := map[string]bool{}
		for dec.More() {
			if delim == '{' {
				tok, err := dec.Token()
				if err != nil {
					return "", err
				}
				name, _ := tok.(string)
				key := foldName(name)
				if seen[key] {
					return name, nil
				}
				seen[key] = true
			}
			if name, err := walk(); err != nil || name != "" {
				return name, err
			}
		}
		_, err = dec.Token() // the closing delimiter
		return "", err
	}
	return walk()
}
