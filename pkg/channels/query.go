package channels

import (
	"net/http"
	"time"
)

// Active query (主动查单): what the worker learns by asking a channel about
// an order or a refund no callback settled. Each channel package holds its
// query client: how a request is built and signed with the merchant's API
// credentials, how the answer's signature is verified, and how the answer
// is read. What is common to all of them is here: what is asked
// (QueryTarget), the request and the answer as they cross the wire
// (QueryRequest, QueryResponse) and what the answer means (QueryAnswer).
// Facts and sources: docs/queries.md.

// QueryKind says what a query asks about.
type QueryKind string

// The query kinds.
const (
	// QueryPayment asks about an order: paid, not yet, or closed unpaid.
	QueryPayment QueryKind = "PAYMENT"
	// QueryRefund asks about one refund of a trade.
	QueryRefund QueryKind = "REFUND"
)

// QueryTarget names the order or refund a query asks about, as its
// registration or a statement item knows it.
type QueryTarget struct {
	// TenantID is the tenant the order is registered for; the events an
	// answer proves are the tenant's.
	TenantID int64
	// Channel is the channel asked.
	Channel Channel
	// Kind is what is asked about.
	Kind QueryKind
	// MerchantID is the merchant the query is sent for, as the merchant
	// binding names it (WeChat mchid or sub_mchid, Alipay PID, Shouqianba
	// terminal_sn).
	MerchantID string
	// MerchantOrderNo is the merchant's order number (out_trade_no,
	// client_sn): an order not paid yet is found by it alone.
	MerchantOrderNo string
	// TradeNo is the channel's trade number, when known; where a channel
	// takes either, it is sent instead of MerchantOrderNo.
	TradeNo string
	// RefundNo is the refund's number on a refund query (WeChat
	// out_refund_no, Alipay out_request_no, Shouqianba the refund's
	// client_tsn suffix or refund_request_no), compared byte for byte.
	RefundNo string
}

// QueryRequest is one HTTPS request to a channel's API, complete and
// signed: sent as it is.
type QueryRequest struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// QueryResponse is a channel's answer as received. Nothing in it is ever
// re-encoded: the channels sign the raw bytes.
type QueryResponse struct {
	StatusCode int
	// Header holds the answer's headers (WeChat's Wechatpay-Timestamp,
	// Wechatpay-Nonce, Wechatpay-Signature and Wechatpay-Serial).
	Header http.Header
	Body   []byte
	// ReceivedAt is when the answer came: the ReceivedAt of the events it
	// proves.
	ReceivedAt time.Time
}

// QueryOutcome says what an answer means for the order or refund asked
// about, and so what the querier does next.
type QueryOutcome string

// The query outcomes.
const (
	// QuerySettled: final, and the answer proves QueryAnswer.Events (a
	// payment; a refund; or both, for a WeChat order in REFUND or a
	// Shouqianba order refunded), each the event the channel's callback
	// would have produced: same key, same fingerprint.
	QuerySettled QueryOutcome = "settled"
	// QueryPending: not final yet (NOTPAY, USERPAYING, WAIT_BUYER_PAY,
	// CREATED, PROCESSING): ask again later.
	QueryPending QueryOutcome = "pending"
	// QueryClosed: final without money moving: the order ended unpaid, or
	// the refund failed. The registration is closed; nothing is posted.
	QueryClosed QueryOutcome = "closed"
	// QueryNotFound: the channel does not know the order or refund. Not
	// final for a young order: the querier time-boxes it from creation.
	QueryNotFound QueryOutcome = "not_found"
	// QueryUncertain: the channel cannot say (WeChat PAYERROR, refund
	// ABNORMAL, Shouqianba *_ERROR, an answer read two ways): nothing is
	// posted, an operator is alerted, the querier asks again slowly.
	QueryUncertain QueryOutcome = "uncertain"
	// QueryThrottled: the channel limits the rate: the querier backs this
	// merchant off.
	QueryThrottled QueryOutcome = "throttled"
	// QueryRetry: a transient failure (5xx, SYSTEM_ERROR, a timeout): ask
	// again.
	QueryRetry QueryOutcome = "retry"
	// QueryRefused: the channel refuses our request or credentials
	// (SIGN_ERROR, NO_AUTH, INVALID_TERMINAL, a bad parameter): the
	// querier stops asking for this merchant and alerts.
	QueryRefused QueryOutcome = "refused"
)

// QueryAnswer is what a verified answer says.
type QueryAnswer struct {
	Outcome QueryOutcome
	// RawState is the channel's own state or error code, for logs, metrics
	// and operators ("SUCCESS", "NOTPAY", "ACQ.TRADE_NOT_EXIST").
	RawState string
	// Events are what a QuerySettled answer proves, in the order they
	// happened, with ReceivedAt the answer's time; empty otherwise.
	Events []Event
	// MerchantID is the merchant the answer names, empty when it names
	// none (Alipay's answers never do).
	MerchantID string
	// AppID is the application whose public key verified the answer, for a
	// channel whose keys are the application's (Alipay app_id); empty
	// otherwise.
	AppID string
	// Detail explains the outcome in a sentence, for operators.
	Detail string
}

// CompleteQueryEvent completes ev, built by a channel's answer decoder
// with its key, amounts, times and raw status, exactly as the Decoder
// completes a callback's event (currency, fingerprint), and validates it:
// an answer proves the very event its callback would have produced.
func CompleteQueryEvent(ev Event, receivedAt time.Time) (Event, error) {
	ev.ReceivedAt = receivedAt.UTC()
	ev.OccurredAt = ev.OccurredAt.UTC()
	if err := checkTime("occurred_at", ev.OccurredAt); err != nil {
		return Event{}, err
	}
	ev.Currency = CurrencyCNY
	ev.Fingerprint = Fingerprint(ev)
	if err := ev.Validate(); err != nil {
		return Event{}, wrapKind(err, "query answer event")
	}
	return ev, nil
}
