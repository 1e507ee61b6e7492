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

// PaymentRequest asks to register a payment before the channel is asked for
// it: the merchant order number (WeChat and Alipay out_trade_no, Shouqianba
// client_sn) is known, the channel's trade number is not yet. MerchantID is
// the merchant as the merchant binding names it; Amount is fen; ExpiresAt
// is when the order stops being payable.
type PaymentRequest struct {
	TenantID        int64
	Channel         channels.Channel
	MerchantID      string
	MerchantOrderNo string
	Amount          int64
	Currency        string
	CreatedAt       time.Time
	ExpiresAt       time.Time
}

// Validate checks r before it reaches the database, with the registration
// message's rules (channels.ParseRegistration); the error wraps
// ErrInvalidRequest.
func (r PaymentRequest) Validate() error {
	if r.TenantID <= 0 {
		return fmt.Errorf("%w: tenant %d is not positive", ErrInvalidRequest, r.TenantID)
	}
	if !r.Channel.Valid() {
		return fmt.Errorf("%w: channel %q", ErrInvalidRequest, r.Channel)
	}
	m := channels.RegistrationMessage{
		Kind: channels.RegistrationPayment, MerchantID: r.MerchantID, MerchantOrderNo: r.MerchantOrderNo,
		Amount: r.Amount, Currency: r.Currency, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
	}
	if _, err := channels.RegistrationEnvelope(r.TenantID, r.Channel, r.CreatedAt, m); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// PaymentRegistration is one payment registration (an
// ss_payment_registration row). TradeNo is the channel's trade number,
// set when a settled payment made it SUCCEEDED. CreatedAt and ExpiresAt
// are the registering service's; RegisteredAt is when the worker recorded
// it (its clock), from which the first wait before a query is counted.
type PaymentRegistration struct {
	bun.BaseModel `bun:"table:ss_payment_registration"`

	ID              int64              `bun:"id,pk,autoincrement"`
	TenantID        int64              `bun:"tenant_id"`
	Channel         channels.Channel   `bun:"channel_code"`
	MerchantID      string             `bun:"merchant_id"`
	MerchantOrderNo string             `bun:"merchant_order_no"`
	Amount          int64              `bun:"amount"`
	Currency        string             `bun:"currency"`
	Status          RegistrationStatus `bun:"status"`
	TradeNo         *string            `bun:"channel_trade_no"`
	CreatedAt       time.Time          `bun:"created_at"`
	ExpiresAt       time.Time          `bun:"expires_at"`
	RegisteredAt    time.Time          `bun:"registered_at"`
	UpdatedAt       time.Time          `bun:"updated_at"`
	// Existing is true when RegisterPayment found the order already
	// registered, the same, and changed nothing.
	Existing bool `bun:"-"`
}

func (r *PaymentRegistration) normalise() {
	r.CreatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.ExpiresAt.UTC()
	r.RegisteredAt, r.UpdatedAt = r.RegisteredAt.UTC(), r.UpdatedAt.UTC()
}

// ErrRegistrationConflict is wrapped by RegisterPayment's error when the
// merchant order number is already registered with another merchant,
// amount, currency or expiry: the contract's conflict.
var ErrRegistrationConflict = errors.New("registration contradicts an earlier registration of the same order")

// ErrPaymentRegistrationNotFound is wrapped by GetPaymentRegistration's
// error when the order is not registered.
var ErrPaymentRegistrationNotFound = errors.New("payment registration not found")

// errRegistered rolls back a registration whose order is registered
// already (the insert hit uk_payment_registration).
var errRegistered = errors.New("already registered")

// RegisterPayment records r as REGISTERED in a transaction of its own,
// committed when it returns. In that transaction, after its insert, it
// reads (locking) the order rows of r's merchant order number: when one
// has a payment posted, the registration is SUCCEEDED at once with that
// trade number. A settlement of the payment writes its order row first and
// then looks for the registration (markPaymentsRegistered), so whichever
// of the two commits second sees the other on an engine whose locking
// reads wait for rows another transaction inserted (InnoDB; see
// docs/design.md, "Registrations", and SettleFromOrders for the others).
//
// The same registration again (same merchant, amount, currency and
// expiry; created_at is not compared) changes nothing and returns the
// stored row with Existing set. One that differs returns the stored row
// and an error wrapping ErrRegistrationConflict. Only the unique key's
// duplicate-key error means "already registered".
//
// Errors: ErrInvalidRequest (refused before the database),
// ErrRegistrationConflict; anything else is a database error, safe to
// retry with the same request. A deadlock or write conflict with a
// concurrent settlement is retried here twice.
func (s *Service) RegisterPayment(ctx context.Context, r PaymentRequest) (PaymentRegistration, error) {
	if err := r.Validate(); err != nil {
		return PaymentRegistration{}, fmt.Errorf("register payment %s: %w", r.MerchantOrderNo, err)
	}
	var (
		out PaymentRegistration
		err error
	)
	for attempt := 0; ; attempt++ {
		out, err = s.registerPaymentTx(ctx, r)
		if attempt < 2 && idempotent.IsRetryableConflict(err) {
			continue
		}
		break
	}
	switch {
	case errors.Is(err, errRegistered):
		existing, err := s.GetPaymentRegistration(ctx, r.TenantID, r.Channel, r.MerchantOrderNo)
		if err != nil {
			return PaymentRegistration{}, fmt.Errorf("register payment %s: %w", r.MerchantOrderNo, err)
		}
		existing.Existing = true
		if diff := paymentDiff(existing, r); diff != "" {
			return existing, fmt.Errorf("register payment %s: %w: %s", r.MerchantOrderNo, ErrRegistrationConflict, diff)
		}
		return existing, nil
	case err != nil:
		return PaymentRegistration{}, fmt.Errorf("register payment %s: %w", r.MerchantOrderNo, err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "payment registered",
		slog.Int64("tenant", r.TenantID), slog.String("channel", string(r.Channel)),
		slog.String("merchant_order_no", r.MerchantOrderNo), slog.Int64("amount", r.Amount),
		slog.String("status", string(out.Status)))
	return out, nil
}

// paymentDiff names what r contradicts in the stored registration, "" when
// nothing.
func paymentDiff(reg PaymentRegistration, r PaymentRequest) string {
	switch {
	case reg.Amount != r.Amount:
		return fmt.Sprintf("amount: registered %d, now %d", reg.Amount, r.Amount)
	case reg.Currency != r.Currency:
		return fmt.Sprintf("currency: registered %s, now %s", reg.Currency, r.Currency)
	case reg.MerchantID != r.MerchantID:
		return fmt.Sprintf("merchant_id: registered %s, now %s", channels.Quote(reg.MerchantID), channels.Quote(r.MerchantID))
	case !reg.ExpiresAt.Equal(dbTime(r.ExpiresAt)):
		return fmt.Sprintf("expires_at: registered %s, now %s",
			reg.ExpiresAt.Format(time.RFC3339Nano), dbTime(r.ExpiresAt).Format(time.RFC3339Nano))
	}
	return ""
}

// registerPaymentTx is one attempt at RegisterPayment's transaction; it
// fails with errRegistered when the order is registered already.
func (s *Service) registerPaymentTx(ctx context.Context, r PaymentRequest) (PaymentRegistration, error) {
	var out PaymentRegistration
	err := s.db.RunInTx(ctx, s.txOptions(), func(ctx context.Context, tx bun.Tx) error {
		now := dbTime(s.claims.Now())
		out = PaymentRegistration{
			TenantID: r.TenantID, Channel: r.Channel, MerchantID: r.MerchantID, MerchantOrderNo: r.MerchantOrderNo,
			Amount: r.Amount, Currency: r.Currency, Status: RegistrationRegistered,
			CreatedAt: dbTime(r.CreatedAt), ExpiresAt: dbTime(r.ExpiresAt), RegisteredAt: now, UpdatedAt: now,
		}
		q := tx.NewInsert().Model(&out).
			Column("tenant_id", "channel_code", "merchant_id", "merchant_order_no", "amount", "currency", "status",
				"created_at", "expires_at", "registered_at", "updated_at")
		if s.sqlite {
			q = q.Returning("id") // MySQL fills the id from LastInsertId
		}
		if _, err := q.Exec(ctx); err != nil {
			if err := idempotent.ClassifyDuplicate(err); errors.Is(err, idempotent.ErrDuplicateKey) {
				return errRegistered
			}
			return fmt.Errorf("insert payment registration: %w", err)
		}
		// Written first, read second: see RegisterPayment.
		tradeNo, found, err := paidTradeOf(ctx, tx, r.TenantID, r.Channel, r.MerchantOrderNo, !s.sqlite)
		if err != nil || !found {
			return err
		}
		res, err := tx.NewUpdate().Table("ss_payment_registration").
			Set("status = ?", string(RegistrationSucceeded)).
			Set("channel_trade_no = ?", tradeNo).
			Where("id = ?", out.ID).
			Where("status = ?", string(RegistrationRegistered)).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("mark payment registration succeeded: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("mark payment registration %d succeeded: %w", out.ID, err)
		}
		if n != 1 {
			return fmt.Errorf("mark payment registration %d succeeded: %d rows changed", out.ID, n)
		}
		out.Status, out.TradeNo = RegistrationSucceeded, &tradeNo
		return nil
	})
	// An optimistic TiDB transaction meets the unique key at COMMIT, not
	// at the INSERT: the transaction's one unique key besides its
	// auto-increment id is uk_payment_registration, so a duplicate there
	// is "registered already" too.
	if err != nil && !errors.Is(err, errRegistered) && errors.Is(idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey) {
		return PaymentRegistration{}, errRegistered
	}
	return out, err
}

// paidTradeOf returns the trade number of a trade of merchantOrderNo with a
// payment posted, reading every order row of that merchant order number
// (locking them when forUpdate: a locking read waits for a row another
// transaction inserted or holds, then reads its latest commit).
func paidTradeOf(ctx context.Context, tx bun.IDB, tenantID int64, ch channels.Channel, merchantOrderNo string, forUpdate bool) (string, bool, error) {
	var rows []struct {
		TradeNo string `bun:"channel_trade_no"`
		Paid    int64  `bun:"paid_amount"`
	}
	q := tx.NewSelect().Table("ss_channel_order").Column("channel_trade_no", "paid_amount").
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(ch)).
		Where("merchant_order_no = ?", merchantOrderNo).
		OrderExpr("id")
	if forUpdate {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx, &rows); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", false, fmt.Errorf("read orders of merchant order %s/%s: %w", ch, merchantOrderNo, err)
	}
	for _, o := range rows {
		if o.Paid > 0 {
			return o.TradeNo, true, nil
		}
	}
	return "", false, nil
}

// GetPaymentRegistration reads the registration of a merchant order number
// from the pool (the latest committed row); the error wraps
// ErrPaymentRegistrationNotFound when there is none.
func (s *Service) GetPaymentRegistration(ctx context.Context, tenantID int64, ch channels.Channel, merchantOrderNo string) (PaymentRegistration, error) {
	var reg PaymentRegistration
	err := s.db.NewSelect().Model(&reg).
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(ch)).
		Where("merchant_order_no = ?", merchantOrderNo).
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return PaymentRegistration{}, fmt.Errorf("payment registration %s/%s: %w", ch, merchantOrderNo, ErrPaymentRegistrationNotFound)
	}
	if err != nil {
		return PaymentRegistration{}, fmt.Errorf("read payment registration %s/%s: %w", ch, merchantOrderNo, err)
	}
	reg.normalise()
	return reg, nil
}

// paidOrder is a payment a settlement posted: the registration of its
// merchant order number, if any, becomes SUCCEEDED in the same
// transaction.
type paidOrder struct {
	tenant          int64
	channel         channels.Channel
	merchantOrderNo string
	tradeNo         string
}

// markPaymentsRegistered moves the registrations of the payments paid (if
// registered) to SUCCEEDED with their trade numbers, in tx, which holds
// their order rows: one UPDATE by the unique key, conditional on a status
// not SUCCEEDED already. A CLOSED or EXPIRED registration whose payment
// is posted after all becomes SUCCEEDED too: the money moved, and the
// registration says what the ledger says (docs/design.md).
func markPaymentsRegistered(ctx context.Context, tx bun.IDB, paid []paidOrder, now time.Time) error {
	if len(paid) == 0 {
		return nil
	}
	seen := make(map[paidOrder]bool, len(paid))
	q := tx.NewUpdate().Table("ss_payment_registration").
		Set("status = ?", string(RegistrationSucceeded)).
		Set("updated_at = ?", now)
	var whens []any
	caseSQL := "CASE"
	for _, p := range paid {
		k := paidOrder{tenant: p.tenant, channel: p.channel, merchantOrderNo: p.merchantOrderNo}
		if seen[k] {
			continue // the first payment of an order number names the trade
		}
		seen[k] = true
		caseSQL += " WHEN tenant_id = ? AND channel_code = ? AND merchant_order_no = ? THEN ?"
		whens = append(whens, p.tenant, string(p.channel), p.merchantOrderNo, p.tradeNo)
	}
	q = q.Set("channel_trade_no = "+caseSQL+" END", whens...)
	q = q.WhereGroup(" AND ", func(q *bun.UpdateQuery) *bun.UpdateQuery {
		for k := range seen {
			q = q.WhereOr("(tenant_id = ? AND channel_code = ? AND merchant_order_no = ?)", k.tenant, string(k.channel), k.merchantOrderNo)
		}
		return q
	})
	q = q.Where("status IN (?)", bun.List([]string{
		string(RegistrationRegistered), string(RegistrationAbnormal), string(RegistrationClosed), string(RegistrationExpired),
	}))
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("mark %d payment registrations succeeded: %w", len(seen), err)
	}
	return nil
}

// SettleFromOrders makes SUCCEEDED every payment registration still open
// (REGISTERED or ABNORMAL) whose merchant order number has a trade with a
// payment posted, at most limit of them (limit ≤ 0: 1000), and returns
// how many it moved. It is the backstop of the either-order rule on
// engines whose locking reads do not see a row another transaction
// inserted (TiDB in optimistic mode, two Galera nodes): there a
// registration and its payment's settlement committed at the same moment
// can each miss the other. The worker runs it on its registration timer,
// and the querier runs it before it asks about any registration, so that
// no query is sent for a registration already settled. Each move is a
// conditional update; running it concurrently or repeatedly is harmless.
func (s *Service) SettleFromOrders(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	var rows []struct {
		ID      int64  `bun:"id"`
		TradeNo string `bun:"channel_trade_no"`
	}
	err := s.db.NewSelect().TableExpr("ss_payment_registration AS r").
		ColumnExpr("r.id, MIN(o.channel_trade_no) AS channel_trade_no").
		Join("JOIN ss_channel_order AS o ON o.tenant_id = r.tenant_id AND o.channel_code = r.channel_code AND o.merchant_order_no = r.merchant_order_no").
		Where("r.status IN (?)", bun.List([]string{string(RegistrationRegistered), string(RegistrationAbnormal)})).
		Where("o.paid_amount > 0").
		GroupExpr("r.id").
		OrderExpr("r.id").
		Limit(int64(limit)).
		Scan(ctx, &rows)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("settle registrations from orders: %w", err)
	}
	moved := 0
	for _, r := range rows {
		res, err := s.db.NewUpdate().Table("ss_payment_registration").
			Set("status = ?", string(RegistrationSucceeded)).
			Set("channel_trade_no = ?", r.TradeNo).
			Set("updated_at = ?", dbTime(s.claims.Now())).
			Where("id = ?", r.ID).
			Where("status IN (?)", bun.List([]string{string(RegistrationRegistered), string(RegistrationAbnormal)})).
			Exec(ctx)
		if err != nil {
			return moved, fmt.Errorf("settle registration %d from its order: %w", r.ID, err)
		}
		if n, err := res.RowsAffected(); err == nil && n > 0 {
			moved++
		}
	}
	if moved > 0 {
		s.log.LogAttrs(ctx, slog.LevelWarn, "payment registrations settled from their orders (a registration and its payment committed at once)",
			slog.Int("registrations", moved))
	}
	return moved, nil
}
