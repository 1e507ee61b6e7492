package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/paycallback/paycallback/pkg/internal/registry"
)

// RefundModel says how a channel reports the amount of a refund.
type RefundModel uint8

// The refund models.
const (
	// PerRefund: each refund callback reports that refund's own amount
	// (Event.RefundAmount; WeChat amount.refund). Settlement posts it as it
	// is.
	PerRefund RefundModel = iota + 1
	// CumulativeRefunds: each refund callback reports the amount refunded
	// so far (Event.CumulativeRefunded; Alipay refund_fee, Shouqianba total
	// minus net). Settlement posts the delta against the highest cumulative
	// recorded for the trade.
	CumulativeRefunds
)

// String returns "per refund" or "cumulative".
func (m RefundModel) String() string {
	switch m {
	case PerRefund:
		return "per refund"
	case CumulativeRefunds:
		return "cumulative"
	}
	return fmt.Sprintf("RefundModel(%d)", uint8(m))
}

// BodyDecoder decodes the body of one envelope of its channel into a
// Result. The envelope is already validated (tenant, channel, content type,
// size, received_at); keys are the Decoder's APIv3 keys, for channels whose
// bodies are encrypted per tenant. It must set, on a money-moving Result,
// Event.Type, TradeNo, MerchantOrderNo, RefundNo, the amounts its
// RefundModel prescribes, OccurredAt, RawStatus and Key; the Decoder then
// sets TenantID, Channel, ReceivedAt, Currency and Fingerprint. Every error
// must be a *Error (a dead-letter kind), and permanent. A BodyDecoder holds
// no state and is safe for concurrent use.
type BodyDecoder func(env Envelope, keys KeyProvider) (Result, error)

// Spec is everything the worker knows of one payment channel: the one
// place a channel is written down. Every package that needs a per-channel
// fact (the decoder, the configuration's accepted channels, the metrics'
// label values, settlement's refund arithmetic and reconciliation, the
// merchant binding, the demo, the tests) asks the registry (All, Lookup)
// rather than naming channels. Statement parsers live in package
// statements, keyed by Code; a test there checks that every registered
// channel has one.
type Spec struct {
	// Code is the channel code of envelopes, keys, order rows, accounts
	// and labels: upper case, at most 16 bytes, no ':' (it is the first
	// part of every idempotency key).
	Code Channel
	// Name is the channel's name for people ("WeChat Pay").
	Name string
	// ContentType is the media type the contract prescribes for the
	// channel's callback bodies (ContentTypeJSON or ContentTypeForm).
	ContentType string
	// Refunds is how the channel reports a refund's amount.
	Refunds RefundModel
	// CancelRefundNo, when not empty, is the refund number of the channel's
	// cancel: a refund event that nets the trade to zero whatever was
	// refunded before and whatever arrives after (Shouqianba CANCELED,
	// numbered "CANCEL"; see Event.IsCancel and CancelKey). A channel with
	// a cancel reports refunds cumulatively. Empty: no cancel.
	CancelRefundNo string
	// MerchantField names the callback field(s) Result.MerchantID is read
	// from, for messages ("mchid or sub_mchid").
	MerchantField string
	// AppField names the callback field Result.AppID is read from, for a
	// channel whose callbacks name the application they were sent for
	// (Alipay app_id): the merchant binding may then bind a tenant's
	// applications, and a callback of another application is refused.
	// Empty: the channel's callbacks are not checked by application.
	AppField string
	// StatementMerchantField names where the channel's daily statement
	// names its merchant, for messages ("商户号 or 特约商户号").
	StatementMerchantField string
	// FingerprintFields names the callback fields the fingerprinted event
	// fields (Fingerprint: the event type, the reported amounts, the
	// currency and the merchant order number) are read from, in that
	// order: what a conflict means on this channel.
	FingerprintFields []string
	// Decode decodes a callback body of the channel. Callers decode through
	// a Decoder, which checks the envelope first and completes the event.
	Decode BodyDecoder
	// RefundMayNameNoMerchant reports that the channel's refund and cancel
	// answers may carry no merchant (Shouqianba's, forwarded as the refund
	// or cancel API's answer): the merchant binding then checks the trade's
	// payment instead of refusing the refund.
	RefundMayNameNoMerchant bool
	// NeedsAPIv3Key reports that the channel's callbacks are encrypted with
	// the tenant's APIv3 key (WeChat Pay): the worker refuses to start with
	// the channel accepted and no key configured, since every callback of
	// it would be dead-lettered no_key.
	NeedsAPIv3Key bool
	// ViewResource, when set, shows an operator the encrypted resource of
	// one of the channel's callbacks (consumer dlq show): everything but
	// its plaintext, which it decrypts only when keys is not nil. It
	// returns nil for a body that carries no resource it can read.
	ViewResource func(env Envelope, keys KeyProvider) *ResourceView
	// RefundQuery names the channel API that tells a refund as the
	// channel's books hold it, for messages that send an operator there
	// (empty: "the channel's refund query").
	RefundQuery string
	// OrderQuery names the channel API that tells an order's state, for
	// messages that send an operator there (empty: the channel has none
	// that the worker names).
	OrderQuery string
	// ParseQueryCredentials reads one PAYCB_QUERY_CREDENTIALS_FILE entry
	// of the channel (its own fields and key files); BuildQuery builds and
	// signs the request asking about target with such credentials, for
	// the API at baseURL, at now with nonce (docs/queries.md). Both or
	// neither: a channel without them cannot be queried.
	ParseQueryCredentials func(entry QueryCredentialsEntry) (QueryCredentials, error)
	BuildQuery            func(target QueryTarget, creds QueryCredentials, baseURL string, now time.Time, nonce string) (QueryRequest, error)

	// Query answers (docs/queries.md). ReadQueryAnswer verifies, where the
	// channel signs its answers, and reads resp, the answer to target, with
	// the channel's keys of keys, judging the answer's timestamp at now
	// (the envelope's received_at in the worker); nil: the channel's
	// answers are unsupported. QueryAnswerHeaders are the answer headers
	// it reads, the ones a query message carries. ParsePublicKey builds
	// one of the channel's keys from its PAYCB_CHANNEL_PUBLIC_KEYS_FILE
	// entry and key file; nil: the channel does not sign its answers
	// (Shouqianba: TLS to the configured host is all there is) and takes
	// no key.
	ReadQueryAnswer    func(target QueryTarget, resp QueryResponse, keys ChannelPublicKeys, now time.Time) (QueryAnswer, error)
	QueryAnswerHeaders []string
	ParsePublicKey     func(entry PublicKeyEntry, pem []byte) (any, error)
}

// ResourceView is the encrypted resource of a callback as an operator sees
// it (Spec.ViewResource): everything but its plaintext, which is personal
// data (a payer's openid) and shown only when decrypted on request.
type ResourceView struct {
	EventType        string `json:"event_type"`
	Algorithm        string `json:"algorithm"`
	AssociatedData   string `json:"associated_data"`
	Nonce            string `json:"nonce"`
	OriginalType     string `json:"original_type"`
	CiphertextLength int    `json:"ciphertext_length"`
	// Decrypted is the resource's plaintext; only with decryption asked
	// for and a key that opens it.
	Decrypted json.RawMessage `json:"decrypted,omitempty"`
	// DecryptError says why decryption, asked for, failed.
	DecryptError string `json:"decrypt_error,omitempty"`
}

// Cumulative reports whether the channel reports refunds as the cumulative
// amount refunded so far.
func (s Spec) Cumulative() bool { return s.Refunds == CumulativeRefunds }

// MetricLabel is the channel's value of the channel label of
// paycb_events_total: its code (the contract names the label values by
// code). A channel that is not registered is labelled UNKNOWN.
func (s Spec) MetricLabel() string { return string(s.Code) }

// Validate checks that s can be registered: a code of upper-case letters
// and digits, at most 16 bytes; a name, a content type, a refund model, a
// merchant field, a statement merchant field, fingerprint fields and a
// decoder; a cancel only on a cumulative channel.
func (s Spec) Validate() error {
	var problems []string
	if s.Code == "" || len(s.Code) > 16 || strings.TrimFunc(string(s.Code), func(r rune) bool {
		return r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}) != "" {
		problems = append(problems, fmt.Sprintf("code %q is not 1 to 16 upper-case letters and digits", s.Code))
	}
	if s.Name == "" {
		problems = append(problems, "no name")
	}
	if s.ContentType != ContentTypeJSON && s.ContentType != ContentTypeForm {
		problems = append(problems, fmt.Sprintf("content type %q is neither %s nor %s", s.ContentType, ContentTypeJSON, ContentTypeForm))
	}
	if s.Refunds != PerRefund && s.Refunds != CumulativeRefunds {
		problems = append(problems, "no refund model")
	}
	if s.CancelRefundNo != "" && !s.Cumulative() {
		problems = append(problems, "a cancel on a channel whose refunds are not cumulative")
	}
	if s.MerchantField == "" || s.StatementMerchantField == "" {
		problems = append(problems, "no merchant field (callback and statement)")
	}
	if len(s.FingerprintFields) == 0 {
		problems = append(problems, "no fingerprint fields")
	}
	if s.Decode == nil {
		problems = append(problems, "no decoder")
	}
	if (s.BuildQuery == nil) != (s.ParseQueryCredentials == nil) {
		problems = append(problems, "a query builder without a credentials parser, or the other way round")
	}
	if len(problems) > 0 {
		return fmt.Errorf("channel spec %s: %s", s.Code, strings.Join(problems, "; "))
	}
	return nil
}

// specSet is one immutable state of the registry.
type specSet struct {
	list []Spec
	// list is short (a handful of channels): a scan beats a map.
}

func (s *specSet) lookup(c Channel) (*Spec, bool) {
	for i := range s.list {
		if s.list[i].Code == c {
			return &s.list[i], true
		}
	}
	return nil, false
}

var (
	// specs is the registry: the channels allchannels registers, in its
	// order, plus those a test registered (channelstest.Register). Reads
	// are one atomic load.
	specs atomic.Pointer[specSet]
	// registerMu serialises test registrations.
	registerMu sync.Mutex
)

func init() {
	specs.Store(&specSet{})
	registry.Channel = register
}

// current is the registry as it stands.
func current() *specSet { return specs.Load() }

// All returns every registered channel, built-in channels first in their
// fixed order (WECHAT, ALIPAY, SQB). The slice is the caller's.
func All() []Spec { return slices.Clone(current().list) }

// Codes returns the codes of All, in its order.
func Codes() []Channel {
	list := current().list
	out := make([]Channel, len(list))
	for i, s := range list {
		out[i] = s.Code
	}
	return out
}

// CodeStrings returns the codes of All as strings, in its order.
func CodeStrings() []string {
	list := current().list
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s.Code)
	}
	return out
}

// CodeList returns the codes of All for messages: "WECHAT, ALIPAY or SQB".
func CodeList() string {
	names := CodeStrings()
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Lookup returns the Spec of the channel code c and whether it is
// registered. Codes compare exactly: "wechat" is not registered.
func Lookup(c Channel) (Spec, bool) {
	s, ok := current().lookup(c)
	if !ok {
		return Spec{}, false
	}
	return *s, true
}

// register adds spec to the registry and returns the function that removes
// it again. It is reached only through package channelstest (Register),
// which needs a testing.TB: production code cannot register a channel.
func register(v any) (func(), error) {
	spec, ok := v.(Spec)
	if !ok {
		return nil, fmt.Errorf("register channel: %T is not a channels.Spec", v)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("register channel: %w", err)
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	cur := current()
	if _, dup := cur.lookup(spec.Code); dup {
		return nil, fmt.Errorf("register channel: %w: %s", errAlreadyRegistered, spec.Code)
	}
	spec.FingerprintFields = slices.Clone(spec.FingerprintFields)
	spec.QueryAnswerHeaders = slices.Clone(spec.QueryAnswerHeaders)
	specs.Store(&specSet{list: append(slices.Clone(cur.list), spec)})
	return func() {
		registerMu.Lock()
		defer registerMu.Unlock()
		cur := current()
		specs.Store(&specSet{list: slices.DeleteFunc(slices.Clone(cur.list), func(s Spec) bool { return s.Code == spec.Code })})
	}, nil
}

var errAlreadyRegistered = errors.New("channel already registered")

// CancelKey is the idempotency key of the cancel of trade tradeNo on
// channel ch: <ch>:<tradeNo>:REFUND_SUCCEEDED:<Spec.CancelRefundNo>. It
// fails with KindUnsupported when ch has no cancel, and with KindMalformed
// for a trade number no key can be built of.
func CancelKey(ch Channel, tradeNo string) (eventkey.Key, error) {
	no := ch.CancelRefundNo()
	if no == "" {
		return "", errorf(KindUnsupported, "channel %s has no cancel", quote(string(ch)))
	}
	return refundKey(ch, tradeNo, no)
}

// CancelRefundNo returns the refund number of the channel's cancel
// (Spec.CancelRefundNo: "CANCEL" for Shouqianba), "" when it has none or
// is not registered.
func (c Channel) CancelRefundNo() string {
	if s, ok := current().lookup(c); ok {
		return s.CancelRefundNo
	}
	return ""
}

// HasCancel reports whether the channel has a cancel (Spec.CancelRefundNo):
// a refund event that nets the trade to zero.
func (c Channel) HasCancel() bool { return c.CancelRefundNo() != "" }
