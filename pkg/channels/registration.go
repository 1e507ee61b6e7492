package channels

import (
	"encoding/json"
	"time"
)

// ContentTypeRegistration is the media type of an envelope carrying a
// registration: a payment or refund the merchant's own services are about
// to ask the channel for, published before they ask. Its body is a
// RegistrationMessage as JSON; the envelope's tenant and channel are the
// registration's. A registration moves no money and makes no claim; it is
// not signed (it asserts nothing the channel must confirm).
const ContentTypeRegistration = "application/vnd.paycb.registration+json"

// RegistrationKind says what a registration registers.
type RegistrationKind string

// The registration kinds of the contract.
const (
	// RegistrationPayment registers a payment by its merchant order number
	// (the channel's trade number does not exist yet).
	RegistrationPayment RegistrationKind = "PAYMENT"
	// RegistrationRefund registers a refund of a paid trade.
	RegistrationRefund RegistrationKind = "REFUND"
)

// MaxPaymentLifetime is the longest a registered payment may stay payable
// (expires_at − created_at): the longest order validity the channels
// offer is Alipay's 15 days (timeout_express), so anything over twice that
// is taken for a mistake in the registering service (a unit error, a date
// in the wrong year) and refused as malformed.
const MaxPaymentLifetime = 30 * 24 * time.Hour

// RegistrationMessage is the body of a ContentTypeRegistration envelope
// (contract: Input, Registrations). Amount is fen. ExpiresAt is a payment's
// only; TradeNo and RefundNo a refund's only.
type RegistrationMessage struct {
	Kind            RegistrationKind `json:"kind"`
	MerchantID      string           `json:"merchant_id"`
	MerchantOrderNo string           `json:"merchant_order_no"`
	TradeNo         string           `json:"channel_trade_no,omitempty"`
	RefundNo        string           `json:"refund_no,omitempty"`
	Amount          int64            `json:"amount"`
	Currency        string           `json:"currency"`
	CreatedAt       time.Time        `json:"created_at"`
	ExpiresAt       time.Time        `json:"expires_at,omitzero"`
}

// registrationJSON is the wire form: the amount as the JSON number's own
// text, read through ParseFen's strictness (no sign, fraction, exponent or
// leading zero); the optional members as pointers, so that one present
// where the kind names none is seen.
type registrationJSON struct {
	Kind            RegistrationKind `json:"kind"`
	MerchantID      string           `json:"merchant_id"`
	MerchantOrderNo string           `json:"merchant_order_no"`
	TradeNo         *string          `json:"channel_trade_no"`
	RefundNo        *string          `json:"refund_no"`
	Amount          json.RawMessage  `json:"amount"`
	Currency        string           `json:"currency"`
	CreatedAt       time.Time        `json:"created_at"`
	ExpiresAt       *time.Time       `json:"expires_at"`
}

// RegistrationEnvelope returns the Kafka value carrying m for tenantID and
// channel, received at receivedAt: content type ContentTypeRegistration.
// It fails as ParseRegistration would on the result.
func RegistrationEnvelope(tenantID int64, channel Channel, receivedAt time.Time, m RegistrationMessage) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, errorf(KindMalformed, "registration message: %v", err)
	}
	env := Envelope{
		TenantID: tenantID, Channel: string(channel), ReceivedAt: receivedAt.UTC(),
		ContentType: ContentTypeRegistration, Body: string(body),
	}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if _, err := ParseRegistration(env); err != nil {
		return nil, err
	}
	value, err := json.Marshal(env)
	if err != nil {
		return nil, errorf(KindMalformed, "registration envelope: %v", err)
	}
	return value, nil
}

// ParseRegistration reads the body of a ContentTypeRegistration envelope
// strictly: a repeated member, an unknown one or trailing data is
// KindMalformed; so are a missing or unprintable identifier, an unknown
// kind, a payment naming a trade or refund number or lacking expires_at, a
// refund lacking either or naming expires_at, times outside [2000, 2100),
// an expiry not after created_at or more than MaxPaymentLifetime after it.
// An amount that is not a positive whole number of fen up to MaxAmount is
// KindInvalidAmount; a currency other than CNY is KindUnsupported. Times
// are returned in UTC.
func ParseRegistration(env Envelope) (RegistrationMessage, error) {
	var w registrationJSON
	if err := decodeJSONStrict([]byte(env.Body), &w); err != nil {
		return RegistrationMessage{}, wrapKind(err, "decode registration")
	}
	m := RegistrationMessage{
		Kind: w.Kind, MerchantID: w.MerchantID, MerchantOrderNo: w.MerchantOrderNo,
		Currency: w.Currency, CreatedAt: w.CreatedAt.UTC(),
	}
	if err := checkID("registration merchant_id", m.MerchantID); err != nil {
		return RegistrationMessage{}, err
	}
	if err := checkID("registration merchant_order_no", m.MerchantOrderNo); err != nil {
		return RegistrationMessage{}, err
	}
	if w.CreatedAt.IsZero() {
		return RegistrationMessage{}, errorf(KindMalformed, "registration has no created_at")
	}
	if err := checkTime("registration created_at", m.CreatedAt); err != nil {
		return RegistrationMessage{}, err
	}
	switch m.Kind {
	case RegistrationPayment:
		if w.TradeNo != nil || w.RefundNo != nil {
			return RegistrationMessage{}, errorf(KindMalformed, "a payment registration names no channel_trade_no or refund_no (the trade does not exist yet)")
		}
		if w.ExpiresAt == nil || w.ExpiresAt.IsZero() {
			return RegistrationMessage{}, errorf(KindMalformed, "a payment registration needs expires_at")
		}
		m.ExpiresAt = w.ExpiresAt.UTC()
		if err := checkTime("registration expires_at", m.ExpiresAt); err != nil {
			return RegistrationMessage{}, err
		}
		if !m.ExpiresAt.After(m.CreatedAt) {
			return RegistrationMessage{}, errorf(KindMalformed, "registration expires_at %s is not after created_at %s",
				m.ExpiresAt.Format(time.RFC3339), m.CreatedAt.Format(time.RFC3339))
		}
		if m.ExpiresAt.Sub(m.CreatedAt) > MaxPaymentLifetime {
			return RegistrationMessage{}, errorf(KindMalformed, "registration expires_at %s is more than %s after created_at %s",
				m.ExpiresAt.Format(time.RFC3339), MaxPaymentLifetime, m.CreatedAt.Format(time.RFC3339))
		}
	case RegistrationRefund:
		if w.ExpiresAt != nil {
			return RegistrationMessage{}, errorf(KindMalformed, "a refund registration names no expires_at")
		}
		if w.TradeNo == nil || w.RefundNo == nil {
			return RegistrationMessage{}, errorf(KindMalformed, "a refund registration needs channel_trade_no and refund_no")
		}
		m.TradeNo, m.RefundNo = *w.TradeNo, *w.RefundNo
		if err := checkID("registration channel_trade_no", m.TradeNo); err != nil {
			return RegistrationMessage{}, err
		}
		if err := checkID("registration refund_no", m.RefundNo); err != nil {
			return RegistrationMessage{}, err
		}
	default:
		return RegistrationMessage{}, errorf(KindMalformed, "registration kind %s: want PAYMENT or REFUND", quote(string(m.Kind)))
	}
	if len(w.Amount) == 0 || string(w.Amount) == "null" {
		return RegistrationMessage{}, errorf(KindMalformed, "registration has no amount")
	}
	if w.Amount[0] == '"' {
		return RegistrationMessage{}, errorf(KindInvalidAmount, "registration amount %s is a string: want a JSON number of fen", w.Amount)
	}
	amount, err := ParseFen(string(w.Amount))
	if err != nil {
		return RegistrationMessage{}, err
	}
	if amount <= 0 {
		return RegistrationMessage{}, errorf(KindInvalidAmount, "registration amount %d fen is not positive", amount)
	}
	m.Amount = amount
	if m.Currency != CurrencyCNY {
		return RegistrationMessage{}, errorf(KindUnsupported, "registration currency %s: only %s", quote(m.Currency), CurrencyCNY)
	}
	return m, nil
}
