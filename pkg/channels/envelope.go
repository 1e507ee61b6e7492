package channels

import (
	"strings"
	"time"
)

// Channel is a payment channel code as it appears in envelopes and keys.
type Channel string

// The codes of the built-in channels, as their packages' Code constants
// spell them (wechat.Code, alipay.Code, sqb.Code; a test of allchannels
// checks they agree). They are kept here for the tests across the
// repository that name a channel; production code outside the channel
// packages and allchannels never names one, it asks the registry.
const (
	WeChat Channel = "WECHAT"
	Alipay Channel = "ALIPAY"
	SQB    Channel = "SQB"
)

// Valid reports whether c is a registered channel (see All). Codes compare exactly: "wechat" is not valid.
func (c Channel) Valid() bool {
	_, ok := current().lookup(c)
	return ok
}

// Cumulative reports whether the channel reports refunds as the cumulative
// amount refunded so far (Spec.Refunds is CumulativeRefunds: Alipay
// refund_fee, Shouqianba total minus net) rather than each refund's own
// amount (WeChat amount.refund); false for an unknown channel.
func (c Channel) Cumulative() bool {
	s, ok := current().lookup(c)
	return ok && s.Cumulative()
}

// ContentType returns the media type the contract prescribes for the
// channel's bodies (Spec.ContentType: application/x-www-form-urlencoded for
// Alipay, application/json for the others), "" for an unknown channel.
func (c Channel) ContentType() string {
	if s, ok := current().lookup(c); ok {
		return s.ContentType
	}
	return ""
}

// The media types of callback bodies.
const (
	ContentTypeJSON = "application/json"
	ContentTypeForm = "application/x-www-form-urlencoded"
)

// MaxEnvelopeBytes caps the size of one envelope (the whole Kafka value, and
// the body on its own). Real callbacks are a few KiB; anything larger is
// malformed.
const MaxEnvelopeBytes = 64 << 10

// Envelope is the Kafka message value the upstream receiver writes for each
// callback (contract.md). Body is the callback body exactly as received.
type Envelope struct {
	TenantID    int64     `json:"tenant_id"`
	Channel     string    `json:"channel"`
	ReceivedAt  time.Time `json:"received_at"`
	ContentType string    `json:"content_type"`
	Body        string    `json:"body"`
}

// ParseEnvelope decodes and validates one Kafka value. Unknown JSON fields
// are tolerated. It fails with KindMalformed for a value over
// MaxEnvelopeBytes, bad JSON, a member name that repeats (exactly or in
// another case, at any depth), a tenant_id that is not positive, a missing
// channel or body, a received_at missing or outside [2000, 2100), or a
// content_type that neither fits the channel nor is ContentTypeStatement,
// ContentTypeQuery or ContentTypeRegistration;
// and with KindUnknownChannel for a channel it does not know. ReceivedAt is
// returned in UTC.
func ParseEnvelope(value []byte) (Envelope, error) {
	var env Envelope
	if len(value) > MaxEnvelopeBytes {
		return env, errorf(KindMalformed, "envelope is %d bytes, at most %d", len(value), MaxEnvelopeBytes)
	}
	if !fastEnvelope(value, &env) {
		env = Envelope{}
		if err := unmarshal(value, &env, "envelope"); err != nil {
			return Envelope{}, err
		}
	}
	if err := env.Validate(); err != nil {
		return env, err
	}
	env.ReceivedAt = env.ReceivedAt.UTC()
	return env, nil
}

// Validate checks an envelope the way ParseEnvelope does, with the same
// error kinds.
func (env Envelope) Validate() error {
	if env.TenantID <= 0 {
		return errorf(KindMalformed, "envelope tenant_id %d is not positive", env.TenantID)
	}
	if env.Channel == "" {
		return errorf(KindMalformed, "envelope has no channel")
	}
	ch := Channel(env.Channel)
	if !ch.Valid() {
		return errorf(KindUnknownChannel, "envelope channel %s", quote(env.Channel))
	}
	if env.ReceivedAt.IsZero() {
		return errorf(KindMalformed, "envelope has no received_at")
	}
	if err := checkTime("envelope received_at", env.ReceivedAt); err != nil {
		return err
	}
	if env.Body == "" {
		return errorf(KindMalformed, "envelope has an empty body")
	}
	if len(env.Body) > MaxEnvelopeBytes {
		return errorf(KindMalformed, "envelope body is %d bytes, at most %d", len(env.Body), MaxEnvelopeBytes)
	}
	if !mediaTypeIs(env.ContentType, ch.ContentType()) && !env.FromStatement() && !env.FromQuery() && !env.FromRegistration() {
		return errorf(KindMalformed, "content_type %s does not fit channel %s, want %s (or %s for an event rebuilt from a statement, %s for a query answer, %s for a registration)",
			quote(env.ContentType), ch, ch.ContentType(), ContentTypeStatement, ContentTypeQuery, ContentTypeRegistration)
	}
	return nil
}

// FromStatement reports whether the envelope carries an event rebuilt from
// a channel statement (content type ContentTypeStatement) rather than a
// callback.
func (env Envelope) FromStatement() bool { return mediaTypeIs(env.ContentType, ContentTypeStatement) }

// FromQuery reports whether the envelope carries a channel's answer to an
// active query (content type ContentTypeQuery) rather than a callback.
func (env Envelope) FromQuery() bool { return mediaTypeIs(env.ContentType, ContentTypeQuery) }

// FromRegistration reports whether the envelope carries a registration
// (content type ContentTypeRegistration) rather than a callback.
func (env Envelope) FromRegistration() bool {
	return mediaTypeIs(env.ContentType, ContentTypeRegistration)
}

// SignedByUs reports whether the envelope is one the project publishes
// itself (a statement event or a query answer), which must carry a valid
// x-paycb-statement-signature before anything else is read.
func (env Envelope) SignedByUs() bool { return env.FromStatement() || env.FromQuery() }

// mediaTypeIs reports whether contentType names want, ignoring case and any
// parameters ("application/json; charset=utf-8").
func mediaTypeIs(contentType, want string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), want)
}

// String returns the channel code.
func (c Channel) String() string { return string(c) }
