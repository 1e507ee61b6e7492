package channels

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Decoder turns envelopes into canonical events. It holds no state beyond
// its KeyProvider and is safe for concurrent use.
type Decoder struct {
	keys KeyProvider
}

// NewDecoder returns a Decoder that takes WeChat APIv3 keys from keys. A nil
// keys means no tenant has a key: every WeChat callback fails with KindNoKey.
func NewDecoder(keys KeyProvider) *Decoder {
	return &Decoder{keys: keys}
}

// Decode parses one Kafka value (the JSON envelope) and decodes its body;
// see ParseEnvelope and DecodeEnvelope for what is checked. Each JSON
// document (envelope, body, decrypted WeChat resource) is decoded once.
//
// Every error is a *Error whose Kind is one of KindMalformed,
// KindUnknownChannel, KindDecryptFailed, KindNoKey, KindInvalidAmount and
// KindUnsupported, and is permanent: the same bytes always fail the same
// way. On error, Result.Event carries TenantID and Channel when the
// envelope got far enough to tell them (for metric labels), nothing else.
func (d *Decoder) Decode(value []byte) (Result, error) {
	env, err := ParseEnvelope(value)
	if err != nil {
		return partial(env), err
	}
	return d.decode(env)
}

// DecodeEnvelope validates env (Envelope.Validate) and decodes its body
// into a Result. Errors are as for Decode.
func (d *Decoder) DecodeEnvelope(env Envelope) (Result, error) {
	if err := env.Validate(); err != nil {
		return partial(env), err
	}
	env.ReceivedAt = env.ReceivedAt.UTC()
	return d.decode(env)
}

func (d *Decoder) decode(env Envelope) (Result, error) {
	var (
		res Result
		err error
	)
	switch Channel(env.Channel) {
	case WeChat:
		res, err = d.decodeWeChat(env)
	case Alipay:
		res, err = decodeAlipay(env)
	case SQB:
		res, err = decodeSQB(env)
	default: // Validate lets no other channel through
		err = errorf(KindUnknownChannel, "channel %s", quote(env.Channel))
	}
	res.Event.TenantID = env.TenantID
	res.Event.Channel = Channel(env.Channel)
	if err != nil {
		return partial(env), err
	}
	res.Event.ReceivedAt = env.ReceivedAt
	if !res.Ignored {
		if err := checkTime("occurred_at", res.Event.OccurredAt); err != nil {
			return partial(env), err
		}
		res.Event.Currency = CurrencyCNY
		res.Event.Fingerprint = Fingerprint(res.Event)
	}
	return res, nil
}

// partial is the Result returned with an error: tenant and channel only,
// and only when they are valid.
func partial(env Envelope) Result {
	var res Result
	if env.TenantID > 0 {
		res.Event.TenantID = env.TenantID
	}
	if ch := Channel(env.Channel); ch.Valid() {
		res.Event.Channel = ch
	}
	return res
}

// ignored builds an ignored Result.
func ignored(reason string, ev Event) Result {
	return Result{Event: ev, Ignored: true, IgnoreReason: reason}
}

// unmarshal decodes one JSON document; a *Error raised inside (an amount's
// UnmarshalJSON) keeps its kind, anything else is KindMalformed.
func unmarshal(data []byte, v any, what string) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return &Error{Kind: e.Kind, Err: fmt.Errorf("decode %s: %w", what, e.Err)}
	}
	return &Error{Kind: KindMalformed, Err: fmt.Errorf("decode %s: %w", what, err)}
}
