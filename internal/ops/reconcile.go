package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// The reconciliation checks: the Check of every Discrepancy.
const (
	// CheckPostingUnbalanced: a SETTLED claim with outcome POSTED lacks its
	// one DEBIT and one CREDIT row of equal, positive amount.
	CheckPostingUnbalanced = "posting_unbalanced"
	// CheckPostingWithoutClaim: ledger rows whose key has no claim, or a
	// claim that is not SETTLED with outcome POSTED.
	CheckPostingWithoutClaim = "posting_without_claim"
	// CheckOrderLedger: an order's paid or refunded amount differs from its
	// postings on merchant_payable or the channel's receivable, or its
	// trade has postings on another account.
	CheckOrderLedger = "order_ledger_mismatch"
	// CheckLedgerWithoutOrder: postings for a trade with no order row.
	CheckLedgerWithoutOrder = "ledger_without_order"
	// CheckPendingPayment: an order still PENDING_PAYMENT (refunded at the
	// channel, payment never seen) after the pending window.
	CheckPendingPayment = "pending_payment"
	// CheckRefundUnregistered: a refund callback that moved (or could have
	// moved) money with no pre-registration.
	CheckRefundUnregistered = "refund_unregistered"
	// CheckRefundMismatch: a refund callback that disagrees with its
	// registration (amount, cumulative total, a CLOSED registration, a
	// registration left open or marked SUCCEEDED without a callback, an
	// over-refund).
	CheckRefundMismatch = "refund_mismatch"
	// CheckRefundOpen: a registration still REGISTERED or ABNORMAL after the
	// open window, with no callback.
	CheckRefundOpen = "refund_open"
	// CheckOverRefundNotDeadLettered: an OVER_REFUND claim whose message was
	// never written to the dead-letter topic.
	CheckOverRefundNotDeadLettered = "over_refund_not_dead_lettered"
)

// Checks lists the reconciliation checks in the order they run.
var Checks = []string{
	CheckPostingUnbalanced, CheckPostingWithoutClaim, CheckOrderLedger, CheckLedgerWithoutOrder,
	CheckPendingPayment, CheckRefundUnregistered, CheckRefundMismatch, CheckRefundOpen,
	CheckOverRefundNotDeadLettered,
}

// ReconcileOptions bound and tune a reconciliation.
type ReconcileOptions struct {
	// From and To bound, by creation time of the row each check starts
	// from (claim, ledger row, order, registration), what is examined:
	// From inclusive, To exclusive; zero means unbounded. Order sums are
	// always over the trade's whole ledger.
	From, To time.Time
	// PendingAfter is how long an order may stay PENDING_PAYMENT before it
	// is reported. Default 24h.
	PendingAfter time.Duration
	// OpenAfter is how long a refund registration may stay open without a
	// callback before it is reported. Default 24h.
	OpenAfter time.Duration
	// Now is the reference time; default time.Now.
	Now func() time.Time
}

// Discrepancy is one finding.
type Discrepancy struct {
	Check    string `json:"check"`
	TenantID int64  `json:"tenant_id"`
	Key      string `json:"key,omitempty"`
	Channel  string `json:"channel,omitempty"`
	TradeNo  string `json:"trade_no,omitempty"`
	RefundNo string `json:"refund_no,omitempty"`
	Detail   string `json:"detail"`
}

// ReconcileReport is what Reconcile found.
type ReconcileReport struct {
	From          *time.Time     `json:"from,omitempty"`
	To            *time.Time     `json:"to,omitempty"`
	At            time.Time      `json:"at"`
	Examined      map[string]int `json:"examined"`
	Discrepancies []Discrepancy  `json:"discrepancies"`
}

// OK reports whether nothing was found.
func (r ReconcileReport) OK() bool { return len(r.Discrepancies) == 0 }

// Counts returns the number of discrepancies per check, every check present.
func (r ReconcileReport) Counts() map[string]int {
	out := make(map[string]int, len(Checks))
	for _, c := range Checks {
		out[c] = 0
	}
	for _, d := range r.Discrepancies {
		out[d.Check]++
	}
	return out
}

// Reconcile runs every check against db (MySQL or MariaDB), read-only, and
// returns the findings sorted by check. A finding is not an error; errors
// are database errors. Run it on a replica or at a quiet time: it reads the
// ledger of every trade it examines. Rows committed while it runs may show
// as transient findings; run it again before acting on one.
func Reconcile(ctx context.Context, db bun.IDB, o ReconcileOptions) (ReconcileReport, error) {
	if o.PendingAfter <= 0 {
		o.PendingAfter = 24 * time.Hour
	}
	if o.OpenAfter <= 0 {
		o.OpenAfter = 24 * time.Hour
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	rep := ReconcileReport{At: now().UTC(), Examined: map[string]int{}, Discrepancies: []Discrepancy{}}
	if !o.From.IsZero() {
		f := o.From.UTC()
		rep.From = &f
	}
	if !o.To.IsZero() {
		t := o.To.UTC()
		rep.To = &t
	}
	r := &reconciler{db: db, o: o, now: rep.At, rep: &rep}
	for _, step := range []func(context.Context) error{
		r.postingsOfClaims, r.claimsOfPostings, r.ordersAgainstLedger, r.ledgerWithoutOrder,
		r.pendingPayment, r.unregisteredRefunds, r.registrations, r.overRefunds,
	} {
		if err := step(ctx); err != nil {
			return rep, err
		}
	}
	SortDiscrepancies(rep.Discrepancies)
	return rep, nil
}

type reconciler struct {
	db  bun.IDB
	o   ReconcileOptions
	now time.Time
	rep *ReconcileReport
}

// window returns the SQL condition bounding col by From and To, and its args.
func (r *reconciler) window(col string) (string, []any) {
	var conds []string
	var args []any
	if !r.o.From.IsZero() {
		conds = append(conds, col+" >= ?")
		args = append(args, r.o.From.UTC())
	}
	if !r.o.To.IsZero() {
		conds = append(conds, col+" < ?")
		args = append(args, r.o.To.UTC())
	}
	if len(conds) == 0 {
		return "1 = 1", nil
	}
	return strings.Join(conds, " AND "), args
}

func (r *reconciler) add(d Discrepancy) { r.rep.Discrepancies = append(r.rep.Discrepancies, d) }

func (r *reconciler) scan(ctx context.Context, what string, dest any, query string, args ...any) error {
	if err := r.db.NewRaw(query, args...).Scan(ctx, dest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reconcile %s: %w", what, err)
	}
	return nil
}

func (r *reconciler) count(ctx context.Context, check, query string, args ...any) error {
	var n int
	if err := r.scan(ctx, check, &n, query, args...); err != nil {
		return err
	}
	r.rep.Examined[check] = n
	return nil
}

// postingsOfClaims: every POSTED claim has one DEBIT and one CREDIT row,
// equal and positive.
func (r *reconciler) postingsOfClaims(ctx context.Context) error {
	w, args := r.window("c.created_at")
	var rows []struct {
		TenantID     int64  `bun:"tenant_id"`
		Key          string `bun:"idempotent_key"`
		Debits       int64  `bun:"debits"`
		Credits      int64  `bun:"credits"`
		DebitAmount  int64  `bun:"debit_amount"`
		CreditAmount int64  `bun:"credit_amount"`
	}
	err := r.scan(ctx, CheckPostingUnbalanced, &rows, `
SELECT c.tenant_id, c.idempotent_key,
  COALESCE(SUM(CASE WHEN l.direction = 'DEBIT' THEN 1 ELSE 0 END), 0) AS debits,
  COALESCE(SUM(CASE WHEN l.direction = 'CREDIT' THEN 1 ELSE 0 END), 0) AS credits,
  COALESCE(SUM(CASE WHEN l.direction = 'DEBIT' THEN l.amount ELSE 0 END), 0) AS debit_amount,
  COALESCE(SUM(CASE WHEN l.direction = 'CREDIT' THEN l.amount ELSE 0 END), 0) AS credit_amount
FROM ss_channel_idempotent c
LEFT JOIN ss_ledger_entry l ON l.tenant_id = c.tenant_id AND l.idempotent_key = c.idempotent_key
WHERE c.status = 'SETTLED' AND c.settle_outcome = 'POSTED' AND `+w+`
GROUP BY c.tenant_id, c.idempotent_key
HAVING debits <> 1 OR credits <> 1 OR debit_amount <> credit_amount OR debit_amount <= 0
ORDER BY c.tenant_id, c.idempotent_key`, args...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		r.add(Discrepancy{
			Check: CheckPostingUnbalanced, TenantID: row.TenantID, Key: row.Key,
			Detail: fmt.Sprintf("POSTED claim has %d debit row(s) totalling %d and %d credit row(s) totalling %d; want one of each, equal and positive",
				row.Debits, row.DebitAmount, row.Credits, row.CreditAmount),
		})
	}
	return r.count(ctx, CheckPostingUnbalanced,
		`SELECT COUNT(*) FROM ss_channel_idempotent c WHERE c.status = 'SETTLED' AND c.settle_outcome = 'POSTED' AND `+w, args...)
}

// claimsOfPostings: every ledger key has a SETTLED, POSTED claim.
func (r *reconciler) claimsOfPostings(ctx context.Context) error {
	w, args := r.window("l.created_at")
	var rows []struct {
		TenantID int64          `bun:"tenant_id"`
		Key      string         `bun:"idempotent_key"`
		Claims   int64          `bun:"claims"`
		Status   sql.NullString `bun:"status"`
		Outcome  sql.NullString `bun:"outcome"`
	}
	err := r.scan(ctx, CheckPostingWithoutClaim, &rows, `
SELECT l.tenant_id, l.idempotent_key, COUNT(c.id) AS claims, MAX(c.status) AS status, MAX(c.settle_outcome) AS outcome
FROM ss_ledger_entry l
LEFT JOIN ss_channel_idempotent c ON c.tenant_id = l.tenant_id AND c.idempotent_key = l.idempotent_key
WHERE `+w+`
GROUP BY l.tenant_id, l.idempotent_key
HAVING COUNT(c.id) = 0 OR MAX(c.status) <> 'SETTLED' OR COALESCE(MAX(c.settle_outcome), '') <> 'POSTED'
ORDER BY l.tenant_id, l.idempotent_key`, args...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		d := Discrepancy{Check: CheckPostingWithoutClaim, TenantID: row.TenantID, Key: row.Key}
		if row.Claims == 0 {
			d.Detail = "ledger rows with no claim"
		} else {
			d.Detail = fmt.Sprintf("ledger rows whose claim is %s/%s, not SETTLED/POSTED", row.Status.String, row.Outcome.String)
		}
		r.add(d)
	}
	return r.count(ctx, CheckPostingWithoutClaim,
		`SELECT COUNT(DISTINCT l.tenant_id, l.idempotent_key) FROM ss_ledger_entry l WHERE `+w, args...)
}

// ordersAgainstLedger: per order, paid = merchant_payable credits =
// receivable debits, refunded = merchant_payable debits = receivable
// credits, and no other account.
func (r *reconciler) ordersAgainstLedger(ctx context.Context) error {
	w, args := r.window("o.created_at")
	var rows []struct {
		ID        int64          `bun:"id"`
		TenantID  int64          `bun:"tenant_id"`
		Channel   string         `bun:"channel_code"`
		TradeNo   string         `bun:"channel_trade_no"`
		Paid      int64          `bun:"paid_amount"`
		Refunded  int64          `bun:"refunded_amount"`
		Account   sql.NullString `bun:"account"`
		Direction sql.NullString `bun:"direction"`
		Amount    int64          `bun:"amount"`
	}
	err := r.scan(ctx, CheckOrderLedger, &rows, `
SELECT o.id, o.tenant_id, o.channel_code, o.channel_trade_no, o.paid_amount, o.refunded_amount,
  l.account, l.direction, COALESCE(SUM(l.amount), 0) AS amount
FROM ss_channel_order o
LEFT JOIN ss_ledger_entry l ON l.tenant_id = o.tenant_id AND l.channel_code = o.channel_code AND l.channel_trade_no = o.channel_trade_no
WHERE `+w+`
GROUP BY o.id, o.tenant_id, o.channel_code, o.channel_trade_no, o.paid_amount, o.refunded_amount, l.account, l.direction
ORDER BY o.id`, args...)
	if err != nil {
		return err
	}
	type sums struct {
		tenant                     int64
		channel, trade             string
		paid, refunded             int64
		mpCredit, mpDebit, rcDebit int64
		rcCredit                   int64
		other                      []string
	}
	var order []int64
	byID := map[int64]*sums{}
	for _, row := range rows {
		s := byID[row.ID]
		if s == nil {
			s = &sums{tenant: row.TenantID, channel: row.Channel, trade: row.TradeNo, paid: row.Paid, refunded: row.Refunded}
			byID[row.ID] = s
			order = append(order, row.ID)
		}
		if !row.Account.Valid {
			continue
		}
		receivable := settlement.ReceivableAccount(channels.Channel(row.Channel))
		switch {
		case row.Account.String == settlement.AccountMerchantPayable && row.Direction.String == string(settlement.Credit):
			s.mpCredit += row.Amount
		case row.Account.String == settlement.AccountMerchantPayable && row.Direction.String == string(settlement.Debit):
			s.mpDebit += row.Amount
		case row.Account.String == receivable && row.Direction.String == string(settlement.Debit):
			s.rcDebit += row.Amount
		case row.Account.String == receivable && row.Direction.String == string(settlement.Credit):
			s.rcCredit += row.Amount
		default:
			s.other = append(s.other, fmt.Sprintf("%s %s %d", row.Account.String, row.Direction.String, row.Amount))
		}
	}
	for _, id := range order {
		s := byID[id]
		var problems []string
		if s.mpCredit != s.paid || s.rcDebit != s.paid {
			problems = append(problems, fmt.Sprintf("paid %d but merchant_payable credits %d and receivable debits %d", s.paid, s.mpCredit, s.rcDebit))
		}
		if s.mpDebit != s.refunded || s.rcCredit != s.refunded {
			problems = append(problems, fmt.Sprintf("refunded %d but merchant_payable debits %d and receivable credits %d", s.refunded, s.mpDebit, s.rcCredit))
		}
		if len(s.other) > 0 {
			problems = append(problems, "postings on other accounts: "+strings.Join(s.other, ", "))
		}
		if len(problems) > 0 {
			r.add(Discrepancy{Check: CheckOrderLedger, TenantID: s.tenant, Channel: s.channel, TradeNo: s.trade, Detail: strings.Join(problems, "; ")})
		}
	}
	r.rep.Examined[CheckOrderLedger] = len(order)
	return nil
}

// ledgerWithoutOrder: every trade with postings has an order row.
func (r *reconciler) ledgerWithoutOrder(ctx context.Context) error {
	w, args := r.window("l.created_at")
	var rows []struct {
		TenantID int64  `bun:"tenant_id"`
		Channel  string `bun:"channel_code"`
		TradeNo  string `bun:"channel_trade_no"`
		Entries  int64  `bun:"entries"`
	}
	err := r.scan(ctx, CheckLedgerWithoutOrder, &rows, `
SELECT l.tenant_id, l.channel_code, l.channel_trade_no, COUNT(*) AS entries
FROM ss_ledger_entry l
LEFT JOIN ss_channel_order o ON o.tenant_id = l.tenant_id AND o.channel_code = l.channel_code AND o.channel_trade_no = l.channel_trade_no
WHERE o.id IS NULL AND `+w+`
GROUP BY l.tenant_id, l.channel_code, l.channel_trade_no
ORDER BY l.tenant_id, l.channel_code, l.channel_trade_no`, args...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		r.add(Discrepancy{
			Check: CheckLedgerWithoutOrder, TenantID: row.TenantID, Channel: row.Channel, TradeNo: row.TradeNo,
			Detail: fmt.Sprintf("%d ledger row(s) for a trade with no order row", row.Entries),
		})
	}
	return r.count(ctx, CheckLedgerWithoutOrder,
		`SELECT COUNT(DISTINCT l.tenant_id, l.channel_code, l.channel_trade_no) FROM ss_ledger_entry l WHERE `+w, args...)
}

// pendingPayment: orders known only from refunds for longer than
// PendingAfter.
func (r *reconciler) pendingPayment(ctx context.Context) error {
	w, args := r.window("created_at")
	cutoff := r.now.Add(-r.o.PendingAfter)
	var rows []struct {
		TenantID  int64     `bun:"tenant_id"`
		Channel   string    `bun:"channel_code"`
		TradeNo   string    `bun:"channel_trade_no"`
		Refunded  int64     `bun:"refunded_amount"`
		CreatedAt time.Time `bun:"created_at"`
	}
	err := r.scan(ctx, CheckPendingPayment, &rows, `
SELECT tenant_id, channel_code, channel_trade_no, refunded_amount, created_at
FROM ss_channel_order
WHERE status = 'PENDING_PAYMENT' AND created_at < ? AND `+w+`
ORDER BY created_at`, append([]any{cutoff}, args...)...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		r.add(Discrepancy{
			Check: CheckPendingPayment, TenantID: row.TenantID, Channel: row.Channel, TradeNo: row.TradeNo,
			Detail: fmt.Sprintf("PENDING_PAYMENT for %s (refunded %d, payment never seen)", r.now.Sub(row.CreatedAt).Round(time.Second), row.Refunded),
		})
	}
	return r.count(ctx, CheckPendingPayment, `SELECT COUNT(*) FROM ss_channel_order WHERE status = 'PENDING_PAYMENT' AND `+w, args...)
}

// unregisteredRefunds: settled refund callbacks with no registration.
func (r *reconciler) unregisteredRefunds(ctx context.Context) error {
	w, args := r.window("c.created_at")
	var rows []struct {
		TenantID int64  `bun:"tenant_id"`
		Key      string `bun:"idempotent_key"`
		Outcome  string `bun:"settle_outcome"`
	}
	err := r.scan(ctx, CheckRefundUnregistered, &rows, `
SELECT c.tenant_id, c.idempotent_key, c.settle_outcome
FROM ss_channel_idempotent c
LEFT JOIN ss_refund_request rr ON rr.tenant_id = c.tenant_id AND rr.idempotent_key = c.idempotent_key
WHERE c.event_type = 'REFUND_SUCCEEDED' AND c.status = 'SETTLED' AND c.settle_outcome IN ('POSTED', 'NO_MONEY')
  AND rr.id IS NULL AND `+w+`
ORDER BY c.tenant_id, c.idempotent_key`, args...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		d := Discrepancy{
			Check: CheckRefundUnregistered, TenantID: row.TenantID, Key: row.Key,
			Detail: fmt.Sprintf("refund callback settled %s with no pre-registration", row.Outcome),
		}
		d.Channel, d.TradeNo, d.RefundNo = splitRefundKey(row.Key)
		r.add(d)
	}
	return r.count(ctx, CheckRefundUnregistered, `SELECT COUNT(*) FROM ss_channel_idempotent c
WHERE c.event_type = 'REFUND_SUCCEEDED' AND c.status = 'SETTLED' AND `+w, args...)
}

// registrations: each registration against its callback (claim and
// postings), and per cumulative trade the refunded total against the
// registrations.
func (r *reconciler) registrations(ctx context.Context) error {
	w, args := r.window("rr.created_at")
	var rows []struct {
		TenantID  int64          `bun:"tenant_id"`
		Channel   string         `bun:"channel_code"`
		TradeNo   string         `bun:"channel_trade_no"`
		RefundNo  string         `bun:"refund_no"`
		Amount    int64          `bun:"amount"`
		Status    string         `bun:"status"`
		CreatedAt time.Time      `bun:"created_at"`
		Claim     sql.NullString `bun:"claim_status"`
		Outcome   sql.NullString `bun:"settle_outcome"`
		Posted    int64          `bun:"posted"`
		Refunded  sql.NullInt64  `bun:"refunded_amount"`
	}
	err := r.scan(ctx, CheckRefundMismatch, &rows, `
SELECT rr.tenant_id, rr.channel_code, rr.channel_trade_no, rr.refund_no, rr.amount, rr.status, rr.created_at,
  c.status AS claim_status, c.settle_outcome,
  COALESCE(SUM(CASE WHEN l.account = 'merchant_payable' AND l.direction = 'DEBIT' THEN l.amount ELSE 0 END), 0) AS posted,
  o.refunded_amount
FROM ss_refund_request rr
LEFT JOIN ss_channel_idempotent c ON c.tenant_id = rr.tenant_id AND c.idempotent_key = rr.idempotent_key
LEFT JOIN ss_ledger_entry l ON l.tenant_id = rr.tenant_id AND l.idempotent_key = rr.idempotent_key
LEFT JOIN ss_channel_order o ON o.tenant_id = rr.tenant_id AND o.channel_code = rr.channel_code AND o.channel_trade_no = rr.channel_trade_no
WHERE `+w+`
GROUP BY rr.id, rr.tenant_id, rr.channel_code, rr.channel_trade_no, rr.refund_no, rr.amount, rr.status, rr.created_at,
  c.status, c.settle_outcome, o.refunded_amount
ORDER BY rr.tenant_id, rr.channel_code, rr.channel_trade_no, rr.refund_no`, args...)
	if err != nil {
		return err
	}
	type tradeKey struct {
		tenant         int64
		channel, trade string
	}
	type tradeSums struct {
		succeeded, open, refunded int64
		known                     bool
	}
	var trades []tradeKey
	sums := map[tradeKey]*tradeSums{}
	openCutoff := r.now.Add(-r.o.OpenAfter)
	for _, row := range rows {
		mismatch := func(format string, a ...any) {
			r.add(Discrepancy{
				Check: CheckRefundMismatch, TenantID: row.TenantID, Channel: row.Channel, TradeNo: row.TradeNo,
				RefundNo: row.RefundNo, Detail: fmt.Sprintf(format, a...),
			})
		}
		status := settlement.RegistrationStatus(row.Status)
		cumulative := channels.Channel(row.Channel) != channels.WeChat
		settled := row.Claim.String == string(idempotent.StatusSettled)
		switch {
		case settled && row.Outcome.String == string(idempotent.OutcomeOverRefund):
			mismatch("registered %d but the callback was an over-refund (nothing posted)", row.Amount)
		case settled && status == settlement.RegistrationClosed:
			mismatch("registration CLOSED but the refund succeeded at the channel (%s)", row.Outcome.String)
		case settled && status.Open():
			mismatch("refund callback settled %s but the registration is still %s", row.Outcome.String, status)
		case settled && !cumulative && row.Posted != row.Amount:
			mismatch("registered %d but %d was posted", row.Amount, row.Posted)
		case !settled && status == settlement.RegistrationSucceeded:
			mismatch("registration SUCCEEDED with no settled refund callback")
		case !settled && status.Open() && row.CreatedAt.Before(openCutoff):
			r.add(Discrepancy{
				Check: CheckRefundOpen, TenantID: row.TenantID, Channel: row.Channel, TradeNo: row.TradeNo,
				RefundNo: row.RefundNo, Detail: fmt.Sprintf("%s for %s with no callback", status, r.now.Sub(row.CreatedAt).Round(time.Second)),
			})
		}
		if cumulative {
			k := tradeKey{row.TenantID, row.Channel, row.TradeNo}
			s := sums[k]
			if s == nil {
				s = &tradeSums{refunded: row.Refunded.Int64, known: row.Refunded.Valid}
				sums[k] = s
				trades = append(trades, k)
			}
			switch {
			case status == settlement.RegistrationSucceeded:
				s.succeeded += row.Amount
			case status.Open():
				s.open += row.Amount
			}
		}
	}
	for _, k := range trades {
		s := sums[k]
		if !s.known {
			continue
		}
		if s.refunded < s.succeeded || s.refunded > s.succeeded+s.open {
			r.add(Discrepancy{
				Check: CheckRefundMismatch, TenantID: k.tenant, Channel: k.channel, TradeNo: k.trade,
				Detail: fmt.Sprintf("cumulative refunded %d outside [succeeded %d, succeeded + open %d]", s.refunded, s.succeeded, s.succeeded+s.open),
			})
		}
	}
	r.rep.Examined[CheckRefundMismatch] = len(rows)
	r.rep.Examined[CheckRefundOpen] = len(rows)
	return nil
}

// overRefunds: every OVER_REFUND claim's message reached the dead-letter
// topic.
func (r *reconciler) overRefunds(ctx context.Context) error {
	w, args := r.window("created_at")
	var rows []struct {
		TenantID  int64      `bun:"tenant_id"`
		Key       string     `bun:"idempotent_key"`
		SettledAt *time.Time `bun:"settled_at"`
	}
	err := r.scan(ctx, CheckOverRefundNotDeadLettered, &rows, `
SELECT tenant_id, idempotent_key, settled_at FROM ss_channel_idempotent
WHERE status = 'SETTLED' AND settle_outcome = 'OVER_REFUND' AND dead_lettered_at IS NULL AND `+w+`
ORDER BY tenant_id, idempotent_key`, args...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		d := Discrepancy{
			Check: CheckOverRefundNotDeadLettered, TenantID: row.TenantID, Key: row.Key,
			Detail: "OVER_REFUND claim with no dead letter written (settled by the sweeper; replay or redrive its message)",
		}
		d.Channel, d.TradeNo, d.RefundNo = splitRefundKey(row.Key)
		r.add(d)
	}
	return r.count(ctx, CheckOverRefundNotDeadLettered,
		`SELECT COUNT(*) FROM ss_channel_idempotent WHERE settle_outcome = 'OVER_REFUND' AND `+w, args...)
}

// splitRefundKey returns the channel, trade and refund numbers of a refund
// key, or empty strings for anything else.
func splitRefundKey(key string) (channel, trade, refund string) {
	parts := strings.SplitN(key, ":", 4)
	if len(parts) != 4 || parts[2] != string(idempotent.RefundSucceeded) {
		return "", "", ""
	}
	return parts[0], parts[1], parts[3]
}

// SortDiscrepancies orders ds by check (in Checks order), tenant, channel,
// trade, refund and key, for stable output.
func SortDiscrepancies(ds []Discrepancy) {
	rank := map[string]int{}
	for i, c := range Checks {
		rank[c] = i
	}
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if rank[a.Check] != rank[b.Check] {
			return rank[a.Check] < rank[b.Check]
		}
		if a.TenantID != b.TenantID {
			return a.TenantID < b.TenantID
		}
		return a.Channel+":"+a.TradeNo+":"+a.RefundNo+":"+a.Key < b.Channel+":"+b.TradeNo+":"+b.RefundNo+":"+b.Key
	})
}
