package sample

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// APIv3Key is the fake WeChat APIv3 key of the test vectors in
// docs/channels.md.
const APIv3Key = "0123456789abcdef0123456789abcdef"

// Keys returns a key provider that gives APIv3Key to every tenant.
func Keys() channels.StaticKeys { return channels.StaticKeys{Default: APIv3Key} }

// Beijing is UTC+8, the zone the channels write their times in.
var Beijing = time.FixedZone("CST", 8*3600)

// BaseTime is the default payment time: 2024-06-01 12:00:05 Beijing time.
var BaseTime = time.Date(2024, 6, 1, 12, 0, 5, 0, Beijing)

// Trade is one order paid through a channel.
type Trade struct {
	TenantID        int64            // default 1001
	Channel         channels.Channel // WECHAT, ALIPAY or SQB
	TradeNo         string           // the channel's trade number (transaction_id, trade_no, sn)
	MerchantOrderNo string           // out_trade_no / client_sn
	Total           int64            // order total in fen
	PaidAt          time.Time        // default BaseTime
}

// NewTrade returns a trade with realistic, unique numbers for seq on the
// channel: tenant 1001, total 2580 fen, paid at BaseTime plus seq seconds.
func NewTrade(ch channels.Channel, seq int) Trade {
	t := Trade{
		TenantID:        1001,
		Channel:         ch,
		MerchantOrderNo: fmt.Sprintf("POS20240601%06d", seq),
		Total:           2580,
		PaidAt:          BaseTime.Add(time.Duration(seq) * time.Second),
	}
	if b, ok := BodiesOf(ch); ok {
		t.TradeNo = b.TradeNo(seq)
	} else {
		t.TradeNo = fmt.Sprintf("789325%010d", seq)
	}
	return t
}

// Refund is one refund of a trade.
type Refund struct {
	// No is the refund number: WeChat out_refund_no, Alipay out_biz_no,
	// Shouqianba refund_request_no.
	No string
	// Amount is this refund's own amount in fen (WeChat).
	Amount int64
	// Cumulative is the amount refunded so far, this refund included
	// (Alipay refund_fee, Shouqianba total_amount - net_amount). When zero,
	// Amount is used.
	Cumulative int64
	// At is when the refund succeeded; default the trade's PaidAt + 1h.
	At time.Time
}

// SQBForm chooses how a Shouqianba refund carries its refund number.
type SQBForm int

// The Shouqianba refund shapes.
const (
	// SQBRequestNo: refund_request_no and client_tsn (client_sn-no).
	SQBRequestNo SQBForm = iota
	// SQBClientTSN: only client_tsn; the number is its suffix.
	SQBClientTSN
	// SQBNoRefundNo: neither; the decoder falls back to the cumulative amount.
	SQBNoRefundNo
	// SQBAPIResponse: the refund API response forwarded by the receiver
	// ({"result_code":"200","biz_response":{"data":{...}}}), with client_tsn.
	SQBAPIResponse
)

// Delivery describes one delivery of a notification. The zero value is the
// first delivery with defaults.
type Delivery struct {
	// Attempt numbers redeliveries (0 = first). It changes the delivery
	// fields that are left empty below.
	Attempt int
	// ReceivedAt is the envelope's received_at; default the notify time
	// plus 120ms.
	ReceivedAt time.Time
	// NotifyTime is Alipay's notify_time (and the basis of the WeChat
	// create_time); default the event time + 1s + 4min per attempt.
	NotifyTime time.Time
	// NotifyID is Alipay's notify_id; default stable per notification.
	NotifyID string
	// ID is the WeChat envelope id; default derived from the notification
	// and attempt.
	ID string
	// Nonce is the WeChat resource nonce, 12 bytes; default derived from
	// the notification and attempt.
	Nonce string
	// APIv3Key encrypts WeChat resources; default APIv3Key.
	APIv3Key string
	// Partner uses WeChat partner-mode field names (sp_mchid, sub_mchid).
	Partner bool
	// SQB chooses the Shouqianba refund shape.
	SQB SQBForm
	// Edit, when set, changes the payload before it is encoded: the WeChat
	// decrypted resource, the Alipay form fields (values are formatted with
	// fmt.Sprint; delete a key to drop a field) or the Shouqianba order
	// fields.
	Edit func(payload map[string]any)
}

// PaymentEnvelope is the payment notification of t on its channel.
func PaymentEnvelope(t Trade, d Delivery) []byte {
	return mustBodies(t.Channel).Payment(t, d)
}

// StatementPayment is the statement event `consumer statement reconcile
// --publish-missing` would publish for t's payment (rebuilt from what a
// statement line says, so its key and fingerprint are the callback's) and
// the message value it publishes, unsigned. It panics if t's payment does
// not decode: a test's own mistake.
func StatementPayment(t Trade) (channels.Event, []byte) {
	res, err := channels.NewDecoder(Keys()).Decode(PaymentEnvelope(t, Delivery{}))
	if err != nil {
		panic(err)
	}
	cb := res.Event
	ev, err := channels.NewStatementEvent(channels.Event{
		TenantID: cb.TenantID, Channel: cb.Channel, Type: cb.Type, TradeNo: cb.TradeNo, MerchantOrderNo: cb.MerchantOrderNo,
		OrderTotal: cb.OrderTotal, OccurredAt: cb.OccurredAt, ReceivedAt: time.Now(), RawStatus: "SUCCESS",
	})
	if err != nil {
		panic(err)
	}
	value, err := channels.StatementEnvelope(ev, time.Now())
	if err != nil {
		panic(err)
	}
	return ev, value
}

// RefundEnvelope is the successful refund notification of r on t's channel
// (for Alipay a partial refund, or a full one when the cumulative reaches the
// total; for Shouqianba PARTIAL_REFUNDED or REFUNDED likewise).
func RefundEnvelope(t Trade, r Refund, d Delivery) []byte {
	return mustBodies(t.Channel).Refund(t, r, d)
}

// Envelope wraps a body in the contract's envelope JSON with the content
// type the contract gives the channel.
func Envelope(tenantID int64, ch channels.Channel, body string, receivedAt time.Time) []byte {
	return EnvelopeWith(channels.Envelope{
		TenantID:    tenantID,
		Channel:     string(ch),
		ReceivedAt:  receivedAt,
		ContentType: ch.ContentType(),
		Body:        body,
	})
}

// EnvelopeWith encodes env as is (for envelopes that break the contract).
// ReceivedAt is written in Beijing time with milliseconds, as the receiver
// does.
func EnvelopeWith(env channels.Envelope) []byte {
	type wire struct {
		TenantID    int64  `json:"tenant_id"`
		Channel     string `json:"channel"`
		ReceivedAt  string `json:"received_at"`
		ContentType string `json:"content_type"`
		Body        string `json:"body"`
	}
	w := wire{env.TenantID, env.Channel, "", env.ContentType, env.Body}
	if !env.ReceivedAt.IsZero() {
		w.ReceivedAt = env.ReceivedAt.In(Beijing).Format("2006-01-02T15:04:05.000Z07:00")
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- helpers ----

// WithDefaults fills what t leaves zero: tenant 1001, paid at BaseTime.
func (t Trade) WithDefaults() Trade {
	if t.TenantID == 0 {
		t.TenantID = 1001
	}
	if t.PaidAt.IsZero() {
		t.PaidAt = BaseTime
	}
	return t
}

// WithDefaults fills what r leaves zero: Cumulative and Amount from each
// other, At an hour after t was paid.
func (r Refund) WithDefaults(t Trade) Refund {
	if r.Cumulative == 0 {
		r.Cumulative = r.Amount
	}
	if r.Amount == 0 {
		r.Amount = r.Cumulative
	}
	if r.At.IsZero() {
		r.At = t.PaidAt.Add(time.Hour)
	}
	return r
}

// NotifyAt is when the channel notifies of an event at event: NotifyTime,
// else a second later plus 4 minutes per attempt.
func (d Delivery) NotifyAt(event time.Time) time.Time {
	if !d.NotifyTime.IsZero() {
		return d.NotifyTime
	}
	return event.Add(time.Second + AttemptDelay(d.Attempt, 4*time.Minute))
}

// ReceivedAtFor is the envelope's received_at for a notification sent at
// notify: ReceivedAt, else 120ms later.
func (d Delivery) ReceivedAtFor(notify time.Time) time.Time {
	if !d.ReceivedAt.IsZero() {
		return d.ReceivedAt
	}
	return notify.Add(120 * time.Millisecond)
}

// AttemptDelay is attempt times step: how much later a redelivery comes.
func AttemptDelay(attempt int, step time.Duration) time.Duration {
	return time.Duration(attempt) * step
}

// Digest is a deterministic hex string derived from seed, attempt and
// purpose.
func Digest(seed string, attempt int, purpose string) string {
	sum := sha256.Sum256([]byte(purpose + "\x00" + seed + "\x00" + strconv.Itoa(attempt)))
	return hex.EncodeToString(sum[:])
}

// Digits is a deterministic string of n decimal digits derived from seed.
func Digits(seed string, n int) string {
	sum := sha256.Sum256([]byte(seed))
	out := make([]byte, n)
	for i := range out {
		out[i] = '0' + sum[i%len(sum)]%10
	}
	return string(out)
}

// MustJSON is json.Marshal of v, panicking on failure (a caller's own
// mistake).
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
