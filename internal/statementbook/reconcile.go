package statementbook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/pkg/statements"
)

// The categories of a statement reconciliation item.
const (
	// StatementMissingInLedger: the statement says the channel settled it;
	// nothing is posted.
	StatementMissingInLedger = "missing_in_ledger"
	// StatementMissingInStatement: posted with the channel's time on the
	// day, but absent from that day's statement and from the neighbouring
	// days' statements that were imported.
	StatementMissingInStatement = "missing_in_statement"
	// StatementAmountMismatch: both sides have it, with different amounts.
	StatementAmountMismatch = "amount_mismatch"
	// StatementStatusMismatch: the statement says the channel did not
	// settle what the ledger posted (a WeChat refund row PROCESSING or
	// FAIL, a REVOKED WeChat payment, a Shouqianba order not paid).
	StatementStatusMismatch = "status_mismatch"
	// StatementNoStatement: nothing is imported for the day and it is not
	// declared empty (DeclareEmptyStatements): a failed download and a
	// lost day of callbacks look the same, so the day is never clean.
	StatementNoStatement = "no_statement"
)

// ErrNoStatement is wrapped by ReconcileStatement's error when no statement
// is imported for the tenant, channel and day and the day is not declared
// empty: there is nothing to reconcile, and the report holds one
// no_statement item.
var ErrNoStatement = errors.New("no statement imported for the day")

// StatementItem is one discrepancy between a day's statement and the
// ledger. StatementAmount and LedgerAmount are in fen, nil for the side
// that has nothing; for the per-trade refund totals of Alipay and
// Shouqianba they are the totals compared (see ReconcileStatement): for an
// Alipay amount_mismatch the running totals up to the end of the day, for
// an Alipay missing_in_ledger or missing_in_statement what the difference
// of the running totals grew by on the day.
type StatementItem struct {
	Category string `json:"category"`
	TradeNo  string `json:"trade_no"`
	RefundNo string `json:"refund_no,omitempty"`
	// MerchantOrderNo is the merchant's order number of the trade, which
	// merchants search by: from the statement's lines, else from the
	// trade's order row; empty when neither knows it.
	MerchantOrderNo string `json:"merchant_order_no"`
	StatementAmount *int64 `json:"statement_amount"`
	LedgerAmount    *int64 `json:"ledger_amount"`
	// LineNo is the statement line's number in its file, 0 when the item
	// has no line (missing_in_statement) or stands for several (a per-trade
	// refund total: the first line's).
	LineNo int `json:"line_no,omitempty"`
	// Key is the ledger's idempotency key, when one posting is meant.
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

// StatementReport is what ReconcileStatement found for one tenant, channel
// and Beijing-time day. Fees are reported beside the items, never counted as
// discrepancies.
type StatementReport struct {
	TenantID int64  `json:"tenant_id"`
	Channel  string `json:"channel"`
	Day      string `json:"day"`
	// StatementSHA1 is the SHA-1 of the file last imported that changed
	// the day (empty for a day declared empty); kept for the readers of
	// the report before StatementVersion.
	StatementSHA1 string `json:"statement_sha1"`
	// StatementVersion is the version of the day's lines compared (see
	// DayVersion): a day may be built from several files, so this, not a
	// file's SHA-1, says which statement the report is of.
	StatementVersion string `json:"statement_version"`
	// Neighbours are the neighbouring days whose imported statements were
	// consulted for missing_in_statement.
	Neighbours []string `json:"neighbours"`
	// Lines is the number of the day's statement lines; Postings the number
	// of the ledger's postings dated to the day.
	Lines    int `json:"lines"`
	Postings int `json:"postings"`
	// FeeMicroYuan sums the day's fees (0.00001 yuan, signed as the file
	// has them); Fee is the same in yuan with five decimals.
	FeeMicroYuan int64           `json:"fee_micro_yuan"`
	Fee          string          `json:"fee"`
	Items        []StatementItem `json:"items"`
}

// OK reports whether nothing was found.
func (r StatementReport) OK() bool { return len(r.Items) == 0 }

// posting is one ledger posting on merchant_payable with its claim's time.
type posting struct {
	Key        string
	TradeNo    string
	RefundNo   string // empty for a payment
	Amount     int64
	OccurredAt time.Time // zero when unknown
}

// ReconcileStatement compares the statement imported for tenant, channel ch
// and Beijing-time day (YYYY-MM-DD) with the ledger, and records the result
// (see recordStatementResult); it changes nothing else. The ledger
// side is the merchant_payable postings (CREDIT for a payment, DEBIT for a
// refund), dated by their claim's occurred_at (the channel's time), or, for
// claims made before that column, by the "occurred_at" of the stored event
// when purge has not cleared it.
//
// What it compares, per channel:
//   - payments by trade number: the statement line's Amount (WeChat 订单金额,
//     Alipay 订单金额, Shouqianba total_amount) with the payment posting,
//     wherever its day; a WeChat payment line that is not SUCCESS (REVOKED),
//     or a Shouqianba order neither PAID, PARTIAL_REFUNDED nor REFUNDED
//     (nor CANCELED, below), is money the channel did not settle: posted,
//     it is a status_mismatch;
//   - WeChat refunds by refund number: the row's own Amount (申请退款金额)
//     with the refund's posting; a row not SUCCESS that the ledger posted is
//     a status_mismatch (the row's status is a snapshot, never updated);
//   - Alipay refunds per trade, as running totals (which refund key
//     carries which part of a cumulative refund depends on arrival order,
//     so a posting may carry an earlier day's refund): the trade's refund
//     rows in the statements up to the end of the day with the trade's
//     refund postings dated up to the end of the day, both counted from the
//     first of the consecutive days around the day whose statements are
//     imported (earlier days are left out on both sides); a difference is
//     reported on the day it appears or grows, not again while it stays,
//     and not at all once the totals agree (or the difference reverses)
//     at the end of a later imported day (see compareAlipayRefunds);
//   - Shouqianba orders: total_amount − net_amount with the sum of all the
//     trade's refund postings dated up to the end of the day; a CANCELED
//     order, which says nothing about whether its payment had gone through,
//     is never missing_in_ledger: the trade's postings must net to zero
//     (the payment posted, if any, minus every refund of the trade dated up
//     to the end of the day), else amount_mismatch (see compareCancel).
//
// A posting dated to the day that no line of the day, nor of an imported
// neighbouring day's statement, accounts for (same trade, same WeChat
// refund number) is missing_in_statement; Alipay refund postings are when
// the ledger's running total moves ahead on a day without a refund row of
// the trade. A day declared empty (DeclareEmptyStatements) is a statement
// without lines: every posting dated to it is missing_in_statement. It
// returns an error wrapping ErrNoStatement, with a report holding one
// no_statement item and recording nothing, when nothing is imported for
// the day and it is not declared empty, postings or not: such a day is
// never recorded clean. It returns an error with the report when the
// result could not be recorded.
func ReconcileStatement(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, day string) (StatementReport, error) {
	ranAt := time.Now().UTC()
	rep := StatementReport{TenantID: tenant, Channel: string(ch), Day: day, Neighbours: []string{}, Items: []StatementItem{}}
	start, err := time.ParseInLocation(time.DateOnly, day, statements.Beijing)
	if err != nil {
		return rep, fmt.Errorf("reconcile statement: day %q: %w", day, err)
	}
	end := start.AddDate(0, 0, 1)
	prev, next := start.AddDate(0, 0, -1).Format(time.DateOnly), end.Format(time.DateOnly)

	files, err := statementFiles(ctx, db, tenant, ch, []string{prev, day, next})
	if err != nil {
		return rep, err
	}
	file, ok := files[day]
	if !ok {
		return noStatement(rep, start, end, ranAt)
	}
	rep.StatementSHA1 = file.SHA1
	lines, err := statementLines(ctx, db, file.ID)
	if err != nil {
		return rep, err
	}
	rep.Lines = len(lines)
	rep.StatementVersion = dayVersion(lines)
	var neighbourLines []statementLine
	for _, d := range []string{prev, next} {
		f, ok := files[d]
		if !ok {
			continue
		}
		rep.Neighbours = append(rep.Neighbours, d)
		nl, err := statementLines(ctx, db, f.ID)
		if err != nil {
			return rep, err
		}
		neighbourLines = append(neighbourLines, nl...)
	}
	for _, l := range lines {
		rep.FeeMicroYuan += l.FeeMicroYuan
	}
	rep.Fee = microYuan(rep.FeeMicroYuan)

	onDay, err := postingsOfDay(ctx, db, tenant, ch, start.UTC(), end.UTC())
	if err != nil {
		return rep, err
	}
	rep.Postings = len(onDay)
	trades := make([]string, 0, len(lines))
	for _, l := range lines {
		trades = append(trades, l.TradeNo)
	}
	refundTrades := runningRefundTrades(ch, lines, onDay)
	byTrade, err := postingsOfTrades(ctx, db, tenant, ch, slices.Concat(trades, refundTrades))
	if err != nil {
		return rep, err
	}
	for k, p := range onDay {
		byTrade[k] = p
	}
	r := reconciler{ch: ch, end: end.UTC(), postings: byTrade}
	r.compare(lines)
	if len(refundTrades) > 0 {
		win, err := readRefundWindow(ctx, db, tenant, ch, day, refundTrades)
		if err != nil {
			return rep, err
		}
		r.compareAlipayRefunds(win, refundTrades)
	}
	r.unaccounted(onDay, lines, neighbourLines)
	rep.Items = append(rep.Items, r.items...)
	if err := fillMerchantOrderNos(ctx, db, tenant, ch, rep.Items, slices.Concat(lines, neighbourLines)); err != nil {
		return rep, err
	}
	slices.SortStableFunc(rep.Items, func(a, b StatementItem) int {
		return strings.Compare(a.Category+" "+a.TradeNo+" "+a.RefundNo, b.Category+" "+b.TradeNo+" "+b.RefundNo)
	})
	if err := recordStatementResult(ctx, db, rep, file.SHA1, ranAt); err != nil {
		return rep, err
	}
	return rep, nil
}

// noStatement is the report and error of a day with nothing imported and
// not declared empty.
func noStatement(rep StatementReport, start, end, ranAt time.Time) (StatementReport, error) {
	msg := "nothing is imported for the day and it is not declared empty: check the statement's download and import it " +
		"(consumer statement import), or record the channel's answer that there is none (consumer statement empty)"
	if end.After(ranAt) {
		msg = fmt.Sprintf("the day has not ended (it ends at %s): its statement does not exist yet", end.Format(time.RFC3339))
	}
	rep.Items = append(rep.Items, StatementItem{Category: StatementNoStatement, Message: msg})
	return rep, fmt.Errorf("reconcile statement: tenant %d %s %s: %w", rep.TenantID, rep.Channel, start.Format(time.DateOnly), ErrNoStatement)
}

// statementResult is a row of ss_statement_reconcile: the latest
// reconciliation of one tenant, channel and Beijing-time day.
type statementResult struct {
	bun.BaseModel `bun:"table:ss_statement_reconcile"`

	ID                 int64     `bun:"id,pk,autoincrement"`
	TenantID           int64     `bun:"tenant_id"`
	ChannelCode        string    `bun:"channel_code"`
	StatementDay       string    `bun:"statement_day"`
	StatementSHA1      string    `bun:"statement_sha1"`
	StatementVersion   string    `bun:"statement_version"`
	ReconciledAt       time.Time `bun:"reconciled_at"`
	LineCount          int       `bun:"line_count"`
	PostingCount       int       `bun:"posting_count"`
	MissingInLedger    int       `bun:"missing_in_ledger"`
	MissingInStatement int       `bun:"missing_in_statement"`
	AmountMismatch     int       `bun:"amount_mismatch"`
	StatusMismatch     int       `bun:"status_mismatch"`
	FeeMicroYuan       int64     `bun:"fee_micro_yuan"`
}

// resultColumns are the columns a newer run of the day replaces, ending
// with reconciled_at: MySQL assigns left to right, so every condition
// before it still sees the held row's time.
var resultColumns = []string{
	"statement_sha1", "statement_version", "line_count", "posting_count", "missing_in_ledger", "missing_in_statement",
	"amount_mismatch", "status_mismatch", "fee_micro_yuan", "reconciled_at",
}

// recordStatementResult stores what one reconciliation of rep's day found,
// against the statement held of SHA-1 sha1 and version
// rep.StatementVersion, as run at ranAt: the number of
// items per category, the lines, postings and fees. One row per tenant,
// channel and day: the run that started last wins, whatever order the
// runs finish in (a run older than the row held changes nothing), in one
// statement, so concurrent runs need no lock.
func recordStatementResult(ctx context.Context, db bun.IDB, rep StatementReport, sha1 string, ranAt time.Time) error {
	row := statementResult{
		TenantID: rep.TenantID, ChannelCode: rep.Channel, StatementDay: rep.Day, StatementSHA1: sha1,
		StatementVersion: rep.StatementVersion, ReconciledAt: ranAt.UTC(), LineCount: rep.Lines, PostingCount: rep.Postings, FeeMicroYuan: rep.FeeMicroYuan,
	}
	for _, it := range rep.Items {
		switch it.Category {
		case StatementMissingInLedger:
			row.MissingInLedger++
		case StatementMissingInStatement:
			row.MissingInStatement++
		case StatementAmountMismatch:
			row.AmountMismatch++
		case StatementStatusMismatch:
			row.StatusMismatch++
		}
	}
	q := db.NewInsert().Model(&row).ExcludeColumn("id")
	if sqldb.IsSQLite(db) {
		q = q.On("CONFLICT (tenant_id, channel_code, statement_day) DO UPDATE")
		for _, c := range resultColumns {
			q = q.Set(c + " = EXCLUDED." + c)
		}
		q = q.Where("EXCLUDED.reconciled_at >= ?TableAlias.reconciled_at")
	} else {
		q = q.On("DUPLICATE KEY UPDATE")
		for _, c := range resultColumns {
			q = q.Set(c + " = IF(VALUES(reconciled_at) >= reconciled_at, VALUES(" + c + "), " + c + ")")
		}
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("reconcile statement: record the result of tenant %d %s %s: %w", rep.TenantID, rep.Channel, rep.Day, err)
	}
	return nil
}

// reconciler holds one day's comparison as it is worked out.
type reconciler struct {
	ch       channels.Channel
	end      time.Time          // the day's end: postings before it count for the day
	postings map[string]posting // by key
	items    []StatementItem
}

func (r *reconciler) add(it StatementItem) { r.items = append(r.items, it) }

func (r *reconciler) payment(trade string) (posting, bool) {
	p, ok := r.postings[string(r.ch)+":"+trade+":PAYMENT_RECEIVED"]
	return p, ok
}

// refunds sums the trade's refund postings for which keep is true.
func (r *reconciler) refunds(trade string, keep func(posting) bool) int64 {
	var sum int64
	for _, p := range r.postings {
		if p.TradeNo == trade && p.RefundNo != "" && keep(p) {
			sum += p.Amount
		}
	}
	return sum
}

func (r *reconciler) compare(lines []statementLine) {
	for _, l := range lines {
		switch statements.Kind(l.Kind) {
		case statements.KindPayment:
			r.comparePayment(l, statements.PaymentSettled(r.ch, l.Status))
		case statements.KindOrder:
			if statements.LineCanceled(r.ch, l.Status) {
				r.compareCancel(l)
				continue
			}
			settled := statements.PaymentSettled(r.ch, l.Status)
			r.comparePayment(l, settled)
			if settled {
				r.compareOrderRefunds(l)
			}
		case statements.KindRefund:
			if statements.RefundLinesOf(r.ch) == statements.RefundLinesByNumber {
				r.compareRefundByNumber(l)
			} // Alipay refunds: compareAlipayRefunds
		}
	}
}

func (r *reconciler) comparePayment(l statementLine, settled bool) {
	p, posted := r.payment(l.TradeNo)
	switch {
	case !settled && posted:
		r.add(StatementItem{
			Category: StatementStatusMismatch, TradeNo: l.TradeNo, StatementAmount: ptr(l.Amount), LedgerAmount: ptr(p.Amount),
			LineNo: l.LineNo, Key: p.Key,
			Message: fmt.Sprintf("the statement's payment status is %s, not money the channel settled; the ledger posted it", l.Status),
		})
	case !settled:
	case !posted:
		r.add(StatementItem{
			Category: StatementMissingInLedger, TradeNo: l.TradeNo, StatementAmount: ptr(l.Amount), LineNo: l.LineNo,
			Key:     string(r.ch) + ":" + l.TradeNo + ":PAYMENT_RECEIVED",
			Message: "the channel settled the payment, nothing is posted",
		})
	case p.Amount != l.Amount:
		r.add(StatementItem{
			Category: StatementAmountMismatch, TradeNo: l.TradeNo, StatementAmount: ptr(l.Amount), LedgerAmount: ptr(p.Amount),
			LineNo: l.LineNo, Key: p.Key, Message: "payment: statement order amount vs the payment posting",
		})
	}
}

func (r *reconciler) compareRefundByNumber(l statementLine) {
	key := string(r.ch) + ":" + l.TradeNo + ":REFUND_SUCCEEDED:" + l.RefundNo
	p, posted := r.postings[key]
	switch {
	case l.Status != "SUCCESS" && posted:
		r.add(StatementItem{
			Category: StatementStatusMismatch, TradeNo: l.TradeNo, RefundNo: l.RefundNo, StatementAmount: ptr(l.Amount),
			LedgerAmount: ptr(p.Amount), LineNo: l.LineNo, Key: key,
			Message: fmt.Sprintf("the statement's refund status is %s, the ledger posted the refund as succeeded; "+
				"the statement's refund status is a snapshot taken when the bill was made and never updated: query the refund", l.Status),
		})
	case l.Status != "SUCCESS":
	case !posted:
		r.add(StatementItem{
			Category: StatementMissingInLedger, TradeNo: l.TradeNo, RefundNo: l.RefundNo, StatementAmount: ptr(l.Amount),
			LineNo: l.LineNo, Key: key, Message: "the channel refunded, nothing is posted",
		})
	case p.Amount != l.Amount:
		r.add(StatementItem{
			Category: StatementAmountMismatch, TradeNo: l.TradeNo, RefundNo: l.RefundNo, StatementAmount: ptr(l.Amount),
			LedgerAmount: ptr(p.Amount), LineNo: l.LineNo, Key: key, Message: "refund: the row's own amount vs the refund posting",
		})
	}
}

// compareOrderRefunds compares the refunded amount of an order line
// (RefundLinesPerOrder; Shouqianba's total_amount − net_amount) with every refund posted for the trade up to
// the end of the day.
func (r *reconciler) compareOrderRefunds(l statementLine) {
	want := l.Amount - l.SettledAmount
	got := r.refunds(l.TradeNo, func(p posting) bool { return p.OccurredAt.Before(r.end) })
	if want == got {
		return
	}
	cat := StatementAmountMismatch
	if got == 0 {
		cat = StatementMissingInLedger
	}
	r.add(StatementItem{
		Category: cat, TradeNo: l.TradeNo, StatementAmount: ptr(want), LedgerAmount: ptr(got), LineNo: l.LineNo,
		Message: "the order's refunds: total_amount − net_amount vs all refunds of the trade posted up to the end of the day",
	})
}

// compareCancel checks a cancelled order (statements.LineCanceled:
// Shouqianba CANCELED): a cancel nets the
// trade to zero whether or not its payment had gone through (an unpaid
// order's cancel moves nothing, a paid one's reverses the payment), so the
// payment posted for the trade, if any, minus every refund of the trade
// posted up to the end of the day must be zero. Nothing posted at all is
// what an unpaid cancelled order leaves: not missing_in_ledger.
func (r *reconciler) compareCancel(l statementLine) {
	var paid int64
	if p, ok := r.payment(l.TradeNo); ok {
		paid = p.Amount
	}
	refunded := r.refunds(l.TradeNo, func(p posting) bool { return p.OccurredAt.Before(r.end) })
	if paid == refunded {
		return
	}
	r.add(StatementItem{
		Category: StatementAmountMismatch, TradeNo: l.TradeNo, StatementAmount: ptr(0), LedgerAmount: ptr(paid - refunded), LineNo: l.LineNo,
		Message: fmt.Sprintf("the order is %s, which nets the trade to zero; the ledger holds payment %d minus refunds %d "+
			"(refunds dated up to the end of the day)", l.Status, paid, refunded),
	})
}

// runningRefundTrades returns, for a channel whose statement refunds are
// compared as running totals (RefundLinesRunning: Alipay), the trades
// whose refunds are compared on the day: those with a refund line in the day's statement, in
// line order, then those with a refund posting dated to the day, each once;
// nil for the other channels.
func runningRefundTrades(ch channels.Channel, lines []statementLine, onDay map[string]posting) []string {
	if statements.RefundLinesOf(ch) != statements.RefundLinesRunning {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		if statements.Kind(l.Kind) == statements.KindRefund && !seen[l.TradeNo] {
			seen[l.TradeNo] = true
			out = append(out, l.TradeNo)
		}
	}
	var posted []string
	for _, p := range onDay {
		if p.RefundNo != "" && !seen[p.TradeNo] {
			seen[p.TradeNo] = true
			posted = append(posted, p.TradeNo)
		}
	}
	slices.Sort(posted)
	return append(out, posted...)
}

// refundWindow is the span over which Alipay refunds are compared as
// running totals: the run of consecutive Beijing-time days around the
// reconciled day whose statements are all imported. It stops at the first
// day without an imported statement on either side: a gap would leave the
// statement side short of that day's refunds while the ledger side has
// them.
type refundWindow struct {
	days  []string  // YYYY-MM-DD, consecutive
	start time.Time // the first day's start
	day   int       // the reconciled day's index in days
	// lines are the compared trades' refund lines in the window's
	// statements, by trade.
	lines map[string][]windowLine
}

// windowLine is a refund line of one of a window's statements.
type windowLine struct {
	day    int // the index of its statement's day in the window
	lineNo int
	amount int64
}

// dayOf returns the index in the window of t's Beijing-time day (a day is
// 24 hours there), -1 when t is outside the window.
func (w refundWindow) dayOf(t time.Time) int {
	if t.Before(w.start) {
		return -1
	}
	if i := int(t.Sub(w.start) / (24 * time.Hour)); i < len(w.days) {
		return i
	}
	return -1
}

// readRefundWindow reads the window of consecutive days around day whose
// statements of tenant and ch are imported, and the refund lines of trades
// in those statements.
func readRefundWindow(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, day string, trades []string) (refundWindow, error) {
	var files []statementFile
	if err := db.NewSelect().Model(&files).Column("id", "statement_day").
		Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).OrderExpr("statement_day").
		Scan(ctx); err != nil {
		return refundWindow{}, fmt.Errorf("reconcile statement: read the days whose statements are imported: %w", err)
	}
	days := make([]string, len(files))
	for i, f := range files {
		days[i] = dateOnly(f.StatementDay)
	}
	k := slices.Index(days, day)
	if k < 0 {
		return refundWindow{}, fmt.Errorf("reconcile statement: the statement of %s is no longer imported: %w", day, ErrNoStatement)
	}
	follows := func(a, b string) bool { // b is the day after a
		t, err := time.Parse(time.DateOnly, a)
		return err == nil && t.AddDate(0, 0, 1).Format(time.DateOnly) == b
	}
	first, last := k, k
	for first > 0 && follows(days[first-1], days[first]) {
		first--
	}
	for last+1 < len(days) && follows(days[last], days[last+1]) {
		last++
	}
	start, err := time.ParseInLocation(time.DateOnly, days[first], statements.Beijing)
	if err != nil {
		return refundWindow{}, fmt.Errorf("reconcile statement: statement day %q: %w", days[first], err)
	}
	w := refundWindow{days: days[first : last+1], start: start.UTC(), day: k - first, lines: map[string][]windowLine{}}
	ids := make([]int64, 0, len(w.days))
	dayOfFile := map[int64]int{}
	for i, f := range files[first : last+1] {
		ids = append(ids, f.ID)
		dayOfFile[f.ID] = i
	}
	for chunk := range slices.Chunk(trades, 500) {
		var rows []statementLine
		if err := db.NewSelect().Model(&rows).Column("file_id", "line_no", "channel_trade_no", "amount").
			Where("file_id IN (?)", bun.List(ids)).Where("kind = ?", string(statements.KindRefund)).
			Where("channel_trade_no IN (?)", bun.List(chunk)).
			Scan(ctx); err != nil {
			return refundWindow{}, fmt.Errorf("reconcile statement: read the trades' refund lines from %s to %s: %w", w.days[0], w.days[len(w.days)-1], err)
		}
		for _, l := range rows {
			w.lines[l.TradeNo] = append(w.lines[l.TradeNo], windowLine{day: dayOfFile[l.FileID], lineNo: l.LineNo, amount: l.Amount})
		}
	}
	return w, nil
}

// compareAlipayRefunds compares each trade's refunds as running totals
// over the window: at the end of each of its days, the trade's refund
// lines in the window's statements up to that day against the trade's
// refund postings dated from the window's first day to the end of that
// day. An Alipay refund callback reports the total refunded so far, so a
// refund whose callback was lost or overtaken is carried by a later
// refund's posting, dated to that later refund's day; the channel's and
// the ledger's clocks may also put one refund on neighbouring days. Only
// the running totals are the same on both sides once both hold the money.
//
// The difference of the running totals is reported on the day it appears
// or grows (it was nil, of the other sign or smaller at the end of the day
// before), and only while it keeps its sign at the end of every later day
// of the window: a difference that is nil or reversed on a later day has
// been caught up (the ledger, or the statement, holds the money since), so
// the earlier day is clean; one that stays as it was is not reported
// again. On the day: with the statement ahead and no refund of the trade
// posted dated to the day, a missing_in_ledger of what the difference grew
// by (the day's refund lines the ledger lacks); with the ledger ahead and
// no refund line of the trade on the day, a missing_in_statement of what
// it grew by; otherwise an amount_mismatch of the two running totals.
func (r *reconciler) compareAlipayRefunds(w refundWindow, trades []string) {
	n, k := len(w.days), w.day
	for _, trade := range trades {
		stmt, ledger := make([]int64, n), make([]int64, n)
		lineNo := 0
		for _, l := range w.lines[trade] {
			stmt[l.day] += l.amount
			if l.day == k && (lineNo == 0 || l.lineNo < lineNo) {
				lineNo = l.lineNo
			}
		}
		var posted []posting // the trade's refund postings dated to the day
		for _, p := range r.postings {
			if p.TradeNo != trade || p.RefundNo == "" || p.OccurredAt.IsZero() {
				continue
			}
			if i := w.dayOf(p.OccurredAt); i >= 0 {
				ledger[i] += p.Amount
				if i == k {
					posted = append(posted, p)
				}
			}
		}
		// diff is the statement's running total less the ledger's at the
		// end of each day; sum and led the running totals.
		diff, sum, led := make([]int64, n), make([]int64, n), make([]int64, n)
		var sTotal, lTotal int64
		for i := range n {
			sTotal, lTotal = sTotal+stmt[i], lTotal+ledger[i]
			sum[i], led[i], diff[i] = sTotal, lTotal, sTotal-lTotal
		}
		var before int64 // the difference at the end of the day before
		if k > 0 {
			before = diff[k-1]
		}
		grew := sameSign(diff[k], before) && abs(diff[k]) > abs(before)
		appeared := before == 0 || !sameSign(diff[k], before)
		if diff[k] == 0 || (!appeared && !grew) {
			continue // none, or as it was at the end of the day before
		}
		if slices.ContainsFunc(diff[k+1:], func(d int64) bool { return !sameSign(d, diff[k]) }) {
			continue // caught up since
		}
		added := abs(diff[k])
		if grew {
			added -= abs(before)
		}
		span := fmt.Sprintf("running totals since %s, the first of the consecutive days whose statements are imported", w.days[0])
		if k < n-1 {
			span += fmt.Sprintf("; at the end of %s: statement %d, ledger %d", w.days[n-1], sum[n-1], led[n-1])
		}
		switch {
		case diff[k] > 0 && ledger[k] == 0:
			r.add(StatementItem{
				Category: StatementMissingInLedger, TradeNo: trade, StatementAmount: ptr(added), LineNo: lineNo,
				Message: "the day's statement refunds of the trade that the ledger lacks: nothing posted for refunds of the trade " +
					"dated to the day, and the ledger's total has not caught up with the statement's since (" + span + ")",
			})
		case diff[k] < 0 && stmt[k] == 0:
			it := StatementItem{
				Category: StatementMissingInStatement, TradeNo: trade, LedgerAmount: ptr(added),
				Message: fmt.Sprintf("refunds of the trade posted dated to the day (%d), no refund line of the trade on the day, and the "+
					"statement's total has not caught up with the ledger's since (%s)", len(posted), span),
			}
			if len(posted) == 1 {
				it.RefundNo, it.Key = posted[0].RefundNo, posted[0].Key
				it.Message = fmt.Sprintf("refund posted with the channel's time %s, no refund line of the trade on the day, and the "+
					"statement's total has not caught up with the ledger's since (%s)",
					posted[0].OccurredAt.In(statements.Beijing).Format("2006-01-02 15:04:05.000"), span)
			}
			r.add(it)
		default:
			r.add(StatementItem{
				Category: StatementAmountMismatch, TradeNo: trade, StatementAmount: ptr(sum[k]), LedgerAmount: ptr(led[k]), LineNo: lineNo,
				Message: fmt.Sprintf("the trade's refunds up to the end of the day: the statement's total vs the total of the "+
					"trade's refund postings (%s)", span),
			})
		}
	}
}

// sameSign reports whether a and b are both positive or both negative.
func sameSign(a, b int64) bool { return (a > 0 && b > 0) || (a < 0 && b < 0) }

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// unaccounted reports the day's postings that no line of the day or of an
// imported neighbouring day accounts for. Alipay refund postings are left
// to compareAlipayRefunds.
func (r *reconciler) unaccounted(onDay map[string]posting, lines, neighbours []statementLine) {
	trades := map[string]bool{} // trades with a payment or order line
	refundTrades := map[string]bool{}
	refundNos := map[string]bool{}
	for _, l := range slices.Concat(lines, neighbours) {
		switch statements.Kind(l.Kind) {
		case statements.KindPayment, statements.KindOrder:
			trades[l.TradeNo] = true
		case statements.KindRefund:
			refundTrades[l.TradeNo] = true
			refundNos[l.TradeNo+"\x00"+l.RefundNo] = true
		}
	}
	if statements.RefundLinesOf(r.ch) == statements.RefundLinesPerOrder {
		refundTrades = trades // one order line stands for the payment and its refunds
	}
	keys := make([]string, 0, len(onDay))
	for k := range onDay {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := onDay[k]
		var found bool
		switch {
		case p.RefundNo == "":
			found = trades[p.TradeNo]
		case statements.RefundLinesOf(r.ch) == statements.RefundLinesByNumber:
			found = refundNos[p.TradeNo+"\x00"+p.RefundNo]
		case statements.RefundLinesOf(r.ch) == statements.RefundLinesRunning:
			found = true // compared as running totals: compareAlipayRefunds
		default:
			found = refundTrades[p.TradeNo]
		}
		if found {
			continue
		}
		what := "payment"
		if p.RefundNo != "" {
			what = "refund"
		}
		r.add(StatementItem{
			Category: StatementMissingInStatement, TradeNo: p.TradeNo, RefundNo: p.RefundNo, LedgerAmount: ptr(p.Amount), Key: p.Key,
			Message: fmt.Sprintf("%s posted with the channel's time %s, in neither the day's statement nor an imported neighbouring day's",
				what, p.OccurredAt.In(statements.Beijing).Format("2006-01-02 15:04:05.000")),
		})
	}
}

func statementFiles(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, days []string) (map[string]statementFile, error) {
	var rows []statementFile
	if err := db.NewSelect().Model(&rows).Column("id", "statement_day", "sha1").
		Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).Where("statement_day IN (?)", bun.List(days)).
		Scan(ctx); err != nil {
		return nil, fmt.Errorf("reconcile statement: read the statements held: %w", err)
	}
	out := make(map[string]statementFile, len(rows))
	for _, f := range rows {
		out[dateOnly(f.StatementDay)] = f
	}
	return out, nil
}

// dateOnly cuts a DATE as read back (2024-06-01 or 2024-06-01T00:00:00Z)
// to YYYY-MM-DD.
func dateOnly(day string) string {
	if len(day) > len(time.DateOnly) {
		return day[:len(time.DateOnly)]
	}
	return day
}

func statementLines(ctx context.Context, db bun.IDB, fileID int64) ([]statementLine, error) {
	var rows []statementLine
	if err := db.NewSelect().Model(&rows).Where("file_id = ?", fileID).OrderExpr("line_no, source_sha1").Scan(ctx); err != nil {
		return nil, fmt.Errorf("reconcile statement: read the statement's lines: %w", err)
	}
	return rows, nil
}

// postingRow is a merchant_payable posting joined with its claim.
type postingRow struct {
	Key        string     `bun:"idempotent_key"`
	TradeNo    string     `bun:"channel_trade_no"`
	Amount     int64      `bun:"amount"`
	OccurredAt *time.Time `bun:"occurred_at"`
	EventJSON  *string    `bun:"event_json"`
}

func postingQuery(db bun.IDB, tenant int64, ch channels.Channel) *bun.SelectQuery {
	return db.NewSelect().
		ColumnExpr("l.idempotent_key, l.channel_trade_no, l.amount, c.occurred_at").
		ColumnExpr("CASE WHEN c.occurred_at IS NULL THEN c.event_json END AS event_json").
		TableExpr("ss_ledger_entry AS l").
		Join("JOIN ss_channel_idempotent AS c ON c.tenant_id = l.tenant_id AND c.idempotent_key = l.idempotent_key").
		Where("l.tenant_id = ?", tenant).Where("l.channel_code = ?", string(ch)).
		Where("l.account = ?", settlement.AccountMerchantPayable)
}

// postingsOfTrades reads every merchant_payable posting of the trades,
// whatever their day.
func postingsOfTrades(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, trades []string) (map[string]posting, error) {
	slices.Sort(trades)
	trades = slices.Compact(trades)
	out := map[string]posting{}
	for chunk := range slices.Chunk(trades, 500) {
		var rows []postingRow
		if err := postingQuery(db, tenant, ch).Where("l.channel_trade_no IN (?)", bun.List(chunk)).Scan(ctx, &rows); err != nil {
			return nil, fmt.Errorf("reconcile statement: read the trades' postings: %w", err)
		}
		addPostings(out, ch, rows)
	}
	return out, nil
}

// postingsOfDay reads the merchant_payable postings whose claim's
// occurred_at is in [start, end), and those of claims without occurred_at
// (made before the column) whose stored event says so. Those claims are
// read from start on by their creation time: a claim is made after the
// event it records.
func postingsOfDay(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, start, end time.Time) (map[string]posting, error) {
	var rows []postingRow
	if err := postingQuery(db, tenant, ch).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.WhereGroup(" OR ", func(q *bun.SelectQuery) *bun.SelectQuery {
				return q.Where("c.occurred_at >= ?", start).Where("c.occurred_at < ?", end)
			}).WhereGroup(" OR ", func(q *bun.SelectQuery) *bun.SelectQuery {
				return q.Where("c.occurred_at IS NULL").Where("c.event_json IS NOT NULL").Where("c.created_at >= ?", start)
			})
		}).
		Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("reconcile statement: read the day's postings: %w", err)
	}
	all := map[string]posting{}
	addPostings(all, ch, rows)
	out := map[string]posting{}
	for k, p := range all {
		if !p.OccurredAt.IsZero() && !p.OccurredAt.Before(start) && p.OccurredAt.Before(end) {
			out[k] = p
		}
	}
	return out, nil
}

func addPostings(out map[string]posting, ch channels.Channel, rows []postingRow) {
	for _, row := range rows {
		p := posting{Key: row.Key, TradeNo: row.TradeNo, Amount: row.Amount}
		if rest, ok := strings.CutPrefix(row.Key, string(ch)+":"+row.TradeNo+":REFUND_SUCCEEDED:"); ok {
			p.RefundNo = rest
		}
		switch {
		case row.OccurredAt != nil:
			p.OccurredAt = row.OccurredAt.UTC()
		case row.EventJSON != nil:
			var ev struct {
				OccurredAt time.Time `json:"occurred_at"`
			}
			if json.Unmarshal([]byte(*row.EventJSON), &ev) == nil {
				p.OccurredAt = ev.OccurredAt.UTC()
			}
		}
		out[row.Key] = p
	}
}

// microYuan formats units of 0.00001 yuan as yuan with five decimals.
func microYuan(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%05d", sign, v/100000, v%100000)
}

func ptr(v int64) *int64 { return &v }

// fillMerchantOrderNos sets each item's merchant order number from the
// statement lines of its trade, else from the trade's order row.
func fillMerchantOrderNos(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, items []StatementItem, lines []statementLine) error {
	known := map[string]string{}
	for _, l := range lines {
		if l.MerchantOrderNo != "" {
			known[l.TradeNo] = l.MerchantOrderNo
		}
	}
	var unknown []string
	for _, it := range items {
		if _, ok := known[it.TradeNo]; !ok && it.TradeNo != "" && !slices.Contains(unknown, it.TradeNo) {
			unknown = append(unknown, it.TradeNo)
		}
	}
	for chunk := range slices.Chunk(unknown, 500) {
		var rows []struct {
			TradeNo         string `bun:"channel_trade_no"`
			MerchantOrderNo string `bun:"merchant_order_no"`
		}
		if err := db.NewSelect().Table("ss_channel_order").Column("channel_trade_no", "merchant_order_no").
			Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).
			Where("channel_trade_no IN (?)", bun.List(chunk)).Scan(ctx, &rows); err != nil {
			return fmt.Errorf("reconcile statement: read the trades' merchant order numbers: %w", err)
		}
		for _, r := range rows {
			known[r.TradeNo] = r.MerchantOrderNo
		}
	}
	for i := range items {
		items[i].MerchantOrderNo = known[items[i].TradeNo]
	}
	return nil
}
