package wechat

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"crypto/sha1" //nolint:gosec // WeChat states the bill's hash as SHA-1; this checks integrity, not authenticity.
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// The layouts ParseStatement recognises, as Statement.Format names them.
const (
	// FormatAll is the current 27-column WeChat Pay trade bill
	// (bill_type=ALL) with its 7-column summary.
	FormatAll = "wechat-tradebill-all"
	// FormatAllLegacy is the early 24-column WeChat Pay trade bill
	// (总金额 instead of 应结订单金额 and 订单金额, no 申请退款金额) with
	// its 5-column summary.
	FormatAllLegacy = "wechat-tradebill-all-legacy"
)

// wechatSummaryFirst is the first cell of the summary header line.
const wechatSummaryFirst = "总交易单数"

// wechatTimeLayout is 交易时间's layout, Beijing time without an offset.
const wechatTimeLayout = "2006-01-02 15:04:05"

// ParseStatement parses a WeChat Pay trade bill of bill_type=ALL, as the
// download URL returns it: plain text or gzip (recognised by the gzip magic
// bytes), UTF-8 with or without a leading BOM, LF or CRLF line endings,
// every data cell prefixed with a backtick. Columns are found by header
// name; the header must be exactly the current 27-column one or the legacy
// 24-column one (in any order), anything else, including the SUCCESS and
// REFUND bill types, is refused. The file must end with its two summary
// lines (a header starting 总交易单数, then the values), and the rows must
// add up to them: the number of rows, 应结订单金额 and 订单金额 over the
// payments, 退款金额 and 申请退款金额 over the refunds, and the signed
// 手续费 (the legacy summary states only the count, 总金额, 退款金额 and
// 手续费).
//
// Rows with 交易状态 SUCCESS or REVOKED become KindPayment lines, REFUND
// KindRefund lines (Status is then 退款状态, a snapshot at bill time).
// Statement.SHA1 is the hex SHA-1 of the uncompressed bytes, taken as they
// are read; when wantSHA1 is not empty it must match (hex, either case),
// and a file that differs is refused for that before anything else it
// holds (but a limit passed).
//
// The file is read as a stream, a line at a time, never whole: the text
// within statements.ReadLines' limits, a gzip stream within
// statements.LimitRatio's.
//
// Errors: ErrHash for a hash mismatch; ErrFormat for anything that is not
// such a bill (unknown header, with the missing and unexpected columns; a
// malformed cell, naming the line and column; an ID in scientific
// notation; no summary; a corrupt gzip stream; a limit passed, which also
// wraps statements.ErrLimit);
// ErrMismatch when the rows disagree with the summary, naming each figure
// and the difference. Errors reading r are returned wrapped, with none of
// these. The returned Statement is the zero value whenever err is not nil.
func ParseStatement(r io.Reader, wantSHA1 string) (statements.Statement, error) {
	src := &wechatSource{r: r}
	body, closeBody, err := openWeChat(src)
	if err != nil {
		return statements.Statement{}, err
	}
	defer closeBody()
	h := sha1.New() //nolint:gosec // see the import.
	text := io.TeeReader(body, h)
	st, err := parseWeChatText(text)
	if err != nil && !errors.Is(err, statements.ErrFormat) && !errors.Is(err, statements.ErrMismatch) {
		return statements.Statement{}, wechatReadErr(src, "read wechat trade bill", err)
	}
	if err != nil && (wantSHA1 == "" || errors.Is(err, statements.ErrLimit)) {
		return statements.Statement{}, err
	}
	if err != nil {
		// The hash says first whether this is the file asked for: the
		// rest of it, within the limits, goes through the hash.
		if _, derr := io.Copy(io.Discard, io.LimitReader(text, statements.MaxTextBytes)); derr != nil {
			return statements.Statement{}, err
		}
	}
	got := hex.EncodeToString(h.Sum(nil))
	if wantSHA1 != "" && !strings.EqualFold(got, strings.TrimSpace(wantSHA1)) {
		return statements.Statement{}, fmt.Errorf("wechat trade bill: sha1 is %s, want %s: %w", got, wantSHA1, statements.ErrHash)
	}
	if err != nil {
		return statements.Statement{}, err
	}
	st.SHA1 = got
	return st, nil
}

// wechatSource remembers the error of the underlying reader, so that a
// gzip failure can be told apart from a failure to read at all.
type wechatSource struct {
	r   io.Reader
	err error
}

func (s *wechatSource) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// openWeChat returns the uncompressed text of src, gunzipping when src
// starts with the gzip magic bytes, within statements.LimitRatio's limits,
// and the function that closes it.
func openWeChat(src *wechatSource) (io.Reader, func(), error) {
	br := bufio.NewReader(src)
	magic, err := br.Peek(2)
	if err != nil && src.err != nil {
		return nil, nil, fmt.Errorf("read wechat trade bill: %w", src.err)
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return br, func() {}, nil
	}
	in, taken := statements.CountingReader(br)
	zr, err := gzip.NewReader(in)
	if err != nil {
		return nil, nil, wechatReadErr(src, "gunzip wechat trade bill", err)
	}
	return statements.LimitRatio(zr, "gzip stream", taken), func() { _ = zr.Close() }, nil
}

// wechatReadErr wraps a read failure: the source's own error as it is, a
// broken gzip stream as ErrFormat.
func wechatReadErr(src *wechatSource, doing string, err error) error {
	if src.err != nil {
		return fmt.Errorf("%s: %w", doing, src.err)
	}
	var corrupt flate.CorruptInputError
	if errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &corrupt) {
		return fmt.Errorf("%s: %w: %w", doing, err, statements.ErrFormat)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// wechatSlot is one column of a layout: the header names it may carry
// (the first is the one the parser looks it up by).
type wechatSlot []string

// wechatLayout is a header layout: the columns it must have, all of them
// and no others.
type wechatLayout struct {
	format  string
	columns []wechatSlot
	summary []wechatSlot
}

func wechatSlots(names ...string) []wechatSlot {
	out := make([]wechatSlot, len(names))
	for i, n := range names {
		out[i] = strings.Split(n, "|")
	}
	return out
}

var wechatLayouts = []wechatLayout{
	{
		format: FormatAll,
		columns: wechatSlots("交易时间", "公众账号ID", "商户号", "特约商户号", "设备号", "微信订单号", "商户订单号",
			"用户标识", "交易类型", "交易状态", "付款银行", "货币种类", "应结订单金额", "代金券金额", "微信退款单号",
			"商户退款单号", "退款金额", "充值券退款金额", "退款类型", "退款状态", "商品名称", "商户数据包", "手续费",
			"费率", "订单金额", "申请退款金额", "费率备注"),
		summary: wechatSlots(wechatSummaryFirst, "应结订单总金额", "退款总金额", "充值券退款总金额", "手续费总金额",
			"订单总金额", "申请退款总金额"),
	},
	{
		format: FormatAllLegacy,
		// The first name of each slot is the one the parser looks up; the
		// legacy 总金额 stands for both 应结订单金额 and 订单金额.
		columns: wechatSlots("交易时间", "公众账号ID", "商户号", "特约商户号|子商户号", "设备号", "微信订单号",
			"商户订单号", "用户标识", "交易类型", "交易状态", "付款银行", "货币种类", "总金额",
			"企业红包金额|代金券或立减优惠金额", "微信退款单号", "商户退款单号", "退款金额",
			"企业红包退款金额|代金券或立减优惠退款金额", "退款类型", "退款状态", "商品名称", "商户数据包", "手续费",
			"费率"),
		summary: wechatSlots(wechatSummaryFirst, "总交易额", "总退款金额", "总企业红包退款金额|总代金券或立减优惠退款金额",
			"手续费总金额"),
	},
}

// wechatIDColumns are the columns a spreadsheet turns into scientific
// notation when it re-saves the file.
var wechatIDColumns = []string{"商户号", "特约商户号", "微信订单号", "商户订单号", "微信退款单号", "商户退款单号"}

// wechatMatch maps header cells onto a layout's slots. It returns the
// position of each slot by its first name, the slots missing and the cells
// the layout does not have.
func wechatMatch(cells []string, layout []wechatSlot) (pos map[string]int, missing, unexpected []string) {
	at := make(map[string]int, len(cells))
	for i, c := range cells {
		at[c] = i
	}
	used := make(map[int]bool, len(cells))
	pos = make(map[string]int, len(layout))
	for _, slot := range layout {
		found := false
		for _, name := range slot {
			if i, ok := at[name]; ok && !found {
				pos[slot[0]] = i
				used[i] = true
				found = true
			}
		}
		if !found {
			missing = append(missing, strings.Join(slot, " or "))
		}
	}
	for i, c := range cells {
		if !used[i] {
			unexpected = append(unexpected, c)
		}
	}
	return pos, missing, unexpected
}

// wechatHeaderCells splits a header line, refusing duplicate names.
func wechatHeaderCells(lineNo int, line string) ([]string, error) {
	cells := strings.Split(line, ",")
	seen := make(map[string]bool, len(cells))
	for i, c := range cells {
		c = strings.TrimSpace(c)
		if seen[c] {
			return nil, fmt.Errorf("line %d: column %d: header %q appears twice: %w", lineNo, i+1, c, statements.ErrFormat)
		}
		seen[c] = true
		cells[i] = c
	}
	return cells, nil
}

// wechatParser holds one parse's state.
type wechatParser struct {
	layout *wechatLayout
	header []string
	pos    map[string]int
	lines  []statements.Line
	sums   statements.Totals
}

// parseWeChatText parses the uncompressed text r reads, line by line.
func parseWeChatText(r io.Reader) (statements.Statement, error) {
	p := &wechatParser{}
	var summaryHeader []string
	summaryHeaderLine, summaryLine := 0, 0
	var summaryValues []string
	err := statements.ReadLines(r, func(lineNo int, l string) error {
		if lineNo == 1 {
			l = strings.TrimPrefix(l, "\uFEFF")
		}
		if strings.TrimSpace(l) == "" {
			return nil
		}
		switch {
		case p.layout == nil:
			return p.readHeader(lineNo, l)
		case summaryValues != nil:
			return fmt.Errorf("line %d: text after the summary: %w", lineNo, statements.ErrFormat)
		case summaryHeader != nil:
			summaryValues = strings.Split(l, ",")
			summaryLine = lineNo
		case strings.HasPrefix(l, wechatSummaryFirst):
			cells, err := wechatHeaderCells(lineNo, l)
			if err != nil {
				return err
			}
			summaryHeader, summaryHeaderLine = cells, lineNo
		default:
			return p.readRow(lineNo, l)
		}
		return nil
	})
	if err != nil {
		return statements.Statement{}, fmt.Errorf("wechat trade bill: %w", err)
	}
	if p.layout == nil {
		return statements.Statement{}, fmt.Errorf("wechat trade bill: empty file: %w", statements.ErrFormat)
	}
	if summaryHeader == nil {
		return statements.Statement{}, fmt.Errorf("wechat trade bill: no summary line starting %s (truncated?): %w", wechatSummaryFirst, statements.ErrFormat)
	}
	if summaryValues == nil {
		return statements.Statement{}, fmt.Errorf("line %d: summary header without its values line: %w", summaryHeaderLine, statements.ErrFormat)
	}
	totals, err := p.readSummary(summaryHeaderLine, summaryHeader, summaryLine, summaryValues)
	if err != nil {
		return statements.Statement{}, err
	}
	return statements.Statement{
		Channel: Code,
		Format:  p.layout.format,
		Lines:   p.lines,
		Totals:  totals,
	}, nil
}

// readHeader finds the layout of the header line.
func (p *wechatParser) readHeader(lineNo int, line string) error {
	cells, err := wechatHeaderCells(lineNo, line)
	if err != nil {
		return err
	}
	var best string
	bestMiss := -1
	for i := range wechatLayouts {
		l := &wechatLayouts[i]
		pos, missing, unexpected := wechatMatch(cells, l.columns)
		if len(missing) == 0 && len(unexpected) == 0 {
			p.layout, p.header, p.pos = l, cells, pos
			return nil
		}
		if bestMiss < 0 || len(missing)+len(unexpected) < bestMiss {
			bestMiss = len(missing) + len(unexpected)
			best = fmt.Sprintf("closest is %s: missing [%s], unexpected [%s]", l.format,
				strings.Join(missing, ", "), strings.Join(unexpected, ", "))
		}
	}
	return fmt.Errorf("line %d: unknown wechat trade bill header (%s): %w", lineNo, best, statements.ErrFormat)
}

// cell returns the cell of the named column without its backtick.
func (p *wechatParser) cell(lineNo int, cells []string, name string) (string, error) {
	i := p.pos[name]
	c := cells[i]
	if !strings.HasPrefix(c, "`") {
		return "", fmt.Errorf("line %d: column %s (%d): %q lacks the leading backtick: %w", lineNo, name, i+1, c, statements.ErrFormat)
	}
	return c[1:], nil
}

// yuan parses the named column's yuan amount into fen.
func (p *wechatParser) yuan(lineNo int, cells []string, name string) (int64, error) {
	s, err := p.cell(lineNo, cells, name)
	if err != nil {
		return 0, err
	}
	v, err := channels.ParseYuan(s)
	if err != nil {
		return 0, fmt.Errorf("line %d: column %s (%d): %w: %w", lineNo, name, p.pos[name]+1, err, statements.ErrFormat)
	}
	return v, nil
}

// readRow parses one detail row into a Line and adds it to the sums.
func (p *wechatParser) readRow(lineNo int, line string) error {
	cells := strings.Split(line, ",")
	if len(cells) != len(p.header) {
		return fmt.Errorf("line %d: %d cells, the header has %d: %w", lineNo, len(cells), len(p.header), statements.ErrFormat)
	}
	for i, c := range cells {
		if !strings.HasPrefix(c, "`") {
			return fmt.Errorf("line %d: column %s (%d): %q lacks the leading backtick: %w", lineNo, p.header[i], i+1, c, statements.ErrFormat)
		}
	}
	for _, name := range wechatIDColumns {
		s, _ := p.cell(lineNo, cells, name)
		if wechatScientific(s) {
			return fmt.Errorf("line %d: column %s (%d): %q is an ID in scientific notation (re-saved by a spreadsheet?): %w",
				lineNo, name, p.pos[name]+1, s, statements.ErrFormat)
		}
	}
	get := func(name string) string { s, _ := p.cell(lineNo, cells, name); return s }
	legacy := p.layout.format == FormatAllLegacy

	ln := statements.Line{
		LineNo:          lineNo,
		Channel:         Code,
		TradeNo:         get("微信订单号"),
		MerchantOrderNo: get("商户订单号"),
		Currency:        get("货币种类"),
		MerchantID:      get("商户号"),
	}
	if sub := get("特约商户号"); sub != "" && sub != "0" {
		ln.MerchantID = sub // a service provider's sub-merchant
	}
	if ln.TradeNo == "" {
		return fmt.Errorf("line %d: column 微信订单号 (%d): empty: %w", lineNo, p.pos["微信订单号"]+1, statements.ErrFormat)
	}
	t, err := time.ParseInLocation(wechatTimeLayout, get("交易时间"), statements.Beijing)
	if err != nil {
		return fmt.Errorf("line %d: column 交易时间 (%d): %q is not %s: %w", lineNo, p.pos["交易时间"]+1, get("交易时间"), wechatTimeLayout, statements.ErrFormat)
	}
	ln.Time = t.UTC()
	feeText := get("手续费")
	fee, err := parseWeChatFee(feeText)
	if err != nil {
		return fmt.Errorf("line %d: column 手续费 (%d): %q: %w: %w", lineNo, p.pos["手续费"]+1, feeText, err, statements.ErrFormat)
	}
	ln.FeeMicroYuan = fee

	amountCol, settledCol := "订单金额", "应结订单金额"
	refundAmountCol, refundSettledCol := "申请退款金额", "退款金额"
	if legacy {
		amountCol, settledCol, refundAmountCol = "总金额", "总金额", "退款金额"
	}
	switch status := get("交易状态"); status {
	case "SUCCESS", "REVOKED":
		ln.Kind, ln.Status = statements.KindPayment, status
		if ln.Amount, err = p.yuan(lineNo, cells, amountCol); err != nil {
			return err
		}
		if ln.SettledAmount, err = p.yuan(lineNo, cells, settledCol); err != nil {
			return err
		}
	case "REFUND":
		ln.Kind, ln.Status = statements.KindRefund, get("退款状态")
		ln.RefundNo = get("商户退款单号")
		if ln.RefundNo == "" || ln.RefundNo == "0" {
			return fmt.Errorf("line %d: column 商户退款单号 (%d): refund row without a refund number: %w", lineNo, p.pos["商户退款单号"]+1, statements.ErrFormat)
		}
		if ln.Amount, err = p.yuan(lineNo, cells, refundAmountCol); err != nil {
			return err
		}
		if ln.SettledAmount, err = p.yuan(lineNo, cells, refundSettledCol); err != nil {
			return err
		}
	default:
		return fmt.Errorf("line %d: column 交易状态 (%d): unknown status %q: %w", lineNo, p.pos["交易状态"]+1, status, statements.ErrFormat)
	}
	if err := p.add(lineNo, ln); err != nil {
		return err
	}
	p.lines = append(p.lines, ln.Detached())
	return nil
}

// add adds a line to the running sums, refusing an overflow.
func (p *wechatParser) add(lineNo int, ln statements.Line) error {
	s := &p.sums
	s.Lines++
	ok := true
	if ln.Kind == statements.KindPayment {
		s.Payments++
		s.PaymentAmount, ok = wechatAdd(s.PaymentAmount, ln.Amount, ok)
		s.SettledPayments, ok = wechatAdd(s.SettledPayments, ln.SettledAmount, ok)
	} else {
		s.Refunds++
		s.RefundAmount, ok = wechatAdd(s.RefundAmount, ln.Amount, ok)
		s.SettledRefunds, ok = wechatAdd(s.SettledRefunds, ln.SettledAmount, ok)
	}
	s.FeeMicroYuan, ok = wechatAdd(s.FeeMicroYuan, ln.FeeMicroYuan, ok)
	if !ok {
		return fmt.Errorf("line %d: the sums overflow: %w", lineNo, statements.ErrFormat)
	}
	return nil
}

func wechatAdd(a, b int64, ok bool) (int64, bool) {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		return c, false
	}
	return c, ok
}

// readSummary parses the summary lines and checks the rows against them.
// It returns the totals: the summary's figures, and where the summary
// states none (the kinds' counts; the legacy format's 订单金额 and
// 申请退款金额), the rows' own.
func (p *wechatParser) readSummary(headerLine int, header []string, valuesLine int, values []string) (statements.Totals, error) {
	pos, missing, unexpected := wechatMatch(header, p.layout.summary)
	if len(missing) > 0 || len(unexpected) > 0 {
		return statements.Totals{}, fmt.Errorf("line %d: unknown %s summary header: missing [%s], unexpected [%s]: %w", headerLine,
			p.layout.format, strings.Join(missing, ", "), strings.Join(unexpected, ", "), statements.ErrFormat)
	}
	if len(values) != len(header) {
		return statements.Totals{}, fmt.Errorf("line %d: %d summary values, the summary header has %d: %w", valuesLine, len(values), len(header), statements.ErrFormat)
	}
	val := func(name string) (string, error) {
		i := pos[name]
		c := values[i]
		if !strings.HasPrefix(c, "`") {
			return "", fmt.Errorf("line %d: column %s (%d): %q lacks the leading backtick: %w", valuesLine, name, i+1, c, statements.ErrFormat)
		}
		return c[1:], nil
	}
	yuan := func(name string) (int64, error) {
		s, err := val(name)
		if err != nil {
			return 0, err
		}
		v, err := channels.ParseYuan(s)
		if err != nil {
			return 0, fmt.Errorf("line %d: column %s (%d): %w: %w", valuesLine, name, pos[name]+1, err, statements.ErrFormat)
		}
		return v, nil
	}

	got := p.sums
	want := got
	countText, err := val(wechatSummaryFirst)
	if err != nil {
		return statements.Totals{}, err
	}
	if want.Lines, err = parseWeChatCount(countText); err != nil {
		return statements.Totals{}, fmt.Errorf("line %d: column %s (%d): %q: %w: %w", valuesLine, wechatSummaryFirst, pos[wechatSummaryFirst]+1, countText, err, statements.ErrFormat)
	}
	feeText, err := val("手续费总金额")
	if err != nil {
		return statements.Totals{}, err
	}
	if want.FeeMicroYuan, err = parseWeChatFee(feeText); err != nil {
		return statements.Totals{}, fmt.Errorf("line %d: column 手续费总金额 (%d): %q: %w: %w", valuesLine, pos["手续费总金额"]+1, feeText, err, statements.ErrFormat)
	}
	type figure struct {
		name      string
		want, got *int64
	}
	var figures []figure
	if p.layout.format == FormatAllLegacy {
		figures = []figure{
			{"总交易额", &want.SettledPayments, &got.SettledPayments},
			{"总退款金额", &want.SettledRefunds, &got.SettledRefunds},
		}
	} else {
		figures = []figure{
			{"应结订单总金额", &want.SettledPayments, &got.SettledPayments},
			{"退款总金额", &want.SettledRefunds, &got.SettledRefunds},
			{"订单总金额", &want.PaymentAmount, &got.PaymentAmount},
			{"申请退款总金额", &want.RefundAmount, &got.RefundAmount},
		}
	}
	for _, f := range figures {
		if *f.want, err = yuan(f.name); err != nil {
			return statements.Totals{}, err
		}
	}
	if p.layout.format == FormatAllLegacy {
		// Legacy rows carry one amount for both: the summary's figure
		// stands for both sums.
		want.PaymentAmount, want.RefundAmount = want.SettledPayments, want.SettledRefunds
	}

	var diffs []string
	if want.Lines != got.Lines {
		diffs = append(diffs, fmt.Sprintf("%s states %d rows, the file has %d (difference %+d)",
			wechatSummaryFirst, want.Lines, got.Lines, got.Lines-want.Lines))
	}
	for _, f := range figures {
		if *f.want != *f.got {
			diffs = append(diffs, fmt.Sprintf("%s states %s, the rows sum to %s (difference %s)",
				f.name, wechatFen(*f.want), wechatFen(*f.got), wechatFen(*f.got-*f.want)))
		}
	}
	if want.FeeMicroYuan != got.FeeMicroYuan {
		diffs = append(diffs, fmt.Sprintf("手续费总金额 states %s, the rows sum to %s (difference %s)",
			wechatMicroYuan(want.FeeMicroYuan), wechatMicroYuan(got.FeeMicroYuan), wechatFeeDiff(got.FeeMicroYuan, want.FeeMicroYuan)))
	}
	if len(diffs) > 0 {
		return statements.Totals{}, fmt.Errorf("line %d: %s: %w", valuesLine, strings.Join(diffs, "; "), statements.ErrMismatch)
	}
	return want, nil
}

// wechatScientific reports whether s looks like a number a spreadsheet wrote
// in scientific notation: 4.00123E+27, 4E27, 4.2e-05.
func wechatScientific(s string) bool {
	i := 0
	digits := 0
	for i < len(s) && wechatDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && wechatDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 || i >= len(s) || (s[i] != 'E' && s[i] != 'e') {
		return false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if i >= len(s) {
		return false
	}
	for ; i < len(s); i++ {
		if !wechatDigit(s[i]) {
			return false
		}
	}
	return true
}

func wechatDigit(c byte) bool { return c >= '0' && c <= '9' }

// maxWeChatFee bounds a fee, in 0.00001 yuan, to MaxAmount fen.
const maxWeChatFee = channels.MaxAmount * 1000

// parseWeChatFee parses a signed yuan amount with at most five decimals
// ("0.60000", "-0.18000", "0", "0.0") exactly into units of 0.00001 yuan.
// No plus sign, spaces, exponent, leading zeros or bare dot; at most
// MaxAmount fen in magnitude.
func parseWeChatFee(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') || (hasDot && (frac == "" || len(frac) > 5)) {
		return 0, errors.New("not a fee with at most five decimals")
	}
	if len(intPart) > 15 {
		return 0, errors.New("fee too large")
	}
	var v int64
	for _, part := range []string{intPart, frac + strings.Repeat("0", 5-len(frac))} {
		for i := 0; i < len(part); i++ {
			if !wechatDigit(part[i]) {
				return 0, errors.New("not a fee with at most five decimals")
			}
			v = v*10 + int64(part[i]-'0')
		}
	}
	if v > maxWeChatFee {
		return 0, errors.New("fee too large")
	}
	if neg {
		v = -v
	}
	return v, nil
}

// parseWeChatCount parses the summary's row count: digits, and the ".0"
// that older bills write after counts.
func parseWeChatCount(s string) (int, error) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if hasDot && strings.Trim(frac, "0") != "" || hasDot && frac == "" {
		return 0, errors.New("not a whole count")
	}
	if intPart == "" || len(intPart) > 9 || (len(intPart) > 1 && intPart[0] == '0') {
		return 0, errors.New("not a count")
	}
	n, err := strconv.Atoi(intPart)
	if err != nil || n < 0 || strings.ContainsAny(intPart, "+-") {
		return 0, errors.New("not a count")
	}
	return n, nil
}

// wechatFen writes fen as signed yuan with two decimals.
func wechatFen(v int64) string { return wechatScaled(v, 100, 2) }

// wechatMicroYuan writes 0.00001-yuan units as signed yuan with five
// decimals.
func wechatMicroYuan(v int64) string { return wechatScaled(v, 100000, 5) }

func wechatScaled(v, scale int64, places int) string {
	q, r := v/scale, v%scale
	sign := ""
	if v < 0 {
		sign, q, r = "-", -q, -r
	}
	return fmt.Sprintf("%s%d.%0*d", sign, q, places, r)
}

// wechatFeeDiff writes got − want in 0.00001-yuan units, which the rows'
// signed fee sum could make overflow.
func wechatFeeDiff(got, want int64) string {
	d, ok := wechatAdd(got, -want, true)
	if !ok || want == math.MinInt64 {
		return "beyond int64"
	}
	return wechatMicroYuan(d)
}
