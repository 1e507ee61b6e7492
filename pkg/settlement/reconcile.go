package settlement

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// The reconciliation checks: the Check of every Discrepancy. These are the
// one implementation of the ledger's rules: the worker's tests, the demo, the
// bench, the simulation, the soak and consumer reconcile all run them.
const (
	// CheckLedgerRow: a ledger row with a zero or negative amount, a
	// direction other than DEBIT or CREDIT, or an account other than
	// merchant_payable and its channel's receivable.
	CheckLedgerRow = "ledger_row"
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
	// CheckOrderState: an order row inconsistent in itself: paid or
	// refunded out of range, a status other than the one its amounts
	// imply, or (cumulative channels) a refunded total other than the
	// highest cumulative total reported.
	CheckOrderState = "order_state"
	// CheckLedgerWithoutOrder: postings for a trade with no order row.
	CheckLedgerWithoutOrder = "ledger_without_order"
	// CheckPendingPayment: an order still PENDING_PAYMENT (refunded at the
	// channel, payment never seen) after the pending window.
	CheckPendingPayment = "pending_payment"
	// CheckRefundUnregistered: a refund callback that moved (or could have
	// moved) money with no pre-registration; a Shouqianba cancel, which no
	// one registers, is not one. Run by default only when
	// refunds are expected to be pre-registered
	// (ReconcileOptions.RefundsPreregistered).
	CheckRefundUnregistered = "refund_unregistered"
	// CheckRefundMismatch: a refund callback that disagrees with its
	// registration (amount, cumulative total, a CLOSED registration, a
	// registration left open or marked SUCCEEDED without a callback, an
	// over-refund).
	CheckRefundMismatch = "refund_mismatch"
	// CheckRefundOpen: a registration still REGISTERED or ABNORMAL after the
	// open window, with no callback; its detail says what the querier does
	// about it (RefundQuery).
	CheckRefundOpen = "refund_open"
	// CheckOverRefundNotDeadLettered: an OVER_REFUND claim whose message was
	// never written to the dead-letter topic.
	CheckOverRefundNotDeadLettered = "over_refund_not_dead_lettered"
)

// Checks lists the reconciliation checks in the order they run.
var Checks = []string{
	CheckLedgerRow, CheckPostingUnbalanced, CheckPostingWithoutClaim, CheckOrderLedger, CheckOrderState,
	CheckLedgerWithoutOrder, CheckPendingPayment, CheckRefundUnregistered, CheckRefundMismatch, CheckRefundOpen,
	CheckOverRefundNotDeadLettered,
}

// LedgerChecks are the checks of the ledger and the order rows alone, which
// hold after every settlement whatever the refund registrations, the
// dead-letter topic and the time say: what a test of settlement asserts.
var LedgerChecks = []string{
	CheckLedgerRow, CheckPostingUnbalanced, CheckPostingWithoutClaim, CheckOrderLedger, CheckOrderState,
	CheckLedgerWithoutOrder,
}

// CheckSummaries says in one line what each check of Checks reports.
var CheckSummaries = map[string]string{
	CheckLedgerRow:                 "a ledger row with a non-positive amount, an unknown direction or an account other than merchant_payable and its channel's receivable",
	CheckPostingUnbalanced:         "a POSTED claim without exactly one DEBIT and one CREDIT row of equal, positive amount",
	CheckPostingWithoutClaim:       "ledger rows whose key has no claim, or whose claim is not SETTLED/POSTED",
	CheckOrderLedger:               "an order whose paid or refunded amount differs from its trade's postings",
	CheckOrderState:                "an order whose amounts are out of range or disagree with its status or highest cumulative refund",
	CheckLedgerWithoutOrder:        "ledger rows for a trade with no order row",
	CheckPendingPayment:            "an order still PENDING_PAYMENT (refund seen, payment never) after --pending-after",
	CheckRefundUnregistered:        "a settled refund with no pre-registration (by default only when PAYCB_REFUNDS_PREREGISTERED is true)",
	CheckRefundMismatch:            "a refund callback that disagrees with its registration",
	CheckRefundOpen:                "a registration open with no callback after --open-after, each saying what the querier does about it",
	CheckOverRefundNotDeadLettered: "an OVER_REFUND claim whose message never reached the dead-letter topic",
}

// ErrUnknownCheck is wrapped by Reconcile and SelectChecks when a check
// name is not one of Checks: a usage error.
var ErrUnknownCheck = errors.New("unknown check")

// SkippedNotPreregistered is the reason refund_unregistered is skipped when
// refunds are not expected to be pre-registered.
const SkippedNotPreregistered = "refunds are not expected to be pre-registered (PAYCB_REFUNDS_PREREGISTERED=false)"

// SkippedByOption is the reason of a check left out by ReconcileOptions.Checks
// or Skip.
const SkippedByOption = "not selected"

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
	// RefundsPreregistered says every refund is expected to have been
	// registered before its callback (PAYCB_REFUNDS_PREREGISTERED). When
	// false (the default) refund_unregistered runs only when named in
	// Checks.
	RefundsPreregistered bool
	// Checks, when not empty, names the only checks to run; Skip names
	// checks not to run. A name that is not one of Checks makes Reconcile
	// fail with ErrUnknownCheck before reading anything.
	Checks, Skip []string
}

// SelectChecks returns the checks o runs, in Checks order, and the reason
// each other check is skipped. It fails with an error wrapping
// ErrUnknownCheck when o.Checks or o.Skip names an unknown check.
func SelectChecks(o ReconcileOptions) (run []string, skipped map[string]string, err error) {
	known := make(map[string]bool, len(Checks))
	for _, c := range Checks {
		known[c] = true
	}
	named := func(list []string) (map[string]bool, error) {
		m := map[string]bool{}
		for _, c := range list {
			if !known[c] {
				return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownCheck, c, strings.Join(Checks, ", "))
			}
			m[c] = true
		}
		return m, nil
	}
	only, err := named(o.Checks)
	if err != nil {
		return nil, nil, err
	}
	skip, err := named(o.Skip)
	if err != nil {
		return nil, nil, err
	}
	skipped = map[string]string{}
	for _, c := range Checks {
		switch {
		case skip[c], len(only) > 0 && !only[c]:
			skipped[c] = SkippedByOption
		case c == CheckRefundUnregistered && !o.RefundsPreregistered && !only[c]:
			skipped[c] = SkippedNotPreregistered
		default:
			run = append(run, c)
		}
	}
	return run, skipped, nil
}

// Discrepancy is one finding.
type Discrepancy struct {
	Check    string `json:"check"`
	TenantID int64  `json:"tenant_id"`
	Key      string `json:"key,omitempty"`
	Channel  string `json:"channel,omitempty"`
	TradeNo  string `json:"trade_no,omitempty"`
	RefundNo string `json:"refund_no,omitempty"`
	// LedgerIDs are the ids of the ss_ledger_entry rows concerned, when
	// the check names rows.
	LedgerIDs []int64 `json:"ledger_ids,omitempty"`
	Detail    string  `json:"detail"`
	// Fingerprint is set on the discrepancies an operator can resolve
	// (refund_unregistered, refund_mismatch; see ResolveRefund): the facts
	// found, amounts and states, free of times, so that the same
	// discrepancy found again has the same fingerprint and one that
	// differs in anything has another.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// String formats d on one line: check, tenant, what it is about, detail.
func (d Discrepancy) String() string {
	var about []string
	for _, s := range []string{d.Channel, d.TradeNo, d.RefundNo, d.Key} {
		if s != "" {
			about = append(about, s)
		}
	}
	return fmt.Sprintf("%s: tenant %d %s: %s", d.Check, d.TenantID, strings.Join(about, " "), d.Detail)
}

// ReconcileReport is what Reconcile found.
type ReconcileReport struct {
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`
	At   time.Time  `json:"at"`
	// Checks are the checks that ran, in order; Skipped says why each
	// other check did not.
	Checks        []string          `json:"checks"`
	Skipped       map[string]string `json:"skipped,omitempty"`
	Examined      map[string]int    `json:"examined"`
	Discrepancies []Discrepancy     `json:"discrepancies"`
	// Resolved are the discrepancies found that an operator has resolved
	// as they stand (ResolveRefund: same check, same fingerprint): they
	// are not in Discrepancies and do not make the report fail.
	Resolved []ResolvedDiscrepancy `json:"resolved"`
}

// OK reports whether nothing was found, resolved discrepancies aside.
func (r ReconcileReport) OK() bool { return len(r.Discrepancies) == 0 }

// Err returns nil when r is OK, else an error listing every discrepancy.
func (r ReconcileReport) Err() error {
	if r.OK() {
		return nil
	}
	lines := make([]string, len(r.Discrepancies))
	for i, d := range r.Discrepancies {
		lines[i] = d.String()
	}
	return fmt.Errorf("reconcile: %d discrepancies: %s", len(r.Discrepancies), strings.Join(lines, "; "))
}

// Counts returns the number of open discrepancies per check that ran, every
// such check present (resolved ones are not counted).
func (r ReconcileReport) Counts() map[string]int {
	out := make(map[string]int, len(r.Checks))
	for _, c := range r.Checks {
		out[c] = 0
	}
	for _, d := range r.Discrepancies {
		out[d.Check]++
	}
	return out
}

// Reconcile runs the selected checks (see SelectChecks) against db (MySQL,
// MariaDB or the embedded SQLite database), read-only, and returns the
// findings sorted by check. A refund discrepancy an operator resolved as it
// stands (ResolveRefund, ss_refund_resolution) is listed in Resolved
// instead of Discrepancies. A finding is not an error; errors are database
// errors and unknown check names (ErrUnknownCheck). Run it on a replica or
// at a quiet time: it reads the ledger of every trade it examines. Rows
// committed while it runs may show as transient findings; run it again
// before acting on one.
func Reconcile(ctx context.Context, db bun.IDB, o ReconcileOptions) (ReconcileReport, error) {
	run, skipped, err := SelectChecks(o)
	if err != nil {
		return ReconcileReport{}, fmt.Errorf("reconcile: %w", err)
	}
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
	rep := ReconcileReport{
		At: now().UTC(), Checks: run, Examined: map[string]int{}, Discrepancies: []Discrepancy{},
		Resolved: []ResolvedDiscrepancy{},
	}
	if len(skipped) > 0 {
		rep.Skipped = skipped
	}
	if !o.From.IsZero() {
		f := o.From.UTC()
		rep.From = &f
	}
	if !o.To.IsZero() {
		t := o.To.UTC()
		rep.To = &t
	}
	r := &reconciler{db: db, o: o, now: rep.At, rep: &rep}
	if err := r.run(ctx, run); err != nil {
		return rep, err
	}
	if err := r.applyResolutions(ctx); err != nil {
		return rep, err
	}
	return rep, nil
}

// run runs the steps serving the checks selected, then keeps only the
// selected checks' findings, sorted.
func (r *reconciler) run(ctx context.Context, run []string) error {
	selected := make(map[string]bool, len(run))
	for _, c := range run {
		selected[c] = true
	}
	for _, step := range []struct {
		checks []string
		run    func(context.Context) error
	}{
		{[]string{CheckLedgerRow}, r.ledgerRows},
		{[]string{CheckPostingUnbalanced}, r.postingsOfClaims},
		{[]string{CheckPostingWithoutClaim}, r.claimsOfPostings},
		{[]string{CheckOrderLedger, CheckOrderState}, r.ordersAgainstLedger},
		{[]string{CheckLedgerWithoutOrder}, r.ledgerWithoutOrder},
		{[]string{CheckPendingPayment}, r.pendingPayment},
		{[]string{CheckRefundUnregistered}, r.unregisteredRefunds},
		{[]string{CheckRefundMismatch, CheckRefundOpen}, r.registrations},
		{[]string{CheckOverRefundNotDeadLettered}, r.overRefunds},
	} {
		if !slices.ContainsFunc(step.checks, func(c string) bool { return selected[c] }) {
			continue
		}
		if err := step.run(ctx); err != nil {
			return err
		}
	}
	// A step serving two checks reports both; keep only the selected.
	r.rep.Discrepancies = slices.DeleteFunc(r.rep.Discrepancies, func(d Discrepancy) bool { return !selected[d.Check] })
	maps.DeleteFunc(r.rep.Examined, func(c string, _ int) bool { return !selected[c] })
	SortDiscrepancies(r.rep.Discrepancies)
	return nil
}

type reconciler struct {
	db  bun.IDB
	o   ReconcileOptions
	now time.Time
	rep *ReconcileReport
	// refund, when set, limits the refund checks to one trade's
	// registrations and one refund's claim (ResolveRefund).
	refund *refundScope
}

// refundScope is the trade and refund ResolveRefund examines.
type refundScope struct {
	tenant  int64
	channel channels.Channel
	tradeNo string
	key     idempotent.Key
}

// ledgerByKey is the ledger table, aliased l, for a join by (tenant_id,
// idempotent_key). On MySQL, MariaDB and TiDB it names the ledger's unique
// source key, uk_ledger_source: with statistics not yet gathered (a
// freshly created or restored database) MariaDB chose idx_ledger_trade,
// whose first column is tenant_id alone, and read every ledger row of the
// tenant for each claim: 49 s for 10,000 claims against 0.05 s with the
// key, past the connection's read timeout on anything larger. SQLite's
// planner takes the unique key by itself.
func (r *reconciler) ledgerByKey() string {
	if r.db.Dialect().Name() == dialect.SQLite {
		return "ss_ledger_entry l"
	}
	return "ss_ledger_entry l FORCE INDEX (uk_ledger_source)"
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

// ledgerRows: every ledger row has a positive amount, a direction DEBIT or
// CREDIT, and the account merchant_payable or its channel's receivable.
func (r *reconciler) ledgerRows(ctx context.Context) error {
	w, args := r.window("l.created_at")
	valid := []string{"l.account = ?"}
	accounts := []any{AccountMerchantPayable}
	for _, spec := range channels.All() {
		valid = append(valid, "(l.channel_code = ? AND l.account = ?)")
		accounts = append(accounts, string(spec.Code), ReceivableAccount(spec.Code))
	}
	var rows []ledgerEntryRow
	err := r.scan(ctx, CheckLedgerRow, &rows, `
SELECT l.id, l.tenant_id, l.idempotent_key, l.channel_code, l.channel_trade_no, l.account, l.direction, l.amount
FROM ss_ledger_entry l
WHERE (l.amount <= 0 OR l.direction NOT IN (?, ?) OR NOT (`+strings.Join(valid, " OR ")+`)) AND `+w+`
ORDER BY l.id`, append(append([]any{string(Debit), string(Credit)}, accounts...), args...)...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		var problems []string
		if row.Amount <= 0 {
			problems = append(problems, "amount is not positive")
		}
		if row.Direction != string(Debit) && row.Direction != string(Credit) {
			problems = append(problems, "direction is neither DEBIT nor CREDIT")
		}
		if row.Account != AccountMerchantPayable && row.Account != ReceivableAccount(channels.Channel(row.Channel)) {
			problems = append(problems, "account is neither merchant_payable nor "+ReceivableAccount(channels.Channel(row.Channel)))
		}
		r.add(Discrepancy{
			Check: CheckLedgerRow, TenantID: row.TenantID, Key: row.Key, Channel: row.Channel, TradeNo: row.TradeNo,
			LedgerIDs: []int64{row.ID}, Detail: fmt.Sprintf("row %s: %s", row, strings.Join(problems, ", ")),
		})
	}
	return r.count(ctx, CheckLedgerRow, `SELECT COUNT(*) FROM ss_ledger_entry l WHERE `+w, args...)
}

// ledgerEntryRow is one ss_ledger_entry row as the checks name it.
type ledgerEntryRow struct {
	ID        int64  `bun:"id"`
	TenantID  int64  `bun:"tenant_id"`
	Key       string `bun:"idempotent_key"`
	Channel   string `bun:"channel_code"`
	TradeNo   string `bun:"channel_trade_no"`
	Account   string `bun:"account"`
	Direction string `bun:"direction"`
	Amount    int64  `bun:"amount"`
}

// String names the row: "#id DIRECTION account amount".
func (l ledgerEntryRow) String() string {
	return fmt.Sprintf("#%d %s %s %d", l.ID, l.Direction, l.Account, l.Amount)
}

// maxRowLookups bounds how many unbalanced postings have their rows listed.
const maxRowLookups = 200

// rowsOf returns the ledger rows of one key, by id.
func (r *reconciler) rowsOf(ctx context.Context, tenantID int64, key string) ([]ledgerEntryRow, error) {
	var rows []ledgerEntryRow
	err := r.scan(ctx, CheckPostingUnbalanced, &rows, `
SELECT id, tenant_id, idempotent_key, channel_code, channel_trade_no, account, direction, amount
FROM ss_ledger_entry WHERE tenant_id = ? AND idempotent_key = ? ORDER BY id`, tenantID, key)
	return rows, err
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
SELECT tenant_id, idempotent_key, debits, credits, debit_amount, credit_amount FROM (
  SELECT c.tenant_id, c.idempotent_key,
    COALESCE(SUM(CASE WHEN l.direction = 'DEBIT' THEN 1 ELSE 0 END), 0) AS debits,
    COALESCE(SUM(CASE WHEN l.direction = 'CREDIT' THEN 1 ELSE 0 END), 0) AS credits,
    COALESCE(SUM(CASE WHEN l.direction = 'DEBIT' THEN l.amount ELSE 0 END), 0) AS debit_amount,
    COALESCE(SUM(CASE WHEN l.direction = 'CREDIT' THEN l.amount ELSE 0 END), 0) AS credit_amount,
    COUNT(l.id) AS n
  FROM ss_channel_idempotent c
  LEFT JOIN `+r.ledgerByKey()+` ON l.tenant_id = c.tenant_id AND l.idempotent_key = c.idempotent_key
  WHERE c.status = 'SETTLED' AND c.settle_outcome = 'POSTED' AND `+w+`
  GROUP BY c.tenant_id, c.idempotent_key
) p
WHERE debits <> 1 OR credits <> 1 OR n <> 2 OR debit_amount <> credit_amount OR debit_amount <= 0
ORDER BY tenant_id, idempotent_key`, args...)
	if err != nil {
		return err
	}
	for i, row := range rows {
		d := Discrepancy{
			Check: CheckPostingUnbalanced, TenantID: row.TenantID, Key: row.Key,
			Detail: fmt.Sprintf("POSTED claim has %d debit row(s) totalling %d and %d credit row(s) totalling %d; want one of each, equal and positive",
				row.Debits, row.DebitAmount, row.Credits, row.CreditAmount),
		}
		if i < maxRowLookups {
			ledger, err := r.rowsOf(ctx, row.TenantID, row.Key)
			if err != nil {
				return err
			}
			names := make([]string, len(ledger))
			for j, l := range ledger {
				names[j] = l.String()
				d.LedgerIDs = append(d.LedgerIDs, l.ID)
				d.Channel, d.TradeNo = l.Channel, l.TradeNo
			}
			if len(names) > 0 {
				d.Detail += "; rows " + strings.Join(names, ", ")
			}
		}
		r.add(d)
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
		`SELECT COUNT(*) FROM (SELECT DISTINCT l.tenant_id, l.idempotent_key FROM ss_ledger_entry l WHERE `+w+`) k`, args...)
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
		Total     int64          `bun:"amount_total"`
		Paid      int64          `bun:"paid_amount"`
		Refunded  int64          `bun:"refunded_amount"`
		MaxCum    int64          `bun:"max_cumulative_refund"`
		Status    string         `bun:"status"`
		Account   sql.NullString `bun:"account"`
		Direction sql.NullString `bun:"direction"`
		Amount    int64          `bun:"amount"`
	}
	err := r.scan(ctx, CheckOrderLedger, &rows, `
SELECT o.id, o.tenant_id, o.channel_code, o.channel_trade_no, o.amount AS amount_total, o.paid_amount, o.refunded_amount,
  o.max_cumulative_refund, o.status, l.account, l.direction, COALESCE(SUM(l.amount), 0) AS amount
FROM ss_channel_order o
LEFT JOIN ss_ledger_entry l ON l.tenant_id = o.tenant_id AND l.channel_code = o.channel_code AND l.channel_trade_no = o.channel_trade_no
WHERE `+w+`
GROUP BY o.id, o.tenant_id, o.channel_code, o.channel_trade_no, o.amount, o.paid_amount, o.refunded_amount,
  o.max_cumulative_refund, o.status, l.account, l.direction
ORDER BY o.id`, args...)
	if err != nil {
		return err
	}
	type sums struct {
		tenant                     int64
		channel, trade, status     string
		total, maxCum              int64
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
			s = &sums{
				tenant: row.TenantID, channel: row.Channel, trade: row.TradeNo, status: row.Status,
				total: row.Total, maxCum: row.MaxCum, paid: row.Paid, refunded: row.Refunded,
			}
			byID[row.ID] = s
			order = append(order, row.ID)
		}
		if !row.Account.Valid {
			continue
		}
		receivable := ReceivableAccount(channels.Channel(row.Channel))
		switch {
		case row.Account.String == AccountMerchantPayable && row.Direction.String == string(Credit):
			s.mpCredit += row.Amount
		case row.Account.String == AccountMerchantPayable && row.Direction.String == string(Debit):
			s.mpDebit += row.Amount
		case row.Account.String == receivable && row.Direction.String == string(Debit):
			s.rcDebit += row.Amount
		case row.Account.String == receivable && row.Direction.String == string(Credit):
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
		var state []string
		if s.paid < 0 || s.refunded < 0 || s.refunded > s.total {
			state = append(state, fmt.Sprintf("total %d, paid %d, refunded %d out of range", s.total, s.paid, s.refunded))
		}
		if want := DeriveStatus(s.total, s.paid, s.refunded); s.status != string(want) {
			state = append(state, fmt.Sprintf("status %s, amounts say %s", s.status, want))
		}
		if channels.Channel(s.channel).Cumulative() && s.refunded != s.maxCum {
			state = append(state, fmt.Sprintf("refunded %d != highest cumulative %d", s.refunded, s.maxCum))
		}
		if len(state) > 0 {
			r.add(Discrepancy{Check: CheckOrderState, TenantID: s.tenant, Channel: s.channel, TradeNo: s.trade, Detail: strings.Join(state, "; ")})
		}
	}
	r.rep.Examined[CheckOrderLedger] = len(order)
	r.rep.Examined[CheckOrderState] = len(order)
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
		`SELECT COUNT(*) FROM (SELECT DISTINCT l.tenant_id, l.channel_code, l.channel_trade_no FROM ss_ledger_entry l WHERE `+w+`) t`, args...)
}

// pendingPayment: orders known only from refunds for longer than
// PendingAfter. A Shouqianba order known only from its cancel (nothing
// refunded, the CANCEL claim settled) is not reported: an unpaid order's
// cancel moves nothing and its payment may never come; should it come, it
// is reversed at once.
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
	var cancelKeys []string
	for _, row := range rows {
		if ch := channels.Channel(row.Channel); ch.HasCancel() && row.Refunded == 0 {
			if k, err := channels.CancelKey(ch, row.TradeNo); err == nil {
				cancelKeys = append(cancelKeys, string(k))
			}
		}
	}
	cancelled := map[string]bool{} // tenant and key of a settled cancel
	for chunk := range slices.Chunk(cancelKeys, 500) {
		var claims []struct {
			TenantID int64  `bun:"tenant_id"`
			Key      string `bun:"idempotent_key"`
		}
		if err := r.db.NewSelect().Table("ss_channel_idempotent").Column("tenant_id", "idempotent_key").
			Where("status = ?", string(idempotent.StatusSettled)).Where("idempotent_key IN (?)", bun.List(chunk)).
			Scan(ctx, &claims); err != nil {
			return fmt.Errorf("%s: read the cancels of %d orders: %w", CheckPendingPayment, len(chunk), err)
		}
		for _, c := range claims {
			cancelled[fmt.Sprintf("%d/%s", c.TenantID, c.Key)] = true
		}
	}
	for _, row := range rows {
		if k, err := channels.CancelKey(channels.Channel(row.Channel), row.TradeNo); err == nil && row.Refunded == 0 &&
			cancelled[fmt.Sprintf("%d/%s", row.TenantID, k)] {
			continue // known only from an unpaid cancel
		}
		r.add(Discrepancy{
			Check: CheckPendingPayment, TenantID: row.TenantID, Channel: row.Channel, TradeNo: row.TradeNo,
			Detail: fmt.Sprintf("PENDING_PAYMENT for %s (refunded %d, payment never seen)", r.now.Sub(row.CreatedAt).Round(time.Second), row.Refunded),
		})
	}
	return r.count(ctx, CheckPendingPayment, `SELECT COUNT(*) FROM ss_channel_order WHERE status = 'PENDING_PAYMENT' AND `+w, args...)
}

// unregisteredRefunds: settled refund callbacks with no registration. A
// Shouqianba cancel (its refund number is the channel's Spec.CancelRefundNo) is not one:
// it is the end of /upay/v2/cancel or a same-day revoke, which no operator
// registers as a refund, so it is never reported here.
func (r *reconciler) unregisteredRefunds(ctx context.Context) error {
	w, args := r.window("c.created_at")
	if r.refund != nil {
		w += " AND c.tenant_id = ? AND c.idempotent_key = ?"
		args = append(args, r.refund.tenant, string(r.refund.key))
	}
	var rows []struct {
		TenantID int64  `bun:"tenant_id"`
		Key      string `bun:"idempotent_key"`
		Outcome  string `bun:"settle_outcome"`
		Posted   int64  `bun:"posted"`
	}
	err := r.scan(ctx, CheckRefundUnregistered, &rows, `
SELECT c.tenant_id, c.idempotent_key, c.settle_outcome,
  COALESCE((SELECT SUM(l.amount) FROM ss_ledger_entry l
    WHERE l.tenant_id = c.tenant_id AND l.idempotent_key = c.idempotent_key
      AND l.account = 'merchant_payable' AND l.direction = 'DEBIT'), 0) AS posted
FROM ss_channel_idempotent c
LEFT JOIN ss_refund_request rr ON rr.tenant_id = c.tenant_id AND rr.idempotent_key = c.idempotent_key
WHERE c.event_type = 'REFUND_SUCCEEDED' AND c.status = 'SETTLED' AND c.settle_outcome IN ('POSTED', 'NO_MONEY')
  AND rr.id IS NULL AND `+w+`
ORDER BY c.tenant_id, c.idempotent_key`, args...)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if isCancelKey(row.Key) {
			continue // a cancel is not a refund anyone registers
		}
		d := Discrepancy{
			Check: CheckRefundUnregistered, TenantID: row.TenantID, Key: row.Key,
			Detail:      fmt.Sprintf("refund callback settled %s with no pre-registration", row.Outcome),
			Fingerprint: fmt.Sprintf("no registration; callback SETTLED %s; posted %d", row.Outcome, row.Posted),
		}
		d.Channel, d.TradeNo, d.RefundNo = splitRefundKey(row.Key)
		r.add(d)
	}
	if r.refund != nil {
		return nil // examined counts are reconcile's, not a resolution's
	}
	return r.count(ctx, CheckRefundUnregistered, `SELECT COUNT(*) FROM ss_channel_idempotent c
WHERE c.event_type = 'REFUND_SUCCEEDED' AND c.status = 'SETTLED' AND `+w, args...)
}

// registrations: each registration against its callback (claim and
// postings), and per cumulative trade the refunded total against the
// registrations.
func (r *reconciler) registrations(ctx context.Context) error {
	w, args := r.window("rr.created_at")
	if r.refund != nil {
		w += " AND rr.tenant_id = ? AND rr.channel_code = ? AND rr.channel_trade_no = ?"
		args = append(args, r.refund.tenant, string(r.refund.channel), r.refund.tradeNo)
	}
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
LEFT JOIN `+r.ledgerByKey()+` ON l.tenant_id = rr.tenant_id AND l.idempotent_key = rr.idempotent_key
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
			callback := "no callback"
			if row.Claim.Valid {
				callback = strings.TrimSpace("callback " + row.Claim.String + " " + row.Outcome.String)
			}
			r.add(Discrepancy{
				Check: CheckRefundMismatch, TenantID: row.TenantID, Channel: row.Channel, TradeNo: row.TradeNo,
				RefundNo: row.RefundNo, Detail: fmt.Sprintf(format, a...),
				Fingerprint: fmt.Sprintf("registered %d %s; %s; posted %d", row.Amount, row.Status, callback, row.Posted),
			})
		}
		status := RegistrationStatus(row.Status)
		cumulative := channels.Channel(row.Channel).Cumulative()
		settled := row.Claim.String == string(idempotent.StatusSettled)
		switch {
		case settled && row.Outcome.String == string(idempotent.OutcomeOverRefund):
			mismatch("registered %d but the callback was an over-refund (nothing posted)", row.Amount)
		case settled && status == RegistrationClosed:
			mismatch("registration CLOSED but the refund succeeded at the channel (%s)", row.Outcome.String)
		case settled && status.Open():
			mismatch("refund callback settled %s but the registration is still %s", row.Outcome.String, status)
		case settled && !cumulative && row.Posted != row.Amount:
			mismatch("registered %d but %d was posted", row.Amount, row.Posted)
		case !settled && status == RegistrationSucceeded:
			mismatch("registration SUCCEEDED with no settled refund callback")
		case !settled && status.Open() && row.CreatedAt.Before(openCutoff):
			// Say per item what the querier does about it: asking (and
			// its last answer), or cannot ask and why.
			q, err := RefundQueryOf(ctx, r.db, row.TenantID, channels.Channel(row.Channel), row.TradeNo, row.RefundNo)
			if err != nil {
				return fmt.Errorf("reconcile %s: %w", CheckRefundOpen, err)
			}
			r.add(Discrepancy{
				Check: CheckRefundOpen, TenantID: row.TenantID, Channel: row.Channel, TradeNo: row.TradeNo,
				RefundNo: row.RefundNo, Detail: fmt.Sprintf("%s for %s with no callback; %s", status, r.now.Sub(row.CreatedAt).Round(time.Second), q),
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
			case status == RegistrationSucceeded:
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
		// Above succeeded + open is a discrepancy only when every refund is
		// expected registered: otherwise an unregistered refund (a
		// callback, or a registration made from a statement beside
		// callbacks that had none) accounts for it.
		if s.refunded < s.succeeded || (r.o.RefundsPreregistered && s.refunded > s.succeeded+s.open) {
			r.add(Discrepancy{
				Check: CheckRefundMismatch, TenantID: k.tenant, Channel: k.channel, TradeNo: k.trade,
				Detail:      fmt.Sprintf("cumulative refunded %d outside [succeeded %d, succeeded + open %d]", s.refunded, s.succeeded, s.succeeded+s.open),
				Fingerprint: fmt.Sprintf("cumulative refunded %d; succeeded %d; open %d", s.refunded, s.succeeded, s.open),
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

// isCancelKey reports whether key is a cancel's: a refund key whose refund
// number is its channel's Spec.CancelRefundNo (channels.CancelKey).
func isCancelKey(key string) bool {
	ch, _, refund := splitRefundKey(key)
	no := channels.Channel(ch).CancelRefundNo()
	return no != "" && refund == no
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
