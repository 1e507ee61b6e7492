package settlement

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

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

// Report is what Check found. Violations lists every broken invariant in
// readable form (at most maxViolations of them, then a count); an empty list
// means the ledger and orders are consistent.
type Report struct {
	Entries    int   // ledger rows
	Debits     int64 // sum of DEBIT rows
	Credits    int64 // sum of CREDIT rows
	Orders     int   // order rows
	Tenants    map[int64]TenantTotals
	Violations []string
}

// OK reports whether no invariant is broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Err returns nil when r is OK, else an error listing the violations.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("settlement invariants broken: %s", strings.Join(r.Violations, "; "))
}

const maxViolations = 50

// Check reads the whole ledger and every order row and checks the
// settlement invariants:
//
//   - debits equal credits globally and for every (tenant, idempotency key),
//     each key having exactly one DEBIT and one CREDIT row;
//   - no ledger row has a zero or negative amount or an unknown direction;
//   - accounts are merchant_payable or the row's channel receivable;
//   - per tenant, the net credit of merchant_payable equals paid minus
//     refunded over the tenant's orders;
//   - per trade, the ledger nets (merchant_payable credit, receivable debit)
//     equal the order row's paid minus refunded, every ledger trade has an
//     order row, 0 ≤ refunded ≤ total, the status is DeriveStatus of the
//     amounts, and on cumulative channels refunded equals the highest
//     cumulative recorded.
//
// A broken invariant is reported in Report.Violations, not as an error;
// errors are database errors. It reads everything: meant for tests, the
// demo summary and small reconciliations, run inside one transaction (or on
// a quiescent database) for a consistent view.
func Check(ctx context.Context, db bun.IDB) (Report, error) {
	rep := Report{Tenants: map[int64]TenantTotals{}}
	var dropped int
	violate := func(format string, args ...any) {
		if len(rep.Violations) >= maxViolations {
			dropped++
			return
		}
		rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
	}

	// Rows, sides and directions.
	var g struct {
		N       int   `bun:"n"`
		Debits  int64 `bun:"debits"`
		Credits int64 `bun:"credits"`
		Bad     int   `bun:"bad"`
		NonPos  int   `bun:"nonpos"`
	}
	if err := db.NewSelect().Table("ss_ledger_entry").
		ColumnExpr("COUNT(*) AS n").
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS debits", string(Debit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS credits", string(Credit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction IN (?, ?) THEN 0 ELSE 1 END), 0) AS bad", string(Debit), string(Credit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN amount <= 0 THEN 1 ELSE 0 END), 0) AS nonpos").
		Scan(ctx, &g); err != nil {
		return Report{}, fmt.Errorf("check ledger totals: %w", err)
	}
	rep.Entries, rep.Debits, rep.Credits = g.N, g.Debits, g.Credits
	if g.Debits != g.Credits {
		violate("ledger: debits %d != credits %d", g.Debits, g.Credits)
	}
	if g.Bad > 0 {
		violate("ledger: %d rows with a direction other than DEBIT/CREDIT", g.Bad)
	}
	if g.NonPos > 0 {
		violate("ledger: %d rows with a zero or negative amount", g.NonPos)
	}

	// Per posting.
	var keys []struct {
		TenantID int64  `bun:"tenant_id"`
		Key      string `bun:"idempotent_key"`
		Debits   int64  `bun:"debits"`
		Credits  int64  `bun:"credits"`
		NDebit   int    `bun:"ndebit"`
		NCredit  int    `bun:"ncredit"`
	}
	if err := db.NewSelect().Table("ss_ledger_entry").
		ColumnExpr("tenant_id, idempotent_key").
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS debits", string(Debit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN amount ELSE 0 END), 0) AS credits", string(Credit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN 1 ELSE 0 END), 0) AS ndebit", string(Debit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN 1 ELSE 0 END), 0) AS ncredit", string(Credit)).
		GroupExpr("tenant_id, idempotent_key").
		Having("SUM(CASE WHEN direction = ? THEN amount ELSE 0 END) <> SUM(CASE WHEN direction = ? THEN amount ELSE 0 END)", string(Debit), string(Credit)).
		Scan(ctx, &keys); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Report{}, fmt.Errorf("check postings: %w", err)
	}
	for _, k := range keys {
		violate("posting %d/%s: debits %d, credits %d", k.TenantID, k.Key, k.Debits, k.Credits)
	}
	var shapes []struct {
		TenantID int64  `bun:"tenant_id"`
		Key      string `bun:"idempotent_key"`
		N        int    `bun:"n"`
	}
	if err := db.NewSelect().Table("ss_ledger_entry").
		ColumnExpr("tenant_id, idempotent_key, COUNT(*) AS n").
		GroupExpr("tenant_id, idempotent_key").
		Having("COUNT(*) <> 2 OR MIN(direction) = MAX(direction)").
		Scan(ctx, &shapes); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Report{}, fmt.Errorf("check posting shapes: %w", err)
	}
	for _, k := range shapes {
		violate("posting %d/%s: %d rows, want one DEBIT and one CREDIT", k.TenantID, k.Key, k.N)
	}

	// Per trade and per tenant.
	bals, err := balances(ctx, db, nil)
	if err != nil {
		return Report{}, fmt.Errorf("check balances: %w", err)
	}
	type tradeKey struct {
		tenant  int64
		channel channels.Channel
		trade   string
	}
	type tradeNets struct{ payable, receivable int64 }
	nets := map[tradeKey]*tradeNets{}
	for _, b := range bals {
		k := tradeKey{b.TenantID, b.Channel, b.TradeNo}
		n := nets[k]
		if n == nil {
			n = &tradeNets{}
			nets[k] = n
		}
		switch b.Account {
		case AccountMerchantPayable:
			n.payable += b.Credit - b.Debit
			t := rep.Tenants[b.TenantID]
			t.MerchantPayableNet += b.Credit - b.Debit
			rep.Tenants[b.TenantID] = t
		case ReceivableAccount(b.Channel):
			n.receivable += b.Debit - b.Credit
		default:
			violate("trade %d/%s/%s: unexpected account %q", b.TenantID, b.Channel, b.TradeNo, b.Account)
		}
	}

	var orders []Order
	if err := db.NewSelect().Model(&orders).OrderExpr("tenant_id, channel_code, channel_trade_no").
		Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Report{}, fmt.Errorf("check orders: %w", err)
	}
	rep.Orders = len(orders)
	for _, o := range orders {
		id := fmt.Sprintf("%d/%s/%s", o.TenantID, o.Channel, o.TradeNo)
		t := rep.Tenants[o.TenantID]
		t.Orders++
		t.Paid += o.PaidAmount
		t.Refunded += o.RefundedAmount
		rep.Tenants[o.TenantID] = t

		k := tradeKey{o.TenantID, o.Channel, o.TradeNo}
		n := nets[k]
		delete(nets, k)
		if n == nil {
			n = &tradeNets{}
		}
		want := o.PaidAmount - o.RefundedAmount
		if n.payable != want || n.receivable != want {
			violate("order %s: paid %d − refunded %d = %d, ledger merchant_payable net credit %d, receivable net debit %d",
				id, o.PaidAmount, o.RefundedAmount, want, n.payable, n.receivable)
		}
		if o.RefundedAmount < 0 || o.RefundedAmount > o.Amount || o.PaidAmount < 0 {
			violate("order %s: total %d, paid %d, refunded %d out of range", id, o.Amount, o.PaidAmount, o.RefundedAmount)
		}
		if want := DeriveStatus(o.Amount, o.PaidAmount, o.RefundedAmount); o.Status != want {
			violate("order %s: status %s, amounts say %s", id, o.Status, want)
		}
		if o.Channel.Cumulative() && o.RefundedAmount != o.MaxCumulativeRefund {
			violate("order %s: refunded %d != highest cumulative %d", id, o.RefundedAmount, o.MaxCumulativeRefund)
		}
	}
	leftover := make([]tradeKey, 0, len(nets))
	for k := range nets {
		leftover = append(leftover, k)
	}
	sort.Slice(leftover, func(i, j int) bool {
		a, b := leftover[i], leftover[j]
		if a.tenant != b.tenant {
			return a.tenant < b.tenant
		}
		if a.channel != b.channel {
			return a.channel < b.channel
		}
		return a.trade < b.trade
	})
	for _, k := range leftover {
		violate("ledger trade %d/%s/%s has no order row", k.tenant, k.channel, k.trade)
	}

	tenants := make([]int64, 0, len(rep.Tenants))
	for id := range rep.Tenants {
		tenants = append(tenants, id)
	}
	sort.Slice(tenants, func(i, j int) bool { return tenants[i] < tenants[j] })
	for _, id := range tenants {
		t := rep.Tenants[id]
		if t.MerchantPayableNet != t.Paid-t.Refunded {
			violate("tenant %d: merchant_payable net credit %d != paid %d − refunded %d", id, t.MerchantPayableNet, t.Paid, t.Refunded)
		}
	}
	if dropped > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("… and %d more", dropped))
	}
	return rep, nil
}
