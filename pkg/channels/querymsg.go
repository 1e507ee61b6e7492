package channels

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// ContentTypeQuery is the media type of an envelope carrying a channel's
// answer to an active query, published by the querier (consumer query
// run, consumer query once --publish). Its body is a QueryMessage as JSON;
// the envelope's tenant and channel are the query's, its received_at the
// time the answer came. Like a statement event it is signed with the
// statement key (x-paycb-statement-signature); where the channel signs its
// answers, the worker verifies that signature too before reading it.
const ContentTypeQuery = "application/vnd.paycb.query+json"

// QueryMessage is the body of a ContentTypeQuery envelope: what was asked,
// when, and the channel's answer exactly as received. AnswerBody and the
// header values are the received bytes carried as JSON strings (decoding
// gives back the same bytes): the channels sign those bytes, and nothing
// in the answer is ever re-encoded.
type QueryMessage struct {
	// Kind, MerchantID, MerchantOrderNo, TradeNo and RefundNo are the
	// QueryTarget asked about (its tenant and channel are the envelope's).
	Kind            QueryKind `json:"kind"`
	MerchantID      string    `json:"merchant_id"`
	MerchantOrderNo string    `json:"merchant_order_no,omitempty"`
	TradeNo         string    `json:"trade_no,omitempty"`
	RefundNo        string    `json:"refund_no,omitempty"`
	// AskedAt is when the request was sent.
	AskedAt time.Time `json:"asked_at"`
	// Status is the answer's HTTP status code.
	Status int `json:"status"`
	// Headers are the answer headers the channel's verification reads
	// (WeChat's Wechatpay-*), canonical names, every value kept: a
	// repeated signature header must stay visible to be refused.
	Headers http.Header `json:"headers,omitempty"`
	// AnswerBody is the answer's body as received.
	AnswerBody string `json:"answer_body"`
}

// Target returns the query target the message says was asked, for the
// envelope's tenant and channel.
func (m QueryMessage) Target(tenantID int64, channel Channel) QueryTarget {
	return QueryTarget{
		TenantID: tenantID, Channel: channel, Kind: m.Kind, MerchantID: m.MerchantID,
		MerchantOrderNo: m.MerchantOrderNo, TradeNo: m.TradeNo, RefundNo: m.RefundNo,
	}
}

// Response returns the channel's answer the message carries, received at
// receivedAt (the envelope's received_at).
func (m QueryMessage) Response(receivedAt time.Time) QueryResponse {
	return QueryResponse{StatusCode: m.Status, Header: m.Headers.Clone(), Body: []byte(m.AnswerBody), ReceivedAt: receivedAt.UTC()}
}

// QueryEnvelope returns the Kafka value carrying the answer resp to a query
// of target sent at askedAt: content type ContentTypeQuery, the target's
// tenant and channel, received_at resp.ReceivedAt. Only the headers named
// in keepHeaders are carried (the channel's Spec.QueryAnswerHeaders). It
// fails with KindMalformed when the target does not check (CheckQueryTarget),
// when the answer's body or a kept header is not UTF-8 (a JSON string could
// not carry its bytes unchanged), or when the envelope would exceed
// MaxEnvelopeBytes. The value still needs its x-paycb-statement-signature.
func QueryEnvelope(target QueryTarget, askedAt time.Time, resp QueryResponse, keepHeaders []string) ([]byte, error) {
	if err := CheckQueryTarget(target); err != nil {
		return nil, err
	}
	if !utf8.Valid(resp.Body) {
		return nil, errorf(KindMalformed, "query answer body is not UTF-8: it cannot be carried unchanged")
	}
	msg := QueryMessage{
		Kind: target.Kind, MerchantID: target.MerchantID, MerchantOrderNo: target.MerchantOrderNo,
		TradeNo: target.TradeNo, RefundNo: target.RefundNo, AskedAt: askedAt.UTC(),
		Status: resp.StatusCode, AnswerBody: string(resp.Body),
	}
	for _, name := range keepHeaders {
		values := resp.Header.Values(name)
		for _, v := range values {
			if !utf8.ValidString(v) {
				return nil, errorf(KindMalformed, "query answer header %s is not UTF-8", name)
			}
		}
		if len(values) > 0 {
			if msg.Headers == nil {
				msg.Headers = http.Header{}
			}
			msg.Headers[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
		}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("query message: %w", err)
	}
	value, err := json.Marshal(Envelope{
		TenantID: target.TenantID, Channel: string(target.Channel), ReceivedAt: resp.ReceivedAt.UTC(),
		ContentType: ContentTypeQuery, Body: string(body),
	})
	if err != nil {
		return nil, fmt.Errorf("query envelope: %w", err)
	}
	if len(value) > MaxEnvelopeBytes {
		return nil, errorf(KindMalformed, "query envelope is %d bytes, at most %d", len(value), MaxEnvelopeBytes)
	}
	return value, nil
}

// ParseQueryMessage reads the body of a ContentTypeQuery envelope strictly
// (a repeated member, an unknown one or trailing data is KindMalformed)
// and checks the target it names (CheckQueryTarget) and the status (100 to
// 599). It says nothing of whether the answer is genuine: that is the
// channel's verification, which the worker runs next.
func ParseQueryMessage(env Envelope) (QueryMessage, error) {
	var m QueryMessage
	if err := decodeJSONStrict([]byte(env.Body), &m); err != nil {
		return QueryMessage{}, wrapKind(err, "decode query message")
	}
	if m.Status < 100 || m.Status > 599 {
		return QueryMessage{}, errorf(KindMalformed, "query message status %d is not an HTTP status", m.Status)
	}
	if m.AskedAt.IsZero() {
		return QueryMessage{}, errorf(KindMalformed, "query message has no asked_at")
	}
	if err := CheckQueryTarget(m.Target(env.TenantID, Channel(env.Channel))); err != nil {
		return QueryMessage{}, err
	}
	return m, nil
}

// CheckQueryTarget refuses a target that cannot be asked: a tenant that is
// not positive, an unknown channel or kind, an identifier that is not a
// short printable string, a payment with neither merchant order nor trade
// number, or a refund without a refund number or trade identity.
func CheckQueryTarget(t QueryTarget) error {
	if t.TenantID <= 0 {
		return errorf(KindMalformed, "query target tenant %d is not positive", t.TenantID)
	}
	if !t.Channel.Valid() {
		return errorf(KindUnknownChannel, "query target channel %s", quote(string(t.Channel)))
	}
	if err := checkID("query target merchant_id", t.MerchantID); err != nil {
		return err
	}
	for name, v := range map[string]string{"merchant_order_no": t.MerchantOrderNo, "trade_no": t.TradeNo, "refund_no": t.RefundNo} {
		if v == "" {
			continue
		}
		if err := checkID("query target "+name, v); err != nil {
			return err
		}
	}
	if t.MerchantOrderNo == "" && t.TradeNo == "" {
		return errorf(KindMalformed, "query target names neither a merchant order number nor a trade number")
	}
	switch t.Kind {
	case QueryPayment:
		if t.RefundNo != "" {
			return errorf(KindMalformed, "payment query target names a refund number")
		}
	case QueryRefund:
		if t.RefundNo == "" {
			return errorf(KindMalformed, "refund query target names no refund number")
		}
	default:
		return errorf(KindMalformed, "query target kind %s", quote(string(t.Kind)))
	}
	return nil
}

// decodeJSONStrict is decodeJSON for the project's own messages: besides a
// repeated member, an unknown member and anything after the document are
// refused too.
func decodeJSONStrict(data []byte, v any) error {
	if err := decodeJSON(data, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errorf(KindMalformed, "data after the JSON document")
	}
	return nil
}
