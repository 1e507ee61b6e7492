package ops

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
)

// ErrNoStatement is wrapped by ReconcileStatement's error when no statement
// is imported for the tenant, channel and day: there is nothing to
// reconcile.
var ErrNoStatement = errors.New("no statement imported for the day")

// StatementItem is one discrepancy between a day's statement and the
// ledger. StatementAmount and LedgerAmount are in fen, nil for the side
// that has nothing; for the per-trade refund totals of Alipay and
// Shouqianba they are the totals compared (see ReconcileStatement).
type StatementItem struct {
	Category        string `json:"category"`
	TradeNo         string `json:"trade_no"`
	RefundNo        string `json:"refund_no,omitempty"`
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
//     or a Shouqianba order neither PAID, PARTIAL_REFUNDED, REFUNDED nor
//     CANCELED, is money the channel did not settle: posted, it is a
//     status_mismatch;
//   - WeChat refunds by refund number: the row's own Amount (申请退款金额)
//     with the refund's posting; a row not SUCCESS that the ledger posted is
//     a status_mismatch (the row's status is a snapshot, never updated);
//   - Alipay refunds per trade: the sum of the day's refund rows of the
//     trade with the sum of the trade's refund postings dated to the day
//     (which refund key carries which part depends on arrival order);
//   - Shouqianba orders: total_amount − net_amount with the sum of all the
//     trade's refund postings dated up to the end of the day.
//
// A posting dated to the day that no line of the day, nor of an imported
// neighbouring day's statement, accounts for (same trade, same WeChat
// refund number) is missing_in_statement. It returns an error wrapping
// ErrNoStatement when no statement is imported for the day; a day that has
// ended with no posting dated to it either is then recorded as reconciled
// with nothing found (see recordQuietDay). It returns an error with the
// report when the result could not be recorded.
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
		if err := recordQuietDay(ctx, db, rep, start, end, ranAt); err != nil {
			return rep, err
		}
		return rep, fmt.Errorf("reconcile statement: tenant %d %s %s: %w", tenant, ch, day, ErrNoStatement)
	}
	lines, err := statementLines(ctx, db, file.ID)
	if err != nil {
		return rep, err
	}
	rep.Lines = len(lines)
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

	trades := make([]string, 0, len(lines))
	for _, l := range lines {
		trades = append(trades, l.TradeNo)
	}
	byTrade, err := postingsOfTrades(ctx, db, tenant, ch, trades)
	if err != nil {
		return rep, err
	}
	onDay, err := postingsOfDay(ctx, db, tenant, ch, start.UTC(), end.UTC())
	if err != nil {
		return rep, err
	}
	rep.Postings = len(onDay)
	for k, p := range onDay {
		byTrade[k] = p
	}
	r := reconciler{ch: ch, start: start.UTC(), end: end.UTC(), postings: byTrade}
	r.compare(lines)
	r.unaccounted(onDay, lines, neighbourLines)
	rep.Items = append(rep.Items, r.items...)
	slices.SortStableFunc(rep.Items, func(a, b StatementItem) int {
		return strings.Compare(a.Category+" "+a.TradeNo+" "+a.RefundNo, b.Category+" "+b.TradeNo+" "+b.RefundNo)
	})
	if err := recordStatementResult(ctx, db, rep, file.SHA1, ranAt); err != nil {
		return rep, err
	}
	return rep, nil
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
	"statement_sha1", "line_count", "posting_count", "missing_in_ledger", "missing_in_statement",
	"amount_mismatch", "status_mismatch", "fee_micro_yuan", "reconciled_at",
}

// recordStatementResult stores what one reconciliation of rep's day found,
// against the statement file of SHA-1 sha1, as run at ranAt: the number of
// items per category, the lines, postings and fees. One row per tenant,
// channel and day: the run that started last wins, whatever order the
// runs finish in (a run older than the row held changes nothing), in one
// statement, so concurrent runs need no lock.
func recordStatementResult(ctx context.Context, db bun.IDB, rep StatementReport, sha1 string, ranAt time.Time) error {
	row := statementResult{
		TenantID: rep.TenantID, ChannelCode: rep.Channel, StatementDay: rep.Day, StatementSHA1: sha1,
		ReconciledAt: ranAt.UTC(), LineCount: rep.Lines, PostingCount: rep.Postings, FeeMicroYuan: rep.FeeMicroYuan,
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

// recordQuietDay records a day that ended before ranAt, has no statement
// imported and no posting dated to it as reconciled with nothing found (an
// empty statement_sha1): WeChat has no bill for a day without trades
// (NO_STATEMENT_EXIST), and a Shouqianba day without orders has no query
// responses. A day with postings is not recorded: money moved and no
// statement says so. A statement imported for the day later stands
// unreconciled until the day is reconciled against it.
func recordQuietDay(ctx context.Context, db bun.IDB, rep StatementReport, start, end, ranAt time.Time) error {
	if end.After(ranAt) {
		return nil
	}
	onDay, err := postingsOfDay(ctx, db, rep.TenantID, channels.Channel(rep.Channel), start.UTC(), end.UTC())
	if err != nil || len(onDay) > 0 {
		return err
	}
	return recordStatementResult(ctx, db, rep, "", ranAt)
}

// reconciler holds one day's comparison as it is worked out.
type reconciler struct {
	ch         channels.Channel
	start, end time.Time
	postings   map[string]posting // by key
	items      []StatementItem
}

func (r *reconciler) add(it StatementItem) { r.items = append(r.items, it) }

func (r *reconciler) payment(trade string) (posting, bool) {
	p, ok := r.postings[string(r.ch)+":"+trade+":PAYMENT_RECEIVED"]
	return p, ok
}

// refunds sums the trade's refund postings for which keep is true.
func (r *reconciler) refunds(trade string, keep func(posting) bool) (sum int64, n int) {
	for _, p := range r.postings {
		if p.TradeNo == trade && p.RefundNo != "" && keep(p) {
			sum += p.Amount
			n++
		}
	}
	return sum, n
}

func (r *reconciler) compare(lines []statementLine) {
	type refundTotal struct {
		sum    int64
		lineNo int
	}
	perTrade := map[string]*refundTotal{}
	var order []string
	for _, l := range lines {
		switch statements.Kind(l.Kind) {
		case statements.KindPayment:
			r.comparePayment(l, r.ch != channels.WeChat || l.Status == "SUCCESS")
		case statements.KindOrder:
			r.comparePayment(l, sqbSettled(l.Status))
			if sqbSettled(l.Status) {
				r.compareSQBRefunds(l)
			}
		case statements.KindRefund:
			if r.ch == channels.WeChat {
				r.compareWeChatRefund(l)
				continue
			}
			t, ok := perTrade[l.TradeNo]
			if !ok {
				t = &refundTotal{lineNo: l.LineNo}
				perTrade[l.TradeNo] = t
				order = append(order, l.TradeNo)
			}
			t.sum += l.Amount
		}
	}
	for _, trade := range order {
		t := perTrade[trade]
		ledger, n := r.refunds(trade, r.onDay)
		switch {
		case n == 0:
			r.add(StatementItem{
				Category: StatementMissingInLedger, TradeNo: trade, StatementAmount: ptr(t.sum), LineNo: t.lineNo,
				Message: "the day's statement refunds of the trade, nothing posted for refunds of the trade dated to the day",
			})
		case ledger != t.sum:
			r.add(StatementItem{
				Category: StatementAmountMismatch, TradeNo: trade, StatementAmount: ptr(t.sum), LedgerAmount: ptr(ledger), LineNo: t.lineNo,
				Message: fmt.Sprintf("the trade's refunds of the day: statement total vs the total of %d refund postings dated to the day", n),
			})
		}
	}
}

func (r *reconciler) onDay(p posting) bool {
	return !p.OccurredAt.IsZero() && !p.OccurredAt.Before(r.start) && p.OccurredAt.Before(r.end)
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

func (r *reconciler) compareWeChatRefund(l statementLine) {
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

// compareSQBRefunds compares a Shouqianba order's refunded amount
// (total_amount − net_amount) with every refund posted for the trade up to
// the end of the day.
func (r *reconciler) compareSQBRefunds(l statementLine) {
	want := l.Amount - l.SettledAmount
	got, _ := r.refunds(l.TradeNo, func(p posting) bool { return p.OccurredAt.Before(r.end) })
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

// unaccounted reports the day's postings that no line of the day or of an
// imported neighbouring day accounts for.
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
	if r.ch == channels.SQB {
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
		case r.ch == channels.WeChat:
			found = refundNos[p.TradeNo+"\x00"+p.RefundNo]
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

// sqbSettled reports whether a Shouqianba order_status means the payment
// was settled (possibly refunded or reversed since).
func sqbSettled(status string) bool {
	switch status {
	case channels.SQBPaid, channels.SQBPartialRefunded, channels.SQBRefunded, channels.SQBCanceled:
		return true
	}
	return false
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
	if err := db.NewSelect().Model(&rows).Where("file_id = ?", fileID).OrderExpr("line_no").Scan(ctx); err != nil {
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
