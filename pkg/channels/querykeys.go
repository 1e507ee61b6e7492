package channels

import (
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/eventkey"
)

// PublicKeyEntry is one entry of PAYCB_CHANNEL_PUBLIC_KEYS_FILE, as
// written: {channel: WECHAT, merchant_id, key_id, public_key_file} or
// {channel: ALIPAY, app_id, public_key_file}. Which fields a channel needs
// is its own (Spec.ParsePublicKey).
type PublicKeyEntry struct {
	Channel       Channel `yaml:"channel"`
	MerchantID    string  `yaml:"merchant_id"`
	AppID         string  `yaml:"app_id"`
	KeyID         string  `yaml:"key_id"`
	PublicKeyFile string  `yaml:"public_key_file"`
}

// ChannelPublicKeys are the channels' public keys that query answers are
// verified with: each channel's entries of PAYCB_CHANNEL_PUBLIC_KEYS_FILE,
// parsed by that channel's Spec.ParsePublicKey into the channel's own key
// type, which only the channel's Spec.ReadQueryAnswer reads back. The
// zero value holds no key: every answer a channel signs is then
// unauthenticated. A ChannelPublicKeys is immutable once built.
type ChannelPublicKeys struct {
	keys map[Channel][]any
}

// NewChannelPublicKeys parses entries, pems[i] being the bytes of
// entries[i].PublicKeyFile, each with its channel's Spec.ParsePublicKey.
// An entry of an unknown channel, of a channel whose answers are not
// signed (no ParsePublicKey: Shouqianba) or that its channel refuses is an
// error naming the entry by position and file.
func NewChannelPublicKeys(entries []PublicKeyEntry, pems [][]byte) (ChannelPublicKeys, error) {
	if len(entries) != len(pems) {
		return ChannelPublicKeys{}, fmt.Errorf("channel public keys: %d entries, %d key files", len(entries), len(pems))
	}
	keys := map[Channel][]any{}
	for i, e := range entries {
		spec, ok := Lookup(e.Channel)
		switch {
		case !ok:
			return ChannelPublicKeys{}, fmt.Errorf("channel public key %d (%s): unknown channel %s: want %s",
				i+1, e.PublicKeyFile, quote(string(e.Channel)), CodeList())
		case spec.ParsePublicKey == nil:
			return ChannelPublicKeys{}, fmt.Errorf("channel public key %d (%s): channel %s does not sign its query answers: it takes no public key",
				i+1, e.PublicKeyFile, e.Channel)
		}
		k, err := spec.ParsePublicKey(e, pems[i])
		if err != nil {
			return ChannelPublicKeys{}, fmt.Errorf("channel public key %d (%s): %w", i+1, e.PublicKeyFile, err)
		}
		keys[e.Channel] = append(keys[e.Channel], k)
	}
	return ChannelPublicKeys{keys: keys}, nil
}

// Of returns the keys of channel ch, as its Spec.ParsePublicKey built
// them, in the file's order; nil when it has none. The slice is shared:
// callers must not modify it.
func (k ChannelPublicKeys) Of(ch Channel) []any { return k.keys[ch] }

// Len is the number of keys held, of all channels.
func (k ChannelPublicKeys) Len() int {
	n := 0
	for _, ks := range k.keys {
		n += len(ks)
	}
	return n
}

// QueryKeySource gives the channel public keys in force now: a file
// re-read when it changes (*watchfile.File[ChannelPublicKeys]) or fixed
// keys (FixedQueryKeys).
type QueryKeySource interface {
	Current() ChannelPublicKeys
}

// FixedQueryKeys is a QueryKeySource that always gives the same keys.
type FixedQueryKeys ChannelPublicKeys

// Current returns the keys.
func (f FixedQueryKeys) Current() ChannelPublicKeys { return ChannelPublicKeys(f) }

// VerifyQueryAnswers makes DecodeMessage read query answers (content type
// ContentTypeQuery), once their statement signature is checked, with the
// channel's Spec.ReadQueryAnswer and the keys src holds when the message
// is decoded. Without it (or with a nil src) every answer of a channel
// that signs its answers (one with a Spec.ParsePublicKey) is
// KindUnauthenticated, and those of a channel that does not (Shouqianba)
// are read on the statement signature alone.
func VerifyQueryAnswers(src QueryKeySource) DecoderOption {
	return func(d *Decoder) { d.queryKeys = src }
}

// decodeQuery reads the body of a ContentTypeQuery envelope whose
// statement signature DecodeMessage has checked: the QueryMessage, then
// the answer it carries, verified and read by the channel's
// ReadQueryAnswer with the decoder's channel public keys, its timestamp
// judged at the envelope's received_at (when our querier says the answer
// came, which the statement signature vouches for), never at the worker's
// clock: an answer consumed hours later in a backlog or a replay is judged
// as it was received, and an old answer re-sent is refused.
//
// A settled answer decodes to its events: the first is Result.Event, the
// others Result.More, each the event the channel's callback would have
// produced. Any other answer, and a settled one that proves no event, is
// ignored with the outcome as its reason. Result.MerchantID is the
// merchant the answer names, else the one the message says was asked for;
// Result.AppID the application whose key verified it, where the channel
// keys answers by application (Alipay).
func (d *Decoder) decodeQuery(env Envelope, spec *Spec) (Result, error) {
	msg, err := ParseQueryMessage(env)
	if err != nil {
		return Result{}, err
	}
	if spec.ReadQueryAnswer == nil {
		return Result{}, errorf(KindUnsupported, "query answer: channel %s has no query answer reader", env.Channel)
	}
	var keys ChannelPublicKeys
	if d.queryKeys != nil {
		keys = d.queryKeys.Current()
	} else if spec.ParsePublicKey != nil {
		return Result{}, errorf(KindUnauthenticated,
			"query answer: no channel public keys are configured (PAYCB_CHANNEL_PUBLIC_KEYS_FILE): a %s answer cannot be verified", env.Channel)
	}
	target := msg.Target(env.TenantID, Channel(env.Channel))
	ans, err := spec.ReadQueryAnswer(target, msg.Response(env.ReceivedAt), keys, env.ReceivedAt)
	if err != nil {
		return Result{}, wrapKind(err, "query answer")
	}
	merchant := ans.MerchantID
	if merchant == "" {
		merchant = msg.MerchantID
	}
	res := Result{
		MerchantID: merchant, AppID: ans.AppID, FromQuery: true,
		Query: &QueryAnswered{Target: target, Answer: ans, AskedAt: msg.AskedAt},
	}
	if ans.Outcome == QuerySettled && len(ans.Events) > 0 {
		res.Event = ans.Events[0]
		res.More = append([]Event(nil), ans.Events[1:]...)
		if res.Event.Type == eventkey.RefundSucceeded {
			res.RefundStatus = RefundSuccess
		}
		return res, nil
	}
	res.Ignored = true
	res.IgnoreReason = fmt.Sprintf("query answer %s (%s): %s", ans.Outcome, ans.RawState, ans.Detail)
	res.Event = Event{
		Type: typeOfKind(target.Kind), TradeNo: target.TradeNo,
		MerchantOrderNo: target.MerchantOrderNo, RefundNo: target.RefundNo,
	}
	return res, nil
}

// typeOfKind is the event type a query of kind asks about, the label an
// ignored answer is counted under.
func typeOfKind(kind QueryKind) eventkey.EventType {
	if kind == QueryRefund {
		return eventkey.RefundSucceeded
	}
	return eventkey.PaymentReceived
}

// QueryAnswered is what the worker read from a query answer: what was
// asked (its tenant and channel are the envelope's), when, and the
// verified answer.
type QueryAnswered struct {
	Target  QueryTarget
	AskedAt time.Time
	Answer  QueryAnswer
}
