package alipay

import (
	"archive/zip"
	"crypto/sha1" //nolint:gosec // SHA-1 identifies the file, as WeChat's hash_value does; it guards no secret
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// StatementFormat is the Statement.Format of an Alipay trade bill (业务明细).
const StatementFormat = "alipay-trade"

// AlipayMaxEntrySize is the largest uncompressed 业务明细 entry, in bytes,
// that ParseStatement opens, as the entry's header states it; a larger one
// is refused with ErrFormat before it is read. The entry is read as a
// stream, within statements.MaxTextBytes whatever its header says.
const AlipayMaxEntrySize = statements.MaxTextBytes

// The 业务明细 columns the parser reads. Header names are compared after
// turning half-width parentheses into the full-width ones Alipay writes.
const (
	alipayColTradeNo  = "支付宝交易号"
	alipayColOrderNo  = "商户订单号"
	alipayColBizType  = "业务类型"
	alipayColFinished = "完成时间"
	alipayColAmount   = "订单金额（元）"
	alipayColSettled  = "商家实收（元）"
	alipayColRefundNo = "退款批次号/请求号"
	alipayColFee      = "服务费（元）" // optional: absent from the 22-column layout
)

// alipayRequired are the columns without which a 业务明细 file is refused.
var alipayRequired = [...]string{
	alipayColTradeNo, alipayColOrderNo, alipayColBizType, alipayColFinished,
	alipayColAmount, alipayColSettled, alipayColRefundNo,
}

// The 业务类型 values and the Line.Status they become.
const (
	alipayBizPayment = "交易"
	alipayBizRefund  = "退款"
	alipayStatusDone = "SUCCESS"
)

const (
	alipayEntrySuffix  = "业务明细.csv"
	alipayListStart    = "业务明细列表"
	alipayListEnd      = "业务明细列表结束"
	alipayWindowLayout = "2006年01月02日 15:04:05"
	alipayRowLayout    = "2006-01-02 15:04:05"
)

var (
	alipayAccountRE = regexp.MustCompile(`^#\s*账号[:：]\s*\[([^\]]*)\]`)
	alipayWindowRE  = regexp.MustCompile(`起始日期[:：]\s*\[([^\]]*)\]\s*终止日期[:：]\s*\[([^\]]*)\]`)
	alipayPaidRE    = regexp.MustCompile(`^#?\s*交易合计[:：]\s*([0-9]+)\s*笔\s*[,，]\s*商家实收共\s*(-?[0-9.]+)\s*元`)
	alipayRefundRE  = regexp.MustCompile(`^#?\s*退款合计[:：]\s*([0-9]+)\s*笔\s*[,，]\s*商家实收退款共\s*(-?[0-9.]+)\s*元`)
	alipayParens    = strings.NewReplacer("(", "（", ")", "）")
	alipayMangledRE = regexp.MustCompile(`^[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+$`)
)

// ParseStatement parses an Alipay trade bill (bill_type=trade): the .csv.zip
// that bill_download_url serves, given as a ReaderAt over size bytes (for
// bytes in memory: bytes.NewReader(b), int64(len(b))).
//
// The zip's entry names are GBK unless the entry has the UTF-8 flag; an
// unflagged name is decoded as GB18030 (a superset of GBK), and also taken
// as is when its raw bytes are valid UTF-8, since some zip tools write
// UTF-8 without the flag. Exactly one entry whose name ends in 业务明细.csv
// is read (never …业务明细(汇总).csv); its content is GBK and is decoded to
// UTF-8. Statement.SHA1 is the hex SHA-1 of that entry's uncompressed raw
// (GBK) bytes, not of the zip and not of the decoded text; Line.LineNo
// counts lines of that entry (LF or CRLF). The entry is read as a stream,
// a line at a time, never whole, within statements.ReadLines' and
// statements.LimitRatio's limits (a limit passed wraps statements.ErrLimit
// and ErrFormat, naming the entry).
//
// Lines starting with # are comments: 起始日期/终止日期 give From and To
// (Beijing time, returned in UTC); the detail rows lie between the lines
// containing 业务明细列表 and 业务明细列表结束, the first of them being the
// header, whose columns are found by name (the 22- and 25-column layouts
// and any other carrying the required columns; 服务费（元） is optional).
// Trailing TABs and spaces are stripped from every cell.
//
// A row of 业务类型 交易 becomes a KindPayment line (Amount 订单金额,
// SettledAmount 商家实收), one of 退款 a KindRefund line with both amounts
// negated to positive (the file writes them negative) and RefundNo from
// 退款批次号/请求号; Time is 完成时间 for both. Alipay rows are final, so
// Status is always "SUCCESS". FeeMicroYuan is 服务费 with its sign as
// given (0 when the column is absent); Currency is CNY.
//
// The footer lines #交易合计 and #退款合计 are required and checked against
// the rows: a count or 商家实收 sum that differs is refused with an error
// wrapping ErrMismatch that names the figure and the difference. Totals
// holds what the footer states: Lines, Payments, Refunds, SettledPayments
// and SettledRefunds (positive); the footer states no order-amount or fee
// sums, so PaymentAmount, RefundAmount and FeeMicroYuan stay zero.
//
// Anything else that does not fit — not a zip, no or several detail
// entries, a missing marker, window or footer, an unknown header (the
// error lists the missing columns), a malformed cell, an unknown 业务类型,
// an ID in scientific notation (the file was re-saved by a spreadsheet) —
// is refused with an error wrapping ErrFormat that names the line and the
// column.
func ParseStatement(r io.ReaderAt, size int64) (statements.Statement, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return statements.Statement{}, fmt.Errorf("alipay bill: open zip: %w: %w", statements.ErrFormat, err)
	}
	entry, err := alipayDetailEntry(zr)
	if err != nil {
		return statements.Statement{}, err
	}
	return parseAlipayEntry(entry)
}

// alipayEntryNames returns the names an entry may go by: the GBK decoding
// of an unflagged name, and the raw name when it is UTF-8 (flagged, or
// valid UTF-8 anyway).
func alipayEntryNames(f *zip.File) []string {
	const utf8Flag = 0x800
	if f.Flags&utf8Flag != 0 {
		return []string{f.Name}
	}
	var names []string
	if dec, err := simplifiedchinese.GB18030.NewDecoder().String(f.Name); err == nil {
		names = append(names, dec)
	}
	if utf8.ValidString(f.Name) {
		names = append(names, f.Name)
	}
	return names
}

// AlipayMaxEntries is the most entries a bill's zip may have: Alipay's
// holds two (业务明细 and its 汇总), some comments list four; a zip of
// more is refused, in one line, before any entry is read.
const AlipayMaxEntries = 16

// alipayDetailEntry finds the one 业务明细.csv entry, refusing a zip of
// more than AlipayMaxEntries entries and any entry whose name is not a
// plain file name.
func alipayDetailEntry(zr *zip.Reader) (*zip.File, error) {
	if len(zr.File) > AlipayMaxEntries {
		return nil, fmt.Errorf("alipay bill: %d entries in the zip, more than the %d a bill has: %w",
			len(zr.File), AlipayMaxEntries, statements.ErrFormat)
	}
	var found *zip.File
	var all []string
	for i, f := range zr.File {
		names := alipayEntryNames(f)
		for _, n := range append(slices.Clone(names), f.Name) {
			if why := alipayUnsafeName(n); why != "" {
				return nil, fmt.Errorf("alipay bill: zip entry %d %.64q: its name %s: %w", i+1, n, why, statements.ErrFormat)
			}
		}
		if len(names) > 0 {
			all = append(all, strconv.Quote(names[0]))
		}
		match := false
		for _, n := range names {
			if strings.HasSuffix(n, alipayEntrySuffix) {
				match = true
			}
		}
		if !match {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("alipay bill: more than one %s entry: %w", alipayEntrySuffix, statements.ErrFormat)
		}
		found = f
	}
	if found == nil {
		return nil, fmt.Errorf("alipay bill: no …_%s entry among [%s]: %w",
			alipayEntrySuffix, strings.Join(all, ", "), statements.ErrFormat)
	}
	return found, nil
}

// alipayUnsafeName says why an entry name is not a plain file name (""
// when it is one): an absolute path, a drive letter, or a ".." element,
// with either slash; nothing is ever extracted, but a name that climbs
// out of a directory is no bill's.
func alipayUnsafeName(name string) string {
	switch {
	case strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`):
		return "is an absolute path"
	case len(name) >= 2 && name[1] == ':':
		return "starts with a drive letter"
	}
	for _, el := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return `has a ".." element`
		}
	}
	return ""
}

// parseAlipayEntry parses the detail entry f as a stream: its raw (GBK)
// bytes go through the SHA-1 and the GB18030 decoder line by line, within
// statements.LimitRatio's and ReadLines' limits; an entry whose header
// states more than AlipayMaxEntrySize is refused before it is opened.
// Reading to the end makes archive/zip check the CRC.
func parseAlipayEntry(f *zip.File) (statements.Statement, error) {
	shown := f.Name
	if names := alipayEntryNames(f); len(names) > 0 {
		shown = names[0]
	}
	name := fmt.Sprintf("detail entry %.64q", shown)
	if f.UncompressedSize64 > AlipayMaxEntrySize {
		return statements.Statement{}, fmt.Errorf("alipay bill: %s of %d bytes exceeds %d: %w: %w",
			name, f.UncompressedSize64, AlipayMaxEntrySize, statements.ErrLimit, statements.ErrFormat)
	}
	rc, err := f.Open()
	if err != nil {
		return statements.Statement{}, fmt.Errorf("alipay bill: open %s: %w: %w", name, statements.ErrFormat, err)
	}
	defer func() { _ = rc.Close() }()
	compressed := int64(min(f.CompressedSize64, uint64(math.MaxInt64))) //nolint:gosec // bounded just above
	raw := statements.LimitRatio(rc, "the entry", func() int64 { return compressed })
	h := sha1.New() //nolint:gosec // see the import
	text := transform.NewReader(io.TeeReader(raw, h), simplifiedchinese.GB18030.NewDecoder())
	st, err := parseAlipayDetail(text)
	switch {
	case errors.Is(err, statements.ErrLimit):
		return statements.Statement{}, fmt.Errorf("alipay bill: %s: %w", name, err)
	case err != nil && !errors.Is(err, statements.ErrFormat) && !errors.Is(err, statements.ErrMismatch):
		return statements.Statement{}, fmt.Errorf("alipay bill: read %s: %w: %w", name, statements.ErrFormat, err)
	case err != nil:
		return statements.Statement{}, err
	}
	st.SHA1 = hex.EncodeToString(h.Sum(nil))
	return st, nil
}

// alipayColumns maps the required and optional columns to their index.
type alipayColumns struct {
	idx   map[string]int
	width int
}

func (c alipayColumns) cell(cells []string, name string) string {
	i, ok := c.idx[name]
	if !ok {
		return ""
	}
	return cells[i]
}

// alipayHeader maps the header line by name; an unknown layout is refused
// with the missing required columns.
func alipayHeader(lineNo int, line string) (alipayColumns, error) {
	cells, err := alipaySplit(line)
	if err != nil {
		return alipayColumns{}, fmt.Errorf("alipay bill line %d: header: %w: %w", lineNo, statements.ErrFormat, err)
	}
	cols := alipayColumns{idx: make(map[string]int, len(cells)), width: len(cells)}
	for i, name := range cells {
		name = alipayParens.Replace(name)
		if _, dup := cols.idx[name]; dup && name != "" {
			return alipayColumns{}, fmt.Errorf("alipay bill line %d: header: column %q twice: %w", lineNo, name, statements.ErrFormat)
		}
		cols.idx[name] = i
	}
	var missing []string
	for _, name := range alipayRequired {
		if _, ok := cols.idx[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return alipayColumns{}, fmt.Errorf("alipay bill line %d: unknown header, missing columns %s: %w",
			lineNo, strings.Join(missing, ", "), statements.ErrFormat)
	}
	return cols, nil
}

// alipaySplit splits one CSV line and strips every cell's surrounding
// TABs and spaces. Lines without quotes are split on commas; the rare
// quoted cell goes through encoding/csv.
func alipaySplit(line string) ([]string, error) {
	var cells []string
	if strings.ContainsRune(line, '"') {
		cr := csv.NewReader(strings.NewReader(line))
		cr.FieldsPerRecord = -1
		cr.LazyQuotes = true
		rec, err := cr.Read()
		if err != nil {
			return nil, err
		}
		cells = rec
	} else {
		cells = strings.Split(line, ",")
	}
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells, nil
}

// alipayFooter is one parsed footer figure line.
type alipayFooter struct {
	lineNo  int
	count   int
	settled int64 // as written: negative for refunds
}

// parseAlipayDetail parses the decoded text of a 业务明细 entry, line by
// line.
func parseAlipayDetail(text io.Reader) (statements.Statement, error) {
	st := statements.Statement{Channel: Code, Format: StatementFormat}
	const (
		before = iota // comments before the start marker
		header        // after the start marker, waiting for the header
		rows          // detail rows
		after         // after the end marker
	)
	state := before
	var cols alipayColumns
	var paid, refunded *alipayFooter
	haveWindow := false
	err := statements.ReadLines(text, func(lineNo int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if strings.HasPrefix(line, "#") {
			switch {
			case strings.Contains(line, alipayListEnd):
				if state != rows {
					return fmt.Errorf("alipay bill line %d: %s before the header: %w", lineNo, alipayListEnd, statements.ErrFormat)
				}
				state = after
			case strings.Contains(line, alipayListStart):
				if state != before {
					return fmt.Errorf("alipay bill line %d: second %s marker: %w", lineNo, alipayListStart, statements.ErrFormat)
				}
				state = header
			case state == rows:
				return fmt.Errorf("alipay bill line %d: comment inside the detail rows: %w", lineNo, statements.ErrFormat)
			case state == before && alipayAccountRE.MatchString(line):
				if st.Account != "" {
					return fmt.Errorf("alipay bill line %d: second 账号 line: %w", lineNo, statements.ErrFormat)
				}
				st.Account = strings.TrimSpace(alipayAccountRE.FindStringSubmatch(line)[1])
			case strings.Contains(line, "起始日期"):
				if haveWindow {
					return fmt.Errorf("alipay bill line %d: second 起始日期 line: %w", lineNo, statements.ErrFormat)
				}
				from, to, err := alipayWindow(line)
				if err != nil {
					return fmt.Errorf("alipay bill line %d: %w", lineNo, err)
				}
				st.From, st.To, haveWindow = from, to, true
			case state == after && strings.Contains(line, "交易合计"):
				f, err := alipayFooterLine(lineNo, line, alipayPaidRE, paid)
				if err != nil {
					return err
				}
				paid = f
			case state == after && strings.Contains(line, "退款合计"):
				f, err := alipayFooterLine(lineNo, line, alipayRefundRE, refunded)
				if err != nil {
					return err
				}
				refunded = f
			}
			return nil
		}
		switch state {
		case before:
			return fmt.Errorf("alipay bill line %d: data before the %s marker: %w", lineNo, alipayListStart, statements.ErrFormat)
		case header:
			c, err := alipayHeader(lineNo, line)
			if err != nil {
				return err
			}
			cols, state = c, rows
		case rows:
			l, err := alipayRow(lineNo, line, cols)
			if err != nil {
				return err
			}
			l.MerchantID = st.Account
			st.Lines = append(st.Lines, l.Detached())
		case after:
			return fmt.Errorf("alipay bill line %d: data after the %s marker: %w", lineNo, alipayListEnd, statements.ErrFormat)
		}
		return nil
	})
	if err != nil {
		return statements.Statement{}, err
	}
	switch {
	case state == before:
		return statements.Statement{}, fmt.Errorf("alipay bill: no %s marker: %w", alipayListStart, statements.ErrFormat)
	case state == header:
		return statements.Statement{}, fmt.Errorf("alipay bill: no header after the %s marker: %w", alipayListStart, statements.ErrFormat)
	case state == rows:
		return statements.Statement{}, fmt.Errorf("alipay bill: no %s marker (truncated file?): %w", alipayListEnd, statements.ErrFormat)
	case !haveWindow:
		return statements.Statement{}, fmt.Errorf("alipay bill: no #起始日期 line: %w", statements.ErrFormat)
	case paid == nil:
		return statements.Statement{}, fmt.Errorf("alipay bill: no #交易合计 footer: %w", statements.ErrFormat)
	case refunded == nil:
		return statements.Statement{}, fmt.Errorf("alipay bill: no #退款合计 footer: %w", statements.ErrFormat)
	}
	st.Totals = statements.Totals{
		Lines:           paid.count + refunded.count,
		Payments:        paid.count,
		Refunds:         refunded.count,
		SettledPayments: paid.settled,
		SettledRefunds:  -refunded.settled,
	}
	if err := alipayCheckFooter(st, paid, refunded); err != nil {
		return statements.Statement{}, err
	}
	return st, nil
}

// alipayWindow parses #起始日期：[…]   终止日期：[…] into UTC.
func alipayWindow(line string) (from, to time.Time, err error) {
	m := alipayWindowRE.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, time.Time{}, fmt.Errorf("起始日期/终止日期 not understood: %w", statements.ErrFormat)
	}
	from, err = time.ParseInLocation(alipayWindowLayout, strings.TrimSpace(m[1]), statements.Beijing)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("起始日期: %w: %w", statements.ErrFormat, err)
	}
	to, err = time.ParseInLocation(alipayWindowLayout, strings.TrimSpace(m[2]), statements.Beijing)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("终止日期: %w: %w", statements.ErrFormat, err)
	}
	if !to.After(from) {
		return time.Time{}, time.Time{}, fmt.Errorf("终止日期 %s not after 起始日期 %s: %w", m[2], m[1], statements.ErrFormat)
	}
	return from.UTC(), to.UTC(), nil
}

// alipayFooterLine parses one footer figure line; prev is the earlier one
// of the same kind, if any.
func alipayFooterLine(lineNo int, line string, re *regexp.Regexp, prev *alipayFooter) (*alipayFooter, error) {
	if prev != nil {
		return nil, fmt.Errorf("alipay bill line %d: footer repeats line %d: %w", lineNo, prev.lineNo, statements.ErrFormat)
	}
	m := re.FindStringSubmatch(line)
	if m == nil {
		return nil, fmt.Errorf("alipay bill line %d: footer not understood: %w", lineNo, statements.ErrFormat)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return nil, fmt.Errorf("alipay bill line %d: footer count: %w: %w", lineNo, statements.ErrFormat, err)
	}
	v, err := alipayYuan(m[2])
	if err != nil {
		return nil, fmt.Errorf("alipay bill line %d: footer sum: %w: %w", lineNo, statements.ErrFormat, err)
	}
	return &alipayFooter{lineNo: lineNo, count: n, settled: v}, nil
}

// alipayCheckFooter compares the footer's counts and 商家实收 sums with the
// rows and names every figure that differs.
func alipayCheckFooter(st statements.Statement, paid, refunded *alipayFooter) error {
	var payments, refunds int
	var settledPaid, settledRefunded int64
	for _, l := range st.Lines {
		if l.Kind == statements.KindPayment {
			payments++
			settledPaid += l.SettledAmount
		} else {
			refunds++
			settledRefunded -= l.SettledAmount
		}
	}
	var diffs []string
	if payments != paid.count {
		diffs = append(diffs, fmt.Sprintf("line %d 交易合计 says %d 笔, rows have %d (rows − footer = %d)",
			paid.lineNo, paid.count, payments, payments-paid.count))
	}
	if settledPaid != paid.settled {
		diffs = append(diffs, fmt.Sprintf("line %d 商家实收共 says %s, rows sum to %s (rows − footer = %s)",
			paid.lineNo, alipayFormatFen(paid.settled), alipayFormatFen(settledPaid), alipayFormatFen(settledPaid-paid.settled)))
	}
	if refunds != refunded.count {
		diffs = append(diffs, fmt.Sprintf("line %d 退款合计 says %d 笔, rows have %d (rows − footer = %d)",
			refunded.lineNo, refunded.count, refunds, refunds-refunded.count))
	}
	if settledRefunded != refunded.settled {
		diffs = append(diffs, fmt.Sprintf("line %d 商家实收退款共 says %s, rows sum to %s (rows − footer = %s)",
			refunded.lineNo, alipayFormatFen(refunded.settled), alipayFormatFen(settledRefunded),
			alipayFormatFen(settledRefunded-refunded.settled)))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("alipay bill footer: %s: %w", strings.Join(diffs, "; "), statements.ErrMismatch)
	}
	return nil
}

// alipayRow turns one detail row into a Line.
func alipayRow(lineNo int, line string, cols alipayColumns) (statements.Line, error) {
	cells, err := alipaySplit(line)
	if err != nil {
		return statements.Line{}, fmt.Errorf("alipay bill line %d: %w: %w", lineNo, statements.ErrFormat, err)
	}
	if len(cells) != cols.width {
		return statements.Line{}, fmt.Errorf("alipay bill line %d: %d cells, the header has %d: %w", lineNo, len(cells), cols.width, statements.ErrFormat)
	}
	colErr := func(col string, err error) error {
		return fmt.Errorf("alipay bill line %d, column %s: %w: %w", lineNo, col, statements.ErrFormat, err)
	}
	l := statements.Line{LineNo: lineNo, Channel: Code, Status: alipayStatusDone, Currency: "CNY"}
	for _, id := range []struct {
		col      string
		dst      *string
		required bool
	}{
		{alipayColTradeNo, &l.TradeNo, true},
		{alipayColOrderNo, &l.MerchantOrderNo, false},
		{alipayColRefundNo, &l.RefundNo, false},
	} {
		v := cols.cell(cells, id.col)
		if v == "" && id.required {
			return statements.Line{}, colErr(id.col, errAlipayEmpty)
		}
		if alipayMangledRE.MatchString(v) {
			return statements.Line{}, colErr(id.col, fmt.Errorf("%q is in scientific notation (re-saved by a spreadsheet?)", v))
		}
		*id.dst = v
	}
	biz := cols.cell(cells, alipayColBizType)
	switch biz {
	case alipayBizPayment:
		l.Kind = statements.KindPayment
		l.RefundNo = ""
	case alipayBizRefund:
		l.Kind = statements.KindRefund
	default:
		return statements.Line{}, colErr(alipayColBizType, fmt.Errorf("unknown 业务类型 %q", biz))
	}
	t, err := time.ParseInLocation(alipayRowLayout, cols.cell(cells, alipayColFinished), statements.Beijing)
	if err != nil {
		return statements.Line{}, colErr(alipayColFinished, err)
	}
	l.Time = t.UTC()
	for _, a := range []struct {
		col string
		dst *int64
	}{{alipayColAmount, &l.Amount}, {alipayColSettled, &l.SettledAmount}} {
		v, err := alipayYuan(cols.cell(cells, a.col))
		if err != nil {
			return statements.Line{}, colErr(a.col, err)
		}
		if l.Kind == statements.KindRefund {
			v = -v
		}
		if v < 0 {
			return statements.Line{}, colErr(a.col, fmt.Errorf("%s row with amount of the wrong sign %q", biz, cols.cell(cells, a.col)))
		}
		*a.dst = v
	}
	if fee := cols.cell(cells, alipayColFee); fee != "" {
		l.FeeMicroYuan, err = alipayMicroYuan(fee)
		if err != nil {
			return statements.Line{}, colErr(alipayColFee, err)
		}
	}
	return l, nil
}

var errAlipayEmpty = errors.New("empty")

// alipayYuan parses a signed yuan amount with at most two decimals into
// fen, through channels.ParseYuan.
func alipayYuan(s string) (int64, error) {
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		v, err := channels.ParseYuan(rest)
		return -v, err
	}
	return channels.ParseYuan(s)
}

// alipayMicroYuan parses a signed yuan amount with at most five decimals
// into units of 0.00001 yuan, exactly.
func alipayMicroYuan(s string) (int64, error) {
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, rest
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if len(frac) > 5 {
		return 0, fmt.Errorf("fee %q has more than 5 decimals", s)
	}
	// ParseYuan checks the integer part's digits, leading zeros and bound.
	yuan, err := channels.ParseYuan(intPart)
	if err != nil {
		return 0, err
	}
	if strings.Contains(s, ".") && frac == "" {
		return 0, fmt.Errorf("fee %q ends in a dot", s)
	}
	v := yuan * 1000 // fen to units of 0.00001 yuan
	scale := int64(10000)
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("fee %q is not a decimal", s)
		}
		v += int64(c-'0') * scale
		scale /= 10
	}
	if neg {
		v = -v
	}
	return v, nil
}

// alipayFormatFen writes fen as signed yuan ("-55.00").
func alipayFormatFen(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}
