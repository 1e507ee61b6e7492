package statementbook

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// ImportStatus says what importing a statement did to one day.
type ImportStatus string

// The outcomes of importing one day of a statement.
const (
	// ImportNew: no statement was held for the day; its lines are stored.
	ImportNew ImportStatus = "new"
	// ImportUnchanged: the lines held for the day already say what the
	// file says (the same file again, or Shouqianba responses no newer than
	// those held); nothing changed.
	ImportUnchanged ImportStatus = "unchanged"
	// ImportReplaced: a WeChat or Alipay bill replaced the lines its
	// merchants held for the day (another merchant's lines stay); the
	// difference is reported in DayImport.Changes.
	ImportReplaced ImportStatus = "replaced"
	// ImportMerged: Shouqianba responses were merged into the lines held,
	// per order: an order not held was added, a newer response superseded
	// the one held (DayImport.Changes); nothing else was removed.
	ImportMerged ImportStatus = "merged"
)

// LineChange is one difference between the lines held for a day and those
// the file brought in. Old is nil for an added line, New for a removed one.
type LineChange struct {
	// Identity names the line: kind, trade number and refund number.
	Identity string           `json:"identity"`
	Old      *statements.Line `json:"old,omitempty"`
	New      *statements.Line `json:"new,omitempty"`
}

// DayImport is what importing did to one Beijing-time day.
type DayImport struct {
	Day     string       `json:"day"` // YYYY-MM-DD, Beijing time
	Status  ImportStatus `json:"status"`
	Lines   int          `json:"lines"`
	Changes []LineChange `json:"changes,omitempty"`
	// Older names the Shouqianba orders of the file whose response is
	// older than the one held (a lower finish_time): the held one stays.
	Older []string `json:"older,omitempty"`
	// Held is the number of lines held for the day after the import, and
	// Version their version (see DayVersion).
	Held    int    `json:"held"`
	Version string `json:"version"`
}

// ImportResult is what ImportStatement did, per day the statement covers.
type ImportResult struct {
	TenantID int64       `json:"tenant_id"`
	Channel  string      `json:"channel"`
	Format   string      `json:"format"`
	SHA1     string      `json:"sha1"`
	Days     []DayImport `json:"days"`
}

// ImportStatement stores a parsed statement for tenant, one day row per
// Beijing-time day: a WeChat or Alipay bill is the one day it is of
// (Statement.BillDay: Alipay's window, the Day the caller gives a WeChat
// bill), and every line must lie on it; Shouqianba query responses are
// stored each on the day of its own finish_time. The lines held for a day
// are merged from every file imported for it:
//   - a WeChat or Alipay bill is the whole day of its merchants: it
//     replaces the lines held for its day that name one of the merchants
//     it names (Statement.MerchantIDs), or no merchant (lines imported
//     before merchants were recorded); another merchant's lines stay, and
//     a line of the bill that is one of theirs (the same Identity) is
//     refused. It never touches another day. The same file again changes
//     nothing; the differences are worked out line by line (returned in
//     the result, for the operator to see);
//   - Shouqianba query responses merge per order (sn), whatever day the
//     order is held on: a response supersedes the one held when its
//     finish_time is later, or the same and it says something else (the
//     later import wins); an older response changes nothing. No line is
//     removed but the one a response supersedes.
//
// Each day is written in a transaction of its own, which also updates the
// days a superseded Shouqianba order leaves, and records the day's
// version (DayVersion). Before anything is written it refuses (see
// CheckImport) a number that is not valid UTF-8, a statement holding a
// line twice (an error wrapping
// statements.ErrRepeated, naming both lines), a bill not wholly of one day
// (statements.ErrDay, naming the line, its date and the bill's day), and
// a statement with no lines and no stated day.
func ImportStatement(ctx context.Context, db *bun.DB, tenant int64, st statements.Statement, now time.Time) (ImportResult, error) {
	res := ImportResult{TenantID: tenant, Channel: string(st.Channel), Format: st.Format, SHA1: st.SHA1}
	if tenant <= 0 {
		return res, fmt.Errorf("import statement: tenant %d: must be positive", tenant)
	}
	byDay, err := importDays(st)
	if err != nil {
		return res, err
	}
	days := make([]string, 0, len(byDay))
	for d := range byDay {
		days = append(days, d)
	}
	slices.Sort(days)
	for _, day := range days {
		di, err := importDay(ctx, db, tenant, st, day, byDay[day], now)
		if err != nil {
			return res, fmt.Errorf("import statement for %s: %w", day, err)
		}
		res.Days = append(res.Days, di)
	}
	return res, nil
}

// CheckImport returns the error ImportStatement returns for st before it
// touches the database: a trade, merchant order or refund number that is
// not valid UTF-8 (statements.ErrFormat), a line repeated
// (statements.ErrRepeated), a bill
// not wholly of one day (statements.ErrDay), a statement with no lines
// and no day. A caller that refuses before opening the database (consumer
// statement import) asks it first.
func CheckImport(st statements.Statement) error {
	_, err := importDays(st)
	return err
}

// importDays checks st (see CheckImport) and returns its lines by the
// Beijing-time day each is stored on: a bill's all on its day
// (statements.Statement.BillDay), Shouqianba responses each on its own.
func importDays(st statements.Statement) (map[string][]statements.Line, error) {
	if err := st.CheckIdentifiers(); err != nil {
		return nil, fmt.Errorf("import statement: %w", err)
	}
	if err := st.CheckUnique(); err != nil {
		return nil, fmt.Errorf("import statement: %w", err)
	}
	if statements.RefundLinesOf(st.Channel) != statements.RefundLinesPerOrder {
		day, err := st.BillDay()
		if err != nil {
			return nil, fmt.Errorf("import statement: %w", err)
		}
		return map[string][]statements.Line{day: st.Lines}, nil
	}
	byDay := map[string][]statements.Line{}
	for _, l := range st.Lines {
		day := statements.Day(l.Time)
		byDay[day] = append(byDay[day], l)
	}
	if len(byDay) == 0 {
		return nil, errors.New("import statement: it has no lines and states no day")
	}
	return byDay, nil
}

// statementFile is a row of ss_statement_file: one tenant, channel and
// Beijing-time day, with the file last imported that changed it.
type statementFile struct {
	bun.BaseModel `bun:"table:ss_statement_file"`

	ID           int64     `bun:"id,pk,autoincrement"`
	TenantID     int64     `bun:"tenant_id"`
	ChannelCode  string    `bun:"channel_code"`
	StatementDay string    `bun:"statement_day"`
	Format       string    `bun:"format"`
	SHA1         string    `bun:"sha1"`
	LineCount    int       `bun:"line_count"`
	ImportedAt   time.Time `bun:"imported_at"`
	Version      string    `bun:"version"`
}

// statementLine is a row of ss_statement_entry: one line held for a day
// (FileID), from the file of SHA-1 SourceSHA1, where it is line LineNo.
type statementLine struct {
	bun.BaseModel `bun:"table:ss_statement_entry"`

	FileID          int64     `bun:"file_id,pk"`
	SourceSHA1      string    `bun:"source_sha1,pk"`
	LineNo          int       `bun:"line_no,pk"`
	MerchantID      string    `bun:"merchant_id"`
	Kind            string    `bun:"kind"`
	TradeNo         string    `bun:"channel_trade_no"`
	MerchantOrderNo string    `bun:"merchant_order_no"`
	RefundNo        string    `bun:"refund_no"`
	Amount          int64     `bun:"amount"`
	SettledAmount   int64     `bun:"settled_amount"`
	FeeMicroYuan    int64     `bun:"fee_micro_yuan"`
	Status          string    `bun:"status"`
	ChannelTime     time.Time `bun:"channel_time"`
	Currency        string    `bun:"currency"`
	ImportedAt      time.Time `bun:"imported_at"`
}

func importDay(ctx context.Context, db *bun.DB, tenant int64, st statements.Statement, day string, lines []statements.Line, now time.Time) (DayImport, error) {
	di := DayImport{Day: day, Lines: len(lines)}
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var held []statementFile
		q := tx.NewSelect().Model(&held).
			Where("tenant_id = ?", tenant).Where("channel_code = ?", string(st.Channel)).Where("statement_day = ?", day)
		if !sqldb.IsSQLite(tx) {
			q = q.For("UPDATE") // two imports of one day take turns
		}
		if err := q.Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read the statement held: %w", err)
		}
		file := statementFile{
			TenantID: tenant, ChannelCode: string(st.Channel), StatementDay: day, Format: st.Format,
			SHA1: st.SHA1, LineCount: len(lines), ImportedAt: now.UTC(),
		}
		if len(held) > 0 {
			file.ID = held[0].ID
		} else {
			if _, err := tx.NewInsert().Model(&file).Exec(ctx); err != nil {
				return fmt.Errorf("store the statement: %w", err)
			}
			// Read the row's ID back by its unique key: it works the same on
			// every engine and driver.
			if err := tx.NewSelect().Model((*statementFile)(nil)).Column("id").
				Where("tenant_id = ?", tenant).Where("channel_code = ?", string(st.Channel)).Where("statement_day = ?", day).
				Scan(ctx, &file.ID); err != nil {
				return fmt.Errorf("read the statement's id: %w", err)
			}
		}
		var (
			m   merge
			err error
		)
		if statements.RefundLinesOf(st.Channel) == statements.RefundLinesPerOrder {
			m, err = mergeOrders(ctx, tx, tenant, st.Channel, file.ID, lines)
		} else {
			m, err = replaceMerchants(ctx, tx, file.ID, st, lines, len(held) > 0 && held[0].SHA1 == st.SHA1)
		}
		if err != nil {
			return err
		}
		di.Changes, di.Older = m.changes, m.older
		switch {
		case len(held) == 0:
			di.Status, di.Changes = ImportNew, nil // every line is new
		case len(m.remove) == 0 && len(m.add) == 0:
			di.Status = ImportUnchanged
			di.Held, di.Version = held[0].LineCount, held[0].Version
			return nil
		case statements.RefundLinesOf(st.Channel) == statements.RefundLinesPerOrder:
			di.Status = ImportMerged
		default:
			di.Status = ImportReplaced
		}
		for _, r := range m.remove {
			if _, err := tx.NewDelete().Model(&r).WherePK().Exec(ctx); err != nil {
				return fmt.Errorf("delete a line held: %w", err)
			}
		}
		if len(m.add) > 0 {
			rows := make([]statementLine, len(m.add))
			for i, l := range m.add {
				rows[i] = lineRow(file.ID, st.SHA1, l, now)
			}
			for chunk := range slices.Chunk(rows, 500) {
				if _, err := tx.NewInsert().Model(&chunk).Exec(ctx); err != nil {
					return fmt.Errorf("store the statement's lines: %w", err)
				}
			}
		}
		touched := map[int64]bool{file.ID: true}
		for _, r := range m.remove {
			touched[r.FileID] = true
		}
		for id := range touched {
			n, v, err := refreshDay(ctx, tx, id, id == file.ID, st, now)
			if err != nil {
				return err
			}
			if id == file.ID {
				di.Held, di.Version = n, v
			}
		}
		return nil
	})
	return di, err
}

// merge is what importing one day's lines changes: the rows held to
// remove, the lines to add, the differences to report and the Shouqianba
// orders whose response was older than the one held.
type merge struct {
	remove  []statementLine
	add     []statements.Line
	changes []LineChange
	older   []string
}

// replaceMerchants works out a WeChat or Alipay bill's import into the day
// held as fileID: the lines held that name one of the bill's merchants, or
// none, give way to the bill's lines. sameFile (the day's file row has the
// bill's SHA-1) with no difference changes nothing.
func replaceMerchants(ctx context.Context, tx bun.Tx, fileID int64, st statements.Statement, lines []statements.Line, sameFile bool) (merge, error) {
	var old []statementLine
	if err := tx.NewSelect().Model(&old).Where("file_id = ?", fileID).OrderExpr("line_no, source_sha1").Scan(ctx); err != nil {
		return merge{}, fmt.Errorf("read the lines held: %w", err)
	}
	scope := map[string]bool{"": true}
	for _, id := range st.MerchantIDs() {
		scope[id] = true
	}
	var m merge
	var mine []statementLine
	others := map[string]statementLine{}
	for _, r := range old {
		if scope[r.MerchantID] {
			mine = append(mine, r)
		} else {
			others[statements.Identity(statements.Kind(r.Kind), r.TradeNo, r.RefundNo)] = r
		}
	}
	for _, l := range lines {
		if r, ok := others[l.Identity()]; ok {
			return merge{}, fmt.Errorf("line %d (%s) is held for the day already, from merchant %s's statement %s (line %d): %w",
				l.LineNo, l.Identity(), r.MerchantID, r.SourceSHA1, r.LineNo, statements.ErrRepeated)
		}
	}
	m.changes = diffLines(st.Channel, mine, lines)
	if sameFile && len(m.changes) == 0 && len(mine) == len(lines) {
		return merge{}, nil
	}
	m.remove, m.add = mine, lines
	return m, nil
}

// mergeOrders works out Shouqianba responses' import into the day held as
// fileID: per order, the line held for the order on any day of the
// tenant's (at most one) gives way to a newer response (see
// ImportStatement).
func mergeOrders(ctx context.Context, tx bun.Tx, tenant int64, ch channels.Channel, fileID int64, lines []statements.Line) (merge, error) {
	trades := make([]string, 0, len(lines))
	for _, l := range lines {
		trades = append(trades, l.TradeNo)
	}
	held := map[string]statementLine{}
	for chunk := range slices.Chunk(trades, 500) {
		var rows []statementLine
		q := tx.NewSelect().Model(&rows).
			Where("file_id IN (?)", tx.NewSelect().Model((*statementFile)(nil)).Column("id").
				Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch))).
			Where("channel_trade_no IN (?)", bun.List(chunk))
		if !sqldb.IsSQLite(tx) {
			q = q.For("UPDATE")
		}
		if err := q.Scan(ctx); err != nil {
			return merge{}, fmt.Errorf("read the orders held: %w", err)
		}
		for _, r := range rows {
			if h, ok := held[r.TradeNo]; !ok || r.ChannelTime.After(h.ChannelTime) {
				held[r.TradeNo] = r
			}
		}
	}
	var m merge
	for _, l := range lines {
		l.Time = l.Time.UTC()
		id := l.Identity()
		h, ok := held[l.TradeNo]
		if !ok {
			m.add = append(m.add, l)
			m.changes = append(m.changes, LineChange{Identity: id, New: &l})
			continue
		}
		o := heldLine(ch, h)
		switch {
		case l.Time.Before(o.Time):
			m.older = append(m.older, l.TradeNo)
		case l.Time.Equal(o.Time) && sameLine(o, l) && h.FileID == fileID:
			// the same response again
		default:
			m.remove = append(m.remove, h)
			m.add = append(m.add, l)
			m.changes = append(m.changes, LineChange{Identity: id, Old: &o, New: &l})
		}
	}
	slices.SortFunc(m.changes, func(a, b LineChange) int { return strings.Compare(a.Identity, b.Identity) })
	return m, nil
}

// refreshDay recounts the lines held for the day row id and records their
// version; for the day imported (importing), also the file that changed it.
func refreshDay(ctx context.Context, tx bun.Tx, id int64, importing bool, st statements.Statement, now time.Time) (int, string, error) {
	var rows []statementLine
	if err := tx.NewSelect().Model(&rows).Where("file_id = ?", id).Scan(ctx); err != nil {
		return 0, "", fmt.Errorf("read the lines held: %w", err)
	}
	v := dayVersion(rows)
	q := tx.NewUpdate().Model((*statementFile)(nil)).Where("id = ?", id).
		Set("line_count = ?", len(rows)).Set("version = ?", v)
	if importing {
		q = q.Set("format = ?", st.Format).Set("sha1 = ?", st.SHA1).Set("imported_at = ?", now.UTC())
	}
	if _, err := q.Exec(ctx); err != nil {
		return 0, "", fmt.Errorf("record the day's lines held: %w", err)
	}
	return len(rows), v, nil
}

// DayVersion is the version of a statement day's lines held: the hex
// SHA-256 of their canonical encodings (merchant, kind, trade, merchant
// order and refund numbers, amounts, fee, status, time in microseconds,
// currency; neither the file nor the line number), sorted, one a line.
// The same lines give the same version whatever files and order they came
// in; any line added, removed or changed gives another. No lines give the
// SHA-256 of nothing.
func DayVersion(lines []statements.Line) string {
	enc := make([]string, len(lines))
	for i, l := range lines {
		enc[i] = canonical(l.MerchantID, string(l.Kind), l.TradeNo, l.MerchantOrderNo, l.RefundNo,
			l.Amount, l.SettledAmount, l.FeeMicroYuan, l.Status, l.Time, l.Currency)
	}
	return hashSorted(enc)
}

func dayVersion(rows []statementLine) string {
	enc := make([]string, len(rows))
	for i, r := range rows {
		enc[i] = canonical(r.MerchantID, r.Kind, r.TradeNo, r.MerchantOrderNo, r.RefundNo,
			r.Amount, r.SettledAmount, r.FeeMicroYuan, r.Status, r.ChannelTime, r.Currency)
	}
	return hashSorted(enc)
}

func canonical(merchant, kind, trade, order, refund string, amount, settled, fee int64, status string, at time.Time, currency string) string {
	return strings.Join([]string{
		strconv.Quote(merchant), strconv.Quote(kind), strconv.Quote(trade), strconv.Quote(order), strconv.Quote(refund),
		strconv.FormatInt(amount, 10), strconv.FormatInt(settled, 10), strconv.FormatInt(fee, 10),
		strconv.Quote(status), strconv.FormatInt(at.UnixMicro(), 10), strconv.Quote(currency),
	}, " ")
}

func hashSorted(enc []string) string {
	slices.Sort(enc)
	h := sha256.New()
	for _, e := range enc {
		h.Write([]byte(e))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func lineRow(fileID int64, sourceSHA1 string, l statements.Line, now time.Time) statementLine {
	return statementLine{
		FileID: fileID, SourceSHA1: sourceSHA1, LineNo: l.LineNo, MerchantID: l.MerchantID, Kind: string(l.Kind),
		TradeNo: l.TradeNo, MerchantOrderNo: l.MerchantOrderNo,
		RefundNo: l.RefundNo, Amount: l.Amount, SettledAmount: l.SettledAmount, FeeMicroYuan: l.FeeMicroYuan,
		Status: l.Status, ChannelTime: l.Time.UTC().Truncate(time.Microsecond), Currency: l.Currency, ImportedAt: now.UTC(),
	}
}

// heldLine turns a row held back into the line it stores.
func heldLine(ch channels.Channel, r statementLine) statements.Line {
	return statements.Line{
		LineNo: r.LineNo, Channel: ch, Kind: statements.Kind(r.Kind), TradeNo: r.TradeNo,
		MerchantOrderNo: r.MerchantOrderNo, RefundNo: r.RefundNo, Amount: r.Amount, SettledAmount: r.SettledAmount,
		FeeMicroYuan: r.FeeMicroYuan, Status: r.Status, Time: r.ChannelTime.UTC(), Currency: r.Currency, MerchantID: r.MerchantID,
	}
}

// diffLines lists the lines added, removed or changed between the lines
// held and a corrected file's, in identity order.
func diffLines(ch channels.Channel, old []statementLine, lines []statements.Line) []LineChange {
	before := map[string]statements.Line{}
	for _, r := range old {
		before[statements.Identity(statements.Kind(r.Kind), r.TradeNo, r.RefundNo)] = heldLine(ch, r)
	}
	after := map[string]statements.Line{}
	for _, l := range lines {
		l.Time = l.Time.UTC()
		after[l.Identity()] = l
	}
	var out []LineChange
	for id, o := range before {
		n, ok := after[id]
		switch {
		case !ok:
			out = append(out, LineChange{Identity: id, Old: &o})
		case !sameLine(o, n):
			out = append(out, LineChange{Identity: id, Old: &o, New: &n})
		}
	}
	for id, n := range after {
		if _, ok := before[id]; !ok {
			out = append(out, LineChange{Identity: id, New: &n})
		}
	}
	slices.SortFunc(out, func(a, b LineChange) int { return strings.Compare(a.Identity, b.Identity) })
	return out
}

// sameLine compares what a line says, not where it sits in its file.
func sameLine(a, b statements.Line) bool {
	return a.Kind == b.Kind && a.TradeNo == b.TradeNo && a.MerchantOrderNo == b.MerchantOrderNo &&
		a.RefundNo == b.RefundNo && a.Amount == b.Amount && a.SettledAmount == b.SettledAmount &&
		a.FeeMicroYuan == b.FeeMicroYuan && a.Status == b.Status && a.Time.Equal(b.Time) && a.Currency == b.Currency
}
