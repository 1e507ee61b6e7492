package settlement

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// RefundRequest asks to register a refund before the channel is asked to
// make it. RefundNo is the number the channel will be given and will report
// back (WeChat out_refund_no, Alipay out_request_no, Shouqianba
// refund_request_no); it is compared byte for byte. Amount is fen.
type RefundRequest struct {
	TenantID int64
	Channel  channels.Channel
	TradeNo  string
	RefundNo string
	Amount   int64
	// MerchantOrderNo, when set (a registration message names it), must
	// be the trade's: another one is refused with ErrRegistrationConflict.
	MerchantOrderNo string
}

// Validate checks r before it reaches the database; the error wraps
// ErrInvalidRequest.
func (r RefundRequest) Validate() error {
	if err := r.validRefund(); err != nil {
		return err
	}
	if r.Amount <= 0 || r.Amount > channels.MaxAmount {
		return fmt.Errorf("%w: amount %d fen: a refund registers a positive amount in fen (1 is ¥0.01), at most %d; "+
			"a refund that moves nothing is not registered", ErrInvalidRequest, r.Amount, channels.MaxAmount)
	}
	return nil
}

// validRefund checks what names the refund, whatever is asked of it: a
// positive tenant, a channel of the contract, and trade and refund numbers
// its key can be built from. The error wraps ErrInvalidRequest.
func (r RefundRequest) validRefund() error {
	if r.TenantID <= 0 {
		return fmt.Errorf("%w: tenant %d is not positive", ErrInvalidRequest, r.TenantID)
	}
	if !r.Channel.Valid() {
		return fmt.Errorf("%w: channel %q", ErrInvalidRequest, r.Channel)
	}
	if no := r.Channel.CancelRefundNo(); no != "" && r.RefundNo == no {
		return fmt.Errorf("%w: refund number %q is the one %s's cancel key reserves (a refund so numbered is dead-lettered, never settled)",
			ErrInvalidRequest, r.RefundNo, r.Channel)
	}
	_, err := r.key()
	return err
}

// key is the idempotency key of the refund's callback.
func (r RefundRequest) key() (idempotent.Key, error) {
	if len(r.TradeNo) > channels.MaxIDLen || len(r.RefundNo) > channels.MaxIDLen {
		return "", fmt.Errorf("%w: trade and refund numbers are at most %d bytes", ErrInvalidRequest, channels.MaxIDLen)
	}
	k, err := idempotent.NewRefundKey(string(r.Channel), r.TradeNo, r.RefundNo)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return k, nil
}

// RegisterRefund records r as REGISTERED in a transaction of its own,
// committed when it returns, so the initiator may then ask the channel to
// refund. The transaction locks the trade's order row, so the check
// "amount ≤ paid − refunded − open registrations" cannot race with other
// registrations or settlements of the trade. (On a cumulative channel a
// registration whose callback has not arrived yet while a later refund's
// has is counted both as open and inside the refunded total until its own
// callback arrives: conservative, never over-refunding.)
//
// Registering a refund number that is already registered for the trade
// returns the existing registration with Existing set, whatever its status,
// and a nil error when the amounts agree; when they differ it returns the
// existing registration and an error wrapping ErrRefundNoReused.
//
// Errors: ErrInvalidRequest (refused before the database), ErrNotPaid (no
// posted payment for the trade), ErrExceedsRefundable,
// ErrRegistrationConflict (r names another merchant order number than the
// trade's); anything else is a database error, safe to retry with the same
// request.
func (s *Service) RegisterRefund(ctx context.Context, r RefundRequest) (Registration, error) {
	if err := r.Validate(); err != nil {
		return Registration{}, fmt.Errorf("register refund %s: %w", r.RefundNo, err)
	}
	key, _ := r.key()
	var out Registration
	err := s.db.RunInTx(ctx, s.txOptions(), func(ctx context.Context, tx bun.Tx) error {
		ord, err := selectOrder(ctx, tx, r.TenantID, r.Channel, r.TradeNo, !s.sqlite)
		if errors.Is(err, errNoOrder) {
			return fmt.Errorf("%w: no order %s/%s", ErrNotPaid, r.Channel, r.TradeNo)
		}
		if err != nil {
			return err
		}
		if r.MerchantOrderNo != "" && ord.MerchantOrderNo != "" && r.MerchantOrderNo != ord.MerchantOrderNo {
			return fmt.Errorf("%w: merchant_order_no: the trade's is %s, the registration names %s",
				ErrRegistrationConflict, channels.Quote(ord.MerchantOrderNo), channels.Quote(r.MerchantOrderNo))
		}
		if existing, err := selectRegistration(ctx, tx, r.TenantID, r.Channel, r.TradeNo, r.RefundNo, !s.sqlite); err == nil {
			existing.Existing = true
			out = existing
			if existing.Amount != r.Amount {
				return fmt.Errorf("%w: registered %d, asked %d", ErrRefundNoReused, existing.Amount, r.Amount)
			}
			return nil
		} else if !errors.Is(err, errNoRegistration) {
			return err
		}
		if ord.PaidAmount == 0 {
			return fmt.Errorf("%w: order %s/%s is %s", ErrNotPaid, r.Channel, r.TradeNo, ord.Status)
		}
		sums, err := registrationSums(ctx, tx, r.TenantID, r.Channel, r.TradeNo)
		if err != nil {
			return err
		}
		remainder := ord.PaidAmount - ord.RefundedAmount - sums.open
		if r.Amount > remainder {
			return fmt.Errorf("%w: asked %d, paid %d, refunded %d, open registrations %d",
				ErrExceedsRefundable, r.Amount, ord.PaidAmount, ord.RefundedAmount, sums.open)
		}
		now := s.claims.Now()
		// The order row was read FOR UPDATE, but a locking read locks on
		// one server only: on a multi-primary cluster (Galera) two
		// registrations on two nodes would both pass the check above and
		// together exceed the refundable amount. Writing the order row puts
		// it in the transaction's write set, so the cluster commits only
		// one of them (the other fails at COMMIT with 1213 and is retried,
		// then sees the first). updated_at moves forward by at least a
		// microsecond: a row left unchanged is not written.
		if !s.sqlite {
			if _, err := tx.NewUpdate().Table("ss_channel_order").
				Set("updated_at = GREATEST(updated_at + INTERVAL 1 MICROSECOND, ?)", now).
				Where("id = ?", ord.ID).Exec(ctx); err != nil {
				return fmt.Errorf("register refund: write order: %w", err)
			}
		}
		k := string(key)
		out = Registration{
			TenantID: r.TenantID, Channel: r.Channel, TradeNo: r.TradeNo, RefundNo: r.RefundNo,
			Amount: r.Amount, Status: RegistrationRegistered, Key: &k, CreatedAt: now, UpdatedAt: now,
		}
		q := tx.NewInsert().Model(&out).
			Column("tenant_id", "channel_code", "channel_trade_no", "refund_no", "amount", "status",
				"idempotent_key", "created_at", "updated_at")
		if s.sqlite {
			q = q.Returning("id") // MySQL fills the id from LastInsertId
		}
		if _, err := q.Exec(ctx); err != nil {
			return fmt.Errorf("insert registration: %w", idempotent.ClassifyDuplicate(err))
		}
		return nil
	})
	if err != nil {
		if out.Existing && errors.Is(err, ErrRefundNoReused) {
			return out, fmt.Errorf("register refund %s: %w", r.RefundNo, err)
		}
		return Registration{}, fmt.Errorf("register refund %s: %w", r.RefundNo, err)
	}
	if !out.Existing {
		s.log.LogAttrs(ctx, slog.LevelInfo, "refund registered",
			slog.Int64("tenant", r.TenantID), slog.String("channel", string(r.Channel)),
			slog.String("trade_no", r.TradeNo), slog.String("refund_no", r.RefundNo), slog.Int64("amount", r.Amount))
	}
	return out, nil
}

// ErrRegistrationNotFound is returned by GetRegistration when the refund
// number is not registered for the trade.
var ErrRegistrationNotFound = errors.New("refund registration not found")

// errNoRegistration is the internal form of ErrRegistrationNotFound.
var errNoRegistration = ErrRegistrationNotFound

// GetRegistration reads one registration from the pool (the latest
// committed row). It returns an error wrapping ErrRegistrationNotFound when
// there is none.
func (s *Service) GetRegistration(ctx context.Context, tenantID int64, ch channels.Channel, tradeNo, refundNo string) (Registration, error) {
	reg, err := selectRegistration(ctx, s.db, tenantID, ch, tradeNo, refundNo, false)
	if err != nil {
		return Registration{}, fmt.Errorf("get registration: %w", err)
	}
	return reg, nil
}

func selectRegistration(ctx context.Context, db bun.IDB, tenantID int64, ch channels.Channel, tradeNo, refundNo string, forUpdate bool) (Registration, error) {
	var reg Registration
	q := db.NewSelect().Model(&reg).
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(ch)).
		Where("channel_trade_no = ?", tradeNo).
		Where("refund_no = ?", refundNo)
	if forUpdate {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Registration{}, fmt.Errorf("registration %s/%s/%s: %w", ch, tradeNo, refundNo, errNoRegistration)
		}
		return Registration{}, fmt.Errorf("read registration %s/%s/%s: %w", ch, tradeNo, refundNo, err)
	}
	reg.normalise()
	return reg, nil
}

type regSums struct {
	count     int
	open      int64 // REGISTERED + ABNORMAL
	succeeded int64
}

// registrationSums adds up a trade's registrations by status. Callers hold
// the trade's order row lock, which every writer that changes what these
// sums decide (RegisterRefund, settlement) takes first.
func registrationSums(ctx context.Context, tx bun.IDB, tenantID int64, ch channels.Channel, tradeNo string) (regSums, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
		Sum    int64  `bun:"total"`
	}
	err := tx.NewSelect().Table("ss_refund_request").
		ColumnExpr("status, COUNT(*) AS n, COALESCE(SUM(amount), 0) AS total").
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(ch)).
		Where("channel_trade_no = ?", tradeNo).
		Group("status").
		Scan(ctx, &rows)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return regSums{}, fmt.Errorf("sum registrations %s/%s: %w", ch, tradeNo, err)
	}
	var out regSums
	for _, r := range rows {
		out.count += r.N
		switch st := RegistrationStatus(r.Status); {
		case st.Open():
			out.open += r.Sum
		case st == RegistrationSucceeded:
			out.succeeded += r.Sum
		}
	}
	return out, nil
}

// applyRegistration moves the registration of st's refund (if found) to
// SUCCEEDED, conditionally on its current status, and notes what
// disagrees: no registration, a per-refund amount that differs, a CLOSED
// registration, or, on a cumulative channel, a refunded total outside what
// the trade's registrations allow; sums adds those up after the update.
// The order row ord is locked by tx; the settlement reads the
// registrations of a whole batch at once.
func (s *Service) applyRegistration(ctx context.Context, tx bun.Tx, st *settlement, ord Order, now time.Time,
	reg *Registration, found bool, sums func() (regSums, error),
) error {
	ev := st.ev
	if !found {
		st.unregistered = true
	} else {
		if !ev.Cumulative() && reg.Amount != ev.RefundAmount {
			st.regMismatches = append(st.regMismatches, MismatchAmount)
			st.regDetail = fmt.Sprintf("registered %d, refunded %d", reg.Amount, ev.RefundAmount)
		}
		if reg.Status == RegistrationClosed {
			st.regMismatches = append(st.regMismatches, MismatchClosed)
			st.regDetail = "registration was CLOSED"
		}
		if _, err := tx.NewUpdate().Table("ss_refund_request").
			Set("status = ?", string(RegistrationSucceeded)).
			Set("idempotent_key = ?", string(ev.Key)).
			Set("updated_at = ?", now).
			Where("id = ?", reg.ID).
			Where("status IN (?)", bun.List([]string{string(RegistrationRegistered), string(RegistrationAbnormal)})).
			Exec(ctx); err != nil {
			return fmt.Errorf("mark registration %s succeeded: %w", ev.RefundNo, err)
		}
		if reg.Status.Open() {
			reg.Status = RegistrationSucceeded // as the conditional update did
		}
	}
	if !ev.Cumulative() {
		return nil
	}
	sm, err := sums()
	if err != nil {
		return err
	}
	// Above succeeded + open only counts when every refund is expected
	// registered (SetRefundsPreregistered), as in reconcile.
	if sm.count > 0 && (sm.succeeded > ord.RefundedAmount || (s.preregistered && ord.RefundedAmount > sm.succeeded+sm.open)) {
		st.regMismatches = append(st.regMismatches, MismatchCumulative)
		st.regDetail = fmt.Sprintf("refunded %d, succeeded registrations %d, open %d", ord.RefundedAmount, sm.succeeded, sm.open)
	}
	return nil
}

// sumRegistrations adds up registrations held in memory, like
// registrationSums does in the database.
func sumRegistrations(regs []*Registration) regSums {
	var out regSums
	for _, r := range regs {
		out.count++
		switch {
		case r.Status.Open():
			out.open += r.Amount
		case r.Status == RegistrationSucceeded:
			out.succeeded += r.Amount
		}
	}
	return out
}

// ApplyRefundStatus applies a WeChat REFUND.ABNORMAL or REFUND.CLOSED to the
// matching registration: ABNORMAL moves REGISTERED to ABNORMAL, CLOSED moves
// REGISTERED or ABNORMAL to CLOSED. Each is one conditional update, so a
// redelivered callback, a registration already final, or no registration
// at all changes nothing and returns nil. A success is settled by Settle,
// not here: RefundSuccess and unknown statuses wrap ErrInvalidRequest. Other
// errors are database errors, safe to retry.
func (s *Service) ApplyRefundStatus(ctx context.Context, tenantID int64, channel channels.Channel, tradeNo, refundNo string, status channels.RefundStatus) error {
	var to RegistrationStatus
	var from []string
	switch status {
	case channels.RefundAbnormal:
		to, from = RegistrationAbnormal, []string{string(RegistrationRegistered)}
	case channels.RefundClosed:
		to, from = RegistrationClosed, []string{string(RegistrationRegistered), string(RegistrationAbnormal)}
	default:
		return fmt.Errorf("apply refund status %s to %s/%s: %w: only ABNORMAL and CLOSED are applied here",
			status, tradeNo, refundNo, ErrInvalidRequest)
	}
	res, err := s.db.NewUpdate().Table("ss_refund_request").
		Set("status = ?", string(to)).
		Set("updated_at = ?", s.claims.Now()).
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(channel)).
		Where("channel_trade_no = ?", tradeNo).
		Where("refund_no = ?", refundNo).
		Where("status IN (?)", bun.List(from)).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("apply refund status %s to %s/%s: %w", status, tradeNo, refundNo, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		s.log.LogAttrs(ctx, slog.LevelInfo, "refund registration updated",
			slog.Int64("tenant", tenantID), slog.String("channel", string(channel)),
			slog.String("trade_no", tradeNo), slog.String("refund_no", refundNo), slog.String("status", string(to)))
	}
	return nil
}
