package settlement

import (
	"errors"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
)

// Ledger accounts (contract.md). A channel's receivable account is
// ReceivableAccount(channel).
const (
	// AccountMerchantPayable is what the platform owes the merchant.
	AccountMerchantPayable = "merchant_payable"
	// AccountReceivablePrefix prefixes a channel code to name what the
	// channel owes the platform: channel_receivable:WECHAT.
	AccountReceivablePrefix = "channel_receivable:"
)

// ReceivableAccount names the receivable account of ch, for example
// "channel_receivable:ALIPAY".
func ReceivableAccount(ch channels.Channel) string { return AccountReceivablePrefix + string(ch) }

// Direction is the side of a ledger row.
type Direction string

// The two sides of a posting.
const (
	Debit  Direction = "DEBIT"
	Credit Direction = "CREDIT"
)

// OrderStatus is a channel order's state, derived from its amounts only
// (see DeriveStatus), so it is the same for every arrival order.
type OrderStatus string

// The contract's order statuses.
const (
	// OrderPendingPayment: known so far only from refunds.
	OrderPendingPayment OrderStatus = "PENDING_PAYMENT"
	// OrderPaid: paid, nothing refunded.
	OrderPaid OrderStatus = "PAID"
	// OrderPartiallyRefunded: paid, part of the total refunded.
	OrderPartiallyRefunded OrderStatus = "PARTIALLY_REFUNDED"
	// OrderRefunded: paid, the whole total refunded.
	OrderRefunded OrderStatus = "REFUNDED"
)

// DeriveStatus is the order status for an order total, the payment posted
// (0 when none) and the amount refunded: PENDING_PAYMENT without a payment,
// else PAID, PARTIALLY_REFUNDED or REFUNDED (refunded reaches the total).
func DeriveStatus(total, paid, refunded int64) OrderStatus {
	switch {
	case paid == 0:
		return OrderPendingPayment
	case refunded == 0:
		return OrderPaid
	case refunded >= total:
		return OrderRefunded
	default:
		return OrderPartiallyRefunded
	}
}

// RegistrationStatus is a registration's state: REGISTERED, then
// SUCCEEDED or CLOSED (both final), with ABNORMAL possible in between; a
// payment registration may also end EXPIRED (the channel never knew the
// order, past its time).
type RegistrationStatus string

// The contract's registration statuses.
const (
	RegistrationRegistered RegistrationStatus = "REGISTERED"
	RegistrationAbnormal   RegistrationStatus = "ABNORMAL"
	RegistrationSucceeded  RegistrationStatus = "SUCCEEDED"
	RegistrationClosed     RegistrationStatus = "CLOSED"
	RegistrationExpired    RegistrationStatus = "EXPIRED"
)

// Open reports whether the registration may still move money (REGISTERED
// or ABNORMAL); open registrations count against what is left to refund.
func (s RegistrationStatus) Open() bool {
	return s == RegistrationRegistered || s == RegistrationAbnormal
}

// Errors. Settle's permanent errors wrap ErrInvalidEvent,
// ErrFingerprintMismatch or idempotent.ErrNotFound; every other error it
// returns is an infrastructure error (deadlock, lock wait timeout, lost
// connection, cancelled context) that is safe to retry in place.
var (
	// ErrInvalidEvent marks an event that fails channels.Event.Validate, or
	// a stored claim whose event cannot be decoded or does not match it.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrFingerprintMismatch marks an event whose fingerprint differs from
	// the claim's: it is not the event that was claimed.
	ErrFingerprintMismatch = idempotent.ErrFingerprintMismatch
	// ErrInvalidRequest marks a registration (payment or refund) or a
	// refund status update that is refused before touching the database.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrNotPaid marks a registration against a trade with no posted
	// payment (or no order row at all).
	ErrNotPaid = errors.New("trade has no posted payment")
	// ErrExceedsRefundable marks a registration whose amount exceeds the
	// paid amount minus refunds and other open registrations.
	ErrExceedsRefundable = errors.New("refund exceeds the refundable remainder")
	// ErrRefundNoReused marks a registration whose refund number is already
	// registered for the trade with a different amount.
	ErrRefundNoReused = errors.New("refund number already registered with a different amount")
)

// Order is one ss_channel_order row: a trade of one channel under one
// tenant. Amounts are fen.
type Order struct {
	bun.BaseModel `bun:"table:ss_channel_order"`

	ID                  int64            `bun:"id,pk,autoincrement"`
	TenantID            int64            `bun:"tenant_id"`
	Channel             channels.Channel `bun:"channel_code"`
	TradeNo             string           `bun:"channel_trade_no"`
	MerchantOrderNo     string           `bun:"merchant_order_no"`
	Amount              int64            `bun:"amount"`
	PaidAmount          int64            `bun:"paid_amount"`
	RefundedAmount      int64            `bun:"refunded_amount"`
	MaxCumulativeRefund int64            `bun:"max_cumulative_refund"`
	Currency            string           `bun:"currency"`
	Status              OrderStatus      `bun:"status"`
	PaidAt              *time.Time       `bun:"paid_at"`
	LastRefundAt        *time.Time       `bun:"last_refund_at"`
	// BoundMerchantID is the merchant the worker's merchant check passed
	// the trade's payment for (channels.Event.BoundMerchant), recorded when
	// the payment settled; "" when no payment is posted or it was posted
	// unchecked.
	BoundMerchantID string `bun:"bound_merchant_id"`
	// SettledSeq is the trade_seq of the trade's latest settled event (0:
	// none yet): settling an event that writes one advances it by one, in
	// the transaction that writes the event, under the row's lock.
	SettledSeq int64     `bun:"settled_seq"`
	CreatedAt  time.Time `bun:"created_at"`
	UpdatedAt  time.Time `bun:"updated_at"`

	// cancel is what a settlement knows of the trade's Shouqianba cancel
	// that still waits for a payment to reverse; not a column: the cancel's
	// claim (SETTLED, NO_MONEY) remembers it between transactions.
	cancel pendingCancel `bun:"-"`
	// created: the row was inserted by the transaction that holds it, so
	// no transaction committed before it had settled anything of the trade
	// (settling any event creates or locks the row first).
	created bool `bun:"-"`
}

// pendingCancel is a Shouqianba CANCELED order settled while no payment was
// posted: it moved nothing, and the payment, once settled, is reversed at
// once under the cancel's key.
type pendingCancel struct {
	pending bool
	// batchIndex is the cancel event's index in the batch that decided it,
	// -1 when its claim was settled by an earlier transaction.
	batchIndex int
	// occurredAt and source are those of the cancel settled by an earlier
	// transaction, read from the event stored on its claim, for the
	// settled event its reversal writes (zero when it holds none).
	occurredAt time.Time
	source     settled.Source
}

// normalise puts the times in UTC, whatever the driver returned.
func (o *Order) normalise() {
	o.PaidAt = utcPtr(o.PaidAt)
	o.LastRefundAt = utcPtr(o.LastRefundAt)
	o.CreatedAt = o.CreatedAt.UTC()
	o.UpdatedAt = o.UpdatedAt.UTC()
}

// ledgerRow is one ss_ledger_entry row.
type ledgerRow struct {
	bun.BaseModel `bun:"table:ss_ledger_entry"`

	ID            int64     `bun:"id,pk,autoincrement"`
	TenantID      int64     `bun:"tenant_id"`
	IdempotentKey string    `bun:"idempotent_key"`
	Channel       string    `bun:"channel_code"`
	TradeNo       string    `bun:"channel_trade_no"`
	Account       string    `bun:"account"`
	Direction     string    `bun:"direction"`
	Amount        int64     `bun:"amount"`
	Currency      string    `bun:"currency"`
	CreatedAt     time.Time `bun:"created_at"`
}

// Registration is one refund pre-registration (an ss_refund_request row).
type Registration struct {
	bun.BaseModel `bun:"table:ss_refund_request"`

	ID       int64              `bun:"id,pk,autoincrement"`
	TenantID int64              `bun:"tenant_id"`
	Channel  channels.Channel   `bun:"channel_code"`
	TradeNo  string             `bun:"channel_trade_no"`
	RefundNo string             `bun:"refund_no"`
	Amount   int64              `bun:"amount"`
	Status   RegistrationStatus `bun:"status"`
	// Key is the idempotency key the refund's callback carries.
	Key       *string   `bun:"idempotent_key"`
	CreatedAt time.Time `bun:"created_at"`
	UpdatedAt time.Time `bun:"updated_at"`
	// Existing is true when RegisterRefund found the refund number already
	// registered and returned that registration unchanged.
	Existing bool `bun:"-"`
}

func (r *Registration) normalise() {
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// dbTime is t as the DATETIME(6) columns keep it: UTC, microseconds.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
