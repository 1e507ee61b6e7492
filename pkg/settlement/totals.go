package settlement

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Balance is the sum of one account's ledger rows for one trade, in fen.
type Balance struct {
	TenantID int64
	Channel  channels.Channel
	TradeNo  string
	Account  string
	Debit    int64
	Credit   int64
}

// Net is Debit minus Credit.
func (b Balance) Net() int64 { return b.Debit - b.Credit }

// Balances returns the ledger balances of tenantID per (channel, trade,
// account), ordered by channel, trade and account. It reads the tenant's
// whole ledger: meant for tests, the demo and small reconciliations. Errors
// are database errors.
func Balances(ctx context.Context, db bun.IDB, tenantID int64) ([]Balance, error) {
	rows, err := balances(ctx, db, &tenantID)
	if err != nil {
		return nil, fmt.Errorf("balances of tenant %d: %w", tenantID, err)
	}
	return rows, nil
}

func balances(ctx context.Context, db bun.IDB, tenantID *int64) ([]Balance, error) {
	var rows []struct {
		TenantID int64  `bun:"tenant_id"`
		Channel  string `bun:"channel_code"`
		TradeNo  string `bun:"channel_trade_no"`
		Account  string `bun:"account"`
		Debit    int64  `bun:"debit"`
		Credit   int64  `bun:"credit"`
	}
	q := db.NewSelect().Table("ss_ledger_entry").
		ColumnExpr("tenant_id, channel_code, channel_trade_no, account").
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS debit", string(Debit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS credit", string(Credit)).
		GroupExpr("tenant_id, channel_code, channel_trade_no, account").
		OrderExpr("tenant_id, channel_code, channel_trade_no, account")
	if tenantID != nil {
		q = q.Where("tenant_id = ?", *tenantID)
	}
	if err := q.Scan(ctx, &rows); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sum ledger: %w", err)
	}
	out := make([]Balance, len(rows))
	for i, r := range rows {
		out[i] = Balance{
			TenantID: r.TenantID, Channel: channels.Channel(r.Channel), TradeNo: r.TradeNo,
			Account: r.Account, Debit: r.Debit, Credit: r.Credit,
		}
	}
	return out, nil
}

// Orders returns the order rows of tenantID ordered by channel and trade
// number, times in UTC. Errors are database errors.
func Orders(ctx context.Context, db bun.IDB, tenantID int64) ([]Order, error) {
	var out []Order
	if err := db.NewSelect().Model(&out).
		Where("tenant_id = ?", tenantID).
		OrderExpr("channel_code, channel_trade_no").
		Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("orders of tenant %d: %w", tenantID, err)
	}
	for i := range out {
		out[i].normalise()
	}
	return out, nil
}

// GetOrder reads the order row of one trade from db (the latest committed
// row when db is the pool). It returns an error wrapping ErrOrderNotFound
// when there is none.
func GetOrder(ctx context.Context, db bun.IDB, tenantID int64, ch channels.Channel, tradeNo string) (Order, error) {
	ord, err := selectOrder(ctx, db, tenantID, ch, tradeNo, false)
	if errors.Is(err, errNoOrder) {
		return Order{}, fmt.Errorf("get order: %w: %w", ErrOrderNotFound, err)
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order: %w", err)
	}
	return ord, nil
}

// ErrOrderNotFound is returned by GetOrder when the trade has no order row.
var ErrOrderNotFound = errors.New("order not found")

// TenantTotals sums one tenant's orders and ledger, in fen.
type TenantTotals struct {
	// Orders counts the tenant's order rows.
	Orders int
	// Paid and Refunded sum the order rows' paid and refunded amounts.
	Paid, Refunded int64
	// MerchantPayableNet is the net credit of merchant_payable (credits
	// minus debits); it must equal Paid − Refunded.
	MerchantPayableNet int64
}

// LedgerTotals sums the whole ledger and every order row. It states no
// rule: the rules (postings balanced, orders matching the ledger, ...) are
// the reconciliation checks (Reconcile), which every test, the demo, the
// bench and consumer reconcile run.
type LedgerTotals struct {
	Entries int   // ledger rows
	Debits  int64 // sum of DEBIT rows
	Credits int64 // sum of CREDIT rows
	Orders  int   // order rows
	// Tenants sums the orders and merchant_payable per tenant.
	Tenants map[int64]TenantTotals
}

// Totals reads the whole ledger and every order row and sums them, per
// tenant too. Errors are database errors. Meant for tests, the demo summary
// and the bench; run it on a quiescent database for a consistent view.
func Totals(ctx context.Context, db bun.IDB) (LedgerTotals, error) {
	out := LedgerTotals{Tenants: map[int64]TenantTotals{}}
	var g struct {
		N       int   `bun:"n"`
		Debits  int64 `bun:"debits"`
		Credits int64 `bun:"credits"`
	}
	if err := db.NewSelect().Table("ss_ledger_entry").
		ColumnExpr("COUNT(*) AS n").
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS debits", string(Debit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS credits", string(Credit)).
		Scan(ctx, &g); err != nil {
		return LedgerTotals{}, fmt.Errorf("ledger totals: %w", err)
	}
	out.Entries, out.Debits, out.Credits = g.N, g.Debits, g.Credits

	var payable []struct {
		TenantID int64 `bun:"tenant_id"`
		Net      int64 `bun:"net"`
	}
	if err := db.NewSelect().Table("ss_ledger_entry").
		ColumnExpr("tenant_id").
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE -amount END), 0) AS net", string(Credit)).
		Where("account = ?", AccountMerchantPayable).
		GroupExpr("tenant_id").
		Scan(ctx, &payable); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return LedgerTotals{}, fmt.Errorf("merchant_payable per tenant: %w", err)
	}
	for _, p := range payable {
		t := out.Tenants[p.TenantID]
		t.MerchantPayableNet = p.Net
		out.Tenants[p.TenantID] = t
	}

	var orders []struct {
		TenantID int64 `bun:"tenant_id"`
		N        int   `bun:"n"`
		Paid     int64 `bun:"paid"`
		Refunded int64 `bun:"refunded"`
	}
	if err := db.NewSelect().Table("ss_channel_order").
		ColumnExpr("tenant_id, COUNT(*) AS n").
		ColumnExpr("COALESCE(SUM(paid_amount), 0) AS paid, COALESCE(SUM(refunded_amount), 0) AS refunded").
		GroupExpr("tenant_id").
		Scan(ctx, &orders); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return LedgerTotals{}, fmt.Errorf("orders per tenant: %w", err)
	}
	for _, o := range orders {
		t := out.Tenants[o.TenantID]
		t.Orders, t.Paid, t.Refunded = o.N, o.Paid, o.Refunded
		out.Tenants[o.TenantID] = t
		out.Orders += o.N
	}
	return out, nil
}
