package ops

import (
	"context"
	"database/sql"
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
	// ImportUnchanged: the same file (same SHA-1) was already imported for
	// the day; nothing changed.
	ImportUnchanged ImportStatus = "unchanged"
	// ImportReplaced: another file was held for the day; the difference
	// is reported in DayImport.Changes and the new file replaced it.
	ImportReplaced ImportStatus = "replaced"
)

// LineChange is one difference between the statement held for a day and
// the corrected one that replaced it. Old is nil for an added line, New for
// a removed one.
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
}

// ImportResult is what ImportStatement did, per day the statement covers.
type ImportResult struct {
	TenantID int64       `json:"tenant_id"`
	Channel  string      `json:"channel"`
	Format   string      `json:"format"`
	SHA1     string      `json:"sha1"`
	Days     []DayImport `json:"days"`
}

// ImportStatement stores a parsed statement for tenant, one file row per
// Beijing-time day its lines fall on (a WeChat or Alipay bill is one day;
// Shouqianba query responses may span several; an empty Alipay bill is the
// day its window states). Per day: the same file again changes nothing; a
// different file replaces the one held, after its differences are worked
// out line by line (returned in the result, for the operator to see). Each
// day is written in a transaction of its own. It refuses a statement with
// no lines and no stated day.
func ImportStatement(ctx context.Context, db *bun.DB, tenant int64, st statements.Statement, now time.Time) (ImportResult, error) {
	res := ImportResult{TenantID: tenant, Channel: string(st.Channel), Format: st.Format, SHA1: st.SHA1}
	if tenant <= 0 {
		return res, fmt.Errorf("import statement: tenant %d: must be positive", tenant)
	}
	byDay := map[string][]statements.Line{}
	for _, l := range st.Lines {
		day := l.Time.In(statements.Beijing).Format(time.DateOnly)
		byDay[day] = append(byDay[day], l)
	}
	if len(byDay) == 0 {
		if st.From.IsZero() {
			return res, errors.New("import statement: it has no lines and states no day")
		}
		byDay[st.From.In(statements.Beijing).Format(time.DateOnly)] = nil
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

// statementFile is a row of ss_statement_file.
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
}

// statementLine is a row of ss_statement_line.
type statementLine struct {
	bun.BaseModel `bun:"table:ss_statement_line"`

	FileID          int64     `bun:"file_id,pk"`
	LineNo          int       `bun:"line_no,pk"`
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
		switch {
		case len(held) > 0 && held[0].SHA1 == st.SHA1 && held[0].LineCount == len(lines):
			di.Status = ImportUnchanged
			return nil
		case len(held) > 0:
			var old []statementLine
			if err := tx.NewSelect().Model(&old).Where("file_id = ?", held[0].ID).OrderExpr("line_no").Scan(ctx); err != nil {
				return fmt.Errorf("read the lines held: %w", err)
			}
			di.Changes = diffLines(st.Channel, old, lines)
			if _, err := tx.NewDelete().Model((*statementLine)(nil)).Where("file_id = ?", held[0].ID).Exec(ctx); err != nil {
				return fmt.Errorf("delete the lines held: %w", err)
			}
			file.ID = held[0].ID
			if _, err := tx.NewUpdate().Model(&file).WherePK().Exec(ctx); err != nil {
				return fmt.Errorf("replace the statement held: %w", err)
			}
			di.Status = ImportReplaced
		default:
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
			di.Status = ImportNew
		}
		if len(lines) == 0 {
			return nil
		}
		rows := make([]statementLine, len(lines))
		for i, l := range lines {
			rows[i] = lineRow(file.ID, l)
		}
		if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
			return fmt.Errorf("store the statement's lines: %w", err)
		}
		return nil
	})
	return di, err
}

func lineRow(fileID int64, l statements.Line) statementLine {
	return statementLine{
		FileID: fileID, LineNo: l.LineNo, Kind: string(l.Kind), TradeNo: l.TradeNo, MerchantOrderNo: l.MerchantOrderNo,
		RefundNo: l.RefundNo, Amount: l.Amount, SettledAmount: l.SettledAmount, FeeMicroYuan: l.FeeMicroYuan,
		Status: l.Status, ChannelTime: l.Time.UTC(), Currency: l.Currency,
	}
}

// identity names a statement line across files: its kind, trade number and
// refund number. A line number is not an identity: a corrected file may
// order its lines differently.
func identity(kind, tradeNo, refundNo string) string {
	id := kind + " " + tradeNo
	if refundNo != "" {
		id += " refund " + strconv.Quote(refundNo)
	}
	return id
}

// diffLines lists the lines added, removed or changed between the lines
// held and a corrected file's, in identity order.
func diffLines(ch channels.Channel, old []statementLine, lines []statements.Line) []LineChange {
	before := map[string]statements.Line{}
	for _, r := range old {
		before[identity(r.Kind, r.TradeNo, r.RefundNo)] = statements.Line{
			LineNo: r.LineNo, Channel: ch, Kind: statements.Kind(r.Kind), TradeNo: r.TradeNo,
			MerchantOrderNo: r.MerchantOrderNo, RefundNo: r.RefundNo, Amount: r.Amount, SettledAmount: r.SettledAmount,
			FeeMicroYuan: r.FeeMicroYuan, Status: r.Status, Time: r.ChannelTime.UTC(), Currency: r.Currency,
		}
	}
	after := map[string]statements.Line{}
	for _, l := range lines {
		l.Time = l.Time.UTC()
		after[identity(string(l.Kind), l.TradeNo, l.RefundNo)] = l
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
