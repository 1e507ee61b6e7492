package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/paycallback/paycallback/pkg/channels/internal/jsonscan"
)

// Decoder turns envelopes into canonical events. It holds no state beyond
// its KeyProvider and its options, and is safe for concurrent use.
type Decoder struct {
	keys KeyProvider
	// accept is nil when every channel is accepted (the default).
	accept  []Channel
	setting string
	// statements verifies statement events' signatures (DecodeMessage);
	// nil refuses every statement event.
	statements StatementVerifier
	// queryKeys gives the channels' public keys query answers are
	// verified with (VerifyQueryAnswers); nil holds none.
	queryKeys QueryKeySource
}

// DecoderOption configures a Decoder; see Accept.
type DecoderOption func(*Decoder)

// Accept limits the decoder to the channels chs: an envelope of any other
// channel fails with KindUnknownChannel before its body is read, with a
// reason that names setting (the configuration that chose chs, such as
// "PAYCB_CHANNELS") and its value, for example "channel ALIPAY is not
// accepted by this instance (PAYCB_CHANNELS=WECHAT,SQB)". Without this
// option every channel is accepted; Accept with no channels accepts none.
func Accept(setting string, chs ...Channel) DecoderOption {
	accept := slices.Clone(chs)
	if accept == nil {
		accept = []Channel{}
	}
	return func(d *Decoder) {
		d.accept = accept
		d.setting = setting
	}
}

// NewDecoder returns a Decoder that takes WeChat APIv3 keys from keys. A nil
// keys means no tenant has a key: every WeChat callback fails with KindNoKey.
// By default every channel is accepted (see Accept).
func NewDecoder(keys KeyProvider, opts ...DecoderOption) *Decoder {
	d := &Decoder{keys: keys}
	for _, opt := range opts {
		opt(d)
	}
	return d
}

// ParseChannels turns channel codes, such as the list of PAYCB_CHANNELS,
// into Channels. Codes compare exactly (upper case). It fails, naming the
// code, on an unknown or repeated code and on an empty list.
func ParseChannels(codes []string) ([]Channel, error) {
	if len(codes) == 0 {
		return nil, fmt.Errorf("no channel: want one or more of %s", strings.Join(CodeStrings(), ", "))
	}
	chs := make([]Channel, 0, len(codes))
	for _, code := range codes {
		ch := Channel(code)
		if !ch.Valid() {
			return nil, fmt.Errorf("unknown channel %s: want %s", quote(code), CodeList())
		}
		if slices.Contains(chs, ch) {
			return nil, fmt.Errorf("channel %s listed twice", code)
		}
		chs = append(chs, ch)
	}
	return chs, nil
}

// accepts reports whether the decoder accepts ch, and otherwise the reason.
func (d *Decoder) accepts(ch Channel) error {
	if d.accept == nil || slices.Contains(d.accept, ch) {
		return nil
	}
	names := make([]string, len(d.accept))
	for i, c := range d.accept {
		names[i] = string(c)
	}
	setting := d.setting
	if setting == "" {
		setting = "accepted channels"
	}
	return errorf(KindUnknownChannel, "channel %s is not accepted by this instance (%s=%s)",
		ch, setting, strings.Join(names, ","))
}

// Decode parses one Kafka value (the JSON envelope) and decodes its body;
// see ParseEnvelope and DecodeEnvelope for what is checked. Each JSON
// document (envelope, body, decrypted WeChat resource) is decoded once. A
// body of content type ContentTypeStatement is a canonical event rebuilt
// from a statement: it must be of the envelope's tenant and channel, a
// payment or a WeChat refund, and carry the key and fingerprint its fields
// build (see NewStatementEvent); it then decodes to that event. Decode
// does not authenticate a statement event or a query answer's statement
// signature (a query answer's channel signature it does check, with the
// keys of VerifyQueryAnswers): the worker decodes with DecodeMessage, which
// does; Decode reads back what was judged already (operator tools, tests).
//
// Every error is a *Error whose Kind is one of KindMalformed,
// KindUnknownChannel, KindDecryptFailed, KindNoKey, KindInvalidAmount and
// KindUnsupported, and is permanent: the same bytes always fail the same
// way. On error, Result.Event carries TenantID and Channel when the
// envelope got far enough to tell them (for metric labels), and
// Result.APIv3Key which key opened a WeChat resource whose content was then
// refused; nothing else. An envelope of a channel the decoder does not
// accept (see Accept) fails with KindUnknownChannel and keeps its Channel.
//
// A body of content type ContentTypeRegistration is no event: it decodes
// (ParseRegistration) to Result.Registration, with MerchantID its merchant
// and Event only its tenant, channel and received_at.
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
	if err := d.accepts(Channel(env.Channel)); err != nil {
		return partial(env), err
	}
	switch spec, ok := current().lookup(Channel(env.Channel)); {
	case env.FromStatement():
		res, err = decodeStatement(env)
	case env.FromRegistration():
		var m RegistrationMessage
		if m, err = ParseRegistration(env); err == nil {
			res.Registration = &m
			res.MerchantID = m.MerchantID
		}
	case env.FromQuery() && ok:
		res, err = d.decodeQuery(env, spec)
	case ok:
		res, err = spec.Decode(env, d.keys)
	default: // Validate lets no other channel through
		err = errorf(KindUnknownChannel, "channel %s", quote(env.Channel))
	}
	res.Event.TenantID = env.TenantID
	res.Event.Channel = Channel(env.Channel)
	res.FromStatement = env.FromStatement()
	if err != nil {
		p := partial(env)
		p.APIv3Key = res.APIv3Key // a resource decrypted, then refused
		return p, err
	}
	res.Event.ReceivedAt = env.ReceivedAt
	if res.Registration != nil {
		return res, nil // not an event: no key, no fingerprint
	}
	if !res.Ignored {
		if err := checkTime("occurred_at", res.Event.OccurredAt); err != nil {
			p := partial(env)
			p.APIv3Key = res.APIv3Key
			return p, err
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

// unmarshal decodes one JSON document (decodeJSON); a *Error raised
// inside (an amount's UnmarshalJSON) keeps its kind, anything else is
// KindMalformed.
func unmarshal(data []byte, v any, what string) error {
	err := decodeJSON(data, v)
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return &Error{Kind: e.Kind, Err: fmt.Errorf("decode %s: %w", what, e.Err)}
	}
	return &Error{Kind: KindMalformed, Err: fmt.Errorf("decode %s: %w", what, err)}
}

// decodeJSON is json.Unmarshal reading each member once: a document in
// which a member name repeats within one object, exactly or differing only
// in case (which encoding/json would read as one member, its last value
// winning), fails with a *Error of KindMalformed (repeatedName), even when
// json.Unmarshal fails on it too; a document that is not JSON fails with
// json.Unmarshal's *json.SyntaxError.
func decodeJSON(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if _, bad := errors.AsType[*json.SyntaxError](err); bad {
		return err
	}
	// json.Unmarshal checks the whole document is JSON before it decodes,
	// so data is JSON here: what FirstRepeat needs.
	if rep := repeatedName(data); rep != nil {
		return rep
	}
	return err
}

// repeatedName refuses the JSON document data when a member name repeats
// within one of its objects (jsonscan.FirstRepeat): a *Error of
// KindMalformed naming both spellings and the object; nil when no name
// repeats. It quotes names, never values.
func repeatedName(data []byte) *Error {
	r, ok := jsonscan.FirstRepeat(data)
	if !ok {
		return nil
	}
	in := ""
	if r.Path != "" {
		in = " in " + quote(r.Path)
	}
	if r.Name == r.First {
		return errorf(KindMalformed, "member %s repeats%s: each member name may appear once", quote(r.Name), in)
	}
	return errorf(KindMalformed, "member %s repeats %s%s: names differing only in case are one member to a JSON decoder",
		quote(r.Name), quote(r.First), in)
}
