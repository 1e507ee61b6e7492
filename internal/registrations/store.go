package registrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Kind is what a registration registers: KindPayment or KindRefund (the
// label values of the registration metrics).
type Kind string

// The registration kinds.
const (
	KindPayment Kind = "PAYMENT"
	KindRefund  Kind = "REFUND"
)

// Kinds lists every Kind, in the order the metrics and consumer status show
// them.
var Kinds = []Kind{KindPayment, KindRefund}

// openStatuses are the statuses of a registration not settled, closed or
// expired.
var openStatuses = []string{string(settlement.RegistrationRegistered), string(settlement.RegistrationAbnormal)}

// Store reads and updates registrations on a pool. Now is its clock (UTC);
// nil is time.Now.
type Store struct {
	DB  bun.IDB
	Now func() time.Time
}

// NewStore returns a Store on db with the system clock.
func NewStore(db *bun.DB) *Store { return &Store{DB: db} }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Open is one open registration (REGISTERED or ABNORMAL). A payment names
// its merchant order number and expiry, a refund its trade and refund
// numbers (its merchant is the one its trade's payment was bound for, ""
// when none was checked); RegisteredAt is when the worker recorded it.
type Open struct {
	Kind            Kind
	TenantID        int64
	Channel         channels.Channel
	MerchantID      string
	MerchantOrderNo string
	TradeNo         string
	RefundNo        string
	Amount          int64
	Status          settlement.RegistrationStatus
	RegisteredAt    time.Time
	ExpiresAt       time.Time // zero for a refund
}

// Open returns the open registrations of kind recorded at or before
// registeredBefore (the querier passes now minus its first wait), oldest
// first, at most limit (limit ≤ 0: 100). The querier should run
// settlement.Service.SettleFromOrders first, so that none of them is a
// payment already posted.
func (s *Store) Open(ctx context.Context, kind Kind, registeredBefore time.Time, limit int) ([]Open, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []Open
	switch kind {
	case KindPayment:
		var rows []settlement.PaymentRegistration
		err := s.DB.NewSelect().Model(&rows).
			Where("status IN (?)", bun.List(openStatuses)).
			Where("registered_at <= ?", registeredBefore.UTC()).
			OrderExpr("registered_at, id").Limit(int64(limit)).Scan(ctx)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("list open payment registrations: %w", err)
		}
		for _, r := range rows {
			out = append(out, Open{
				Kind: KindPayment, TenantID: r.TenantID, Channel: r.Channel, MerchantID: r.MerchantID,
				MerchantOrderNo: r.MerchantOrderNo, Amount: r.Amount, Status: r.Status,
				RegisteredAt: r.RegisteredAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
			})
		}
	case KindRefund:
		var rows []struct {
			TenantID        int64     `bun:"tenant_id"`
			Channel         string    `bun:"channel_code"`
			TradeNo         string    `bun:"channel_trade_no"`
			RefundNo        string    `bun:"refund_no"`
			Amount          int64     `bun:"amount"`
			Status          string    `bun:"status"`
			CreatedAt       time.Time `bun:"created_at"`
			MerchantOrderNo *string   `bun:"merchant_order_no"`
			Merchant        *string   `bun:"bound_merchant_id"`
		}
		err := s.DB.NewSelect().TableExpr("ss_refund_request AS rr").
			ColumnExpr("rr.tenant_id, rr.channel_code, rr.channel_trade_no, rr.refund_no, rr.amount, rr.status, rr.created_at").
			ColumnExpr("o.merchant_order_no, o.bound_merchant_id").
			Join("LEFT JOIN ss_channel_order AS o ON o.tenant_id = rr.tenant_id AND o.channel_code = rr.channel_code AND o.channel_trade_no = rr.channel_trade_no").
			Where("rr.status IN (?)", bun.List(openStatuses)).
			Where("rr.created_at <= ?", registeredBefore.UTC()).
			OrderExpr("rr.created_at, rr.id").Limit(int64(limit)).Scan(ctx, &rows)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("list open refund registrations: %w", err)
		}
		for _, r := range rows {
			o := Open{
				Kind: KindRefund, TenantID: r.TenantID, Channel: channels.Channel(r.Channel), TradeNo: r.TradeNo,
				RefundNo: r.RefundNo, Amount: r.Amount, Status: settlement.RegistrationStatus(r.Status), RegisteredAt: r.CreatedAt.UTC(),
			}
			if r.MerchantOrderNo != nil {
				o.MerchantOrderNo = *r.MerchantOrderNo
			}
			if r.Merchant != nil {
				o.MerchantID = *r.Merchant
			}
			out = append(out, o)
		}
	default:
		return nil, fmt.Errorf("list open registrations: kind %q is not PAYMENT or REFUND", kind)
	}
	return out, nil
}

// ErrTransition is wrapped by SetPaymentStatus and SetRefundStatus for a
// move the registration states do not have.
var ErrTransition = errors.New("not a registration status move")

// paymentMoves are the moves SetPaymentStatus makes: to ABNORMAL from
// REGISTERED; to CLOSED or EXPIRED from REGISTERED or ABNORMAL.
var paymentMoves = map[settlement.RegistrationStatus][]string{
	settlement.RegistrationAbnormal: {string(settlement.RegistrationRegistered)},
	settlement.RegistrationClosed:   openStatuses,
	settlement.RegistrationExpired:  openStatuses,
}

// refundMoves are SetRefundStatus's: a refund registration never expires
// (the channel keeps a refund it was asked for).
var refundMoves = map[settlement.RegistrationStatus][]string{
	settlement.RegistrationAbnormal: {string(settlement.RegistrationRegistered)},
	settlement.RegistrationClosed:   openStatuses,
}

// SetPaymentStatus moves the payment registration of merchantOrderNo to
// status to (ABNORMAL, CLOSED or EXPIRED; see paymentMoves) with one
// update conditional on its current status, and reports whether it moved:
// a registration already SUCCEEDED or final, or none, is left alone and
// returns false. Another target wraps ErrTransition.
func (s *Store) SetPaymentStatus(ctx context.Context, tenantID int64, ch channels.Channel, merchantOrderNo string, to settlement.RegistrationStatus) (bool, error) {
	from, ok := paymentMoves[to]
	if !ok {
		return false, fmt.Errorf("set payment registration %s/%s to %s: %w", ch, merchantOrderNo, to, ErrTransition)
	}
	res, err := s.DB.NewUpdate().Table("ss_payment_registration").
		Set("status = ?", string(to)).
		Set("updated_at = ?", s.now()).
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(ch)).
		Where("merchant_order_no = ?", merchantOrderNo).
		Where("status IN (?)", bun.List(from)).
		Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("set payment registration %s/%s to %s: %w", ch, merchantOrderNo, to, err)
	}
	return moved(res)
}

// SetRefundStatus moves the refund registration of (tradeNo, refundNo) to
// ABNORMAL or CLOSED, as SetPaymentStatus does.
func (s *Store) SetRefundStatus(ctx context.Context, tenantID int64, ch channels.Channel, tradeNo, refundNo string, to settlement.RegistrationStatus) (bool, error) {
	from, ok := refundMoves[to]
	if !ok {
		return false, fmt.Errorf("set refund registration %s/%s/%s to %s: %w", ch, tradeNo, refundNo, to, ErrTransition)
	}
	res, err := s.DB.NewUpdate().Table("ss_refund_request").
		Set("status = ?", string(to)).
		Set("updated_at = ?", s.now()).
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(ch)).
		Where("channel_trade_no = ?", tradeNo).
		Where("refund_no = ?", refundNo).
		Where("status IN (?)", bun.List(from)).
		Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("set refund registration %s/%s/%s to %s: %w", ch, tradeNo, refundNo, to, err)
	}
	return moved(res)
}

func moved(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("rows changed: %w", err)
	}
	return n > 0, nil
}

// Stat is the standing of one channel's open registrations of one kind:
// how many, when the oldest was recorded (zero when none), and how many
// payments are past their expiry (always 0 for refunds).
type Stat struct {
	Channel    channels.Channel
	Kind       Kind
	Open       int64
	Oldest     time.Time
	PastExpiry int64
}

// Stats returns a Stat for every channel and kind (zeros included), in
// channel order then Kinds order, as of the store's clock.
func (s *Store) Stats(ctx context.Context) ([]Stat, error) {
	now := s.now()
	var out []Stat
	for _, ch := range channels.Codes() {
		for _, kind := range Kinds {
			st := Stat{Channel: ch, Kind: kind}
			table, at := "ss_payment_registration", "registered_at"
			if kind == KindRefund {
				table, at = "ss_refund_request", "created_at"
			}
			q := func() *bun.SelectQuery {
				return s.DB.NewSelect().Table(table).
					Where("status IN (?)", bun.List(openStatuses)).
					Where("channel_code = ?", string(ch))
			}
			n, err := q().Count(ctx)
			if err != nil {
				return nil, fmt.Errorf("count open %s registrations of %s: %w", kind, ch, err)
			}
			st.Open = n
			if n > 0 {
				var oldest []time.Time
				if err := q().Column(at).OrderExpr(at).Limit(1).Scan(ctx, &oldest); err != nil {
					return nil, fmt.Errorf("read the oldest open %s registration of %s: %w", kind, ch, err)
				}
				if len(oldest) > 0 {
					st.Oldest = oldest[0].UTC()
				}
				if kind == KindPayment {
					past, err := q().Where("expires_at < ?", now).Count(ctx)
					if err != nil {
						return nil, fmt.Errorf("count expired open payment registrations of %s: %w", ch, err)
					}
					st.PastExpiry = past
				}
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// AgeBounds are the ages consumer status groups open registrations by:
// under a minute (a callback is still expected), under 15 minutes (the
// querier's work), under an hour, under a day, and older.
var AgeBounds = []time.Duration{time.Minute, 15 * time.Minute, time.Hour, 24 * time.Hour}

// ByAge is one channel's open registrations of one kind by age since they
// were recorded: Counts[i] are those younger than AgeBounds[i] and not
// younger than the bound before; the last count is those older than every
// bound.
type ByAge struct {
	Channel channels.Channel `json:"channel"`
	Kind    Kind             `json:"kind"`
	Counts  []int64          `json:"counts"`
}

// Ages returns, for every channel and kind with an open registration, its
// open registrations by age (AgeBounds), as of the store's clock.
func (s *Store) Ages(ctx context.Context) ([]ByAge, error) {
	now := s.now()
	var out []ByAge
	for _, ch := range channels.Codes() {
		for _, kind := range Kinds {
			table, at := "ss_payment_registration", "registered_at"
			if kind == KindRefund {
				table, at = "ss_refund_request", "created_at"
			}
			q := func() *bun.SelectQuery {
				return s.DB.NewSelect().Table(table).
					Where("status IN (?)", bun.List(openStatuses)).
					Where("channel_code = ?", string(ch))
			}
			total, err := q().Count(ctx)
			if err != nil {
				return nil, fmt.Errorf("count open %s registrations of %s: %w", kind, ch, err)
			}
			if total == 0 {
				continue
			}
			row := ByAge{Channel: ch, Kind: kind, Counts: make([]int64, len(AgeBounds)+1)}
			var younger int64 // those younger than the previous bound
			for i, b := range AgeBounds {
				n, err := q().Where(at+" > ?", now.Add(-b)).Count(ctx)
				if err != nil {
					return nil, fmt.Errorf("count open %s registrations of %s younger than %s: %w", kind, ch, b, err)
				}
				row.Counts[i] = n - younger
				younger = n
			}
			row.Counts[len(AgeBounds)] = total - younger
			out = append(out, row)
		}
	}
	return out, nil
}
