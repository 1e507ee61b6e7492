package sqb

import (
	"crypto/sha1" //nolint:gosec // the channels' statement hashes are SHA-1; this is an integrity check, not a signature
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// FormatQuery is the Format of a Statement parsed by ParseStatement.
const FormatQuery = "sqb-query"

// Shouqianba's success codes: the HTTP-level result_code and the
// business-level biz_response.result_code of a query response.
const (
	sqbHTTPSuccess = ResultOK
	sqbBizSuccess  = BizSuccess
	// sqbOrderStatusInvalid is the one documented order_status that
	// pkg/channels has no constant for.
	sqbOrderStatusInvalid = "INVALID_STATUS_CODE"
	// sqbTimeDigits is the length of an epoch-milliseconds finish_time.
	sqbTimeDigits = 13
)

// sqbFinal reports whether an order_status is final (Shouqianba's
// "哪些状态是订单最终状态": PAID, PAY_CANCELED, REFUNDED, PARTIAL_REFUNDED,
// CANCELED), and known whether it is documented at all.
func sqbFinal(status string) (final, known bool) {
	switch status {
	case Paid, PayCanceled, Refunded,
		PartialRefunded, Canceled:
		return true, true
	case Created, PayError, RefundError,
		CancelError, CancelInProgress, sqbOrderStatusInvalid:
		return false, true
	}
	return false, false
}

// Settled reports whether a Shouqianba order_status says the channel
// settled the order's payment (possibly refunded since): PAID,
// PARTIAL_REFUNDED or REFUNDED. CANCELED does not say whether the payment
// had gone through (a cancel of a paid order reverses it, of an unpaid one
// moves nothing), PAY_CANCELED and PAY_ERROR are payments that failed, and
// the other documented statuses are not final: for none of them did the
// channel settle money that the merchant keeps. It is the one rule by which
// ParseStatement's Totals count an order and by which reconciliation expects a
// payment posting for it.
func Settled(status string) bool {
	switch status {
	case Paid, PartialRefunded, Refunded:
		return true
	}
	return false
}

// sqbQueryResponse is one /upay/v2/query response as Shouqianba returns
// it: {"result_code":"200","biz_response":{"result_code":"SUCCESS",
// "data":{...}}}. Every value of interest is a JSON string. The query
// client reads the same answer with its own order type (sqbAnswer).
type sqbQueryResponse = sqbAPIResponse[sqbQueryData]

// sqbQueryData is the order a query response reports. Pointers tell a
// missing field from an empty one.
type sqbQueryData struct {
	SN          *string `json:"sn"`
	ClientSN    *string `json:"client_sn"`
	OrderStatus *string `json:"order_status"`
	TotalAmount *string `json:"total_amount"`
	NetAmount   *string `json:"net_amount"`
	FinishTime  *string `json:"finish_time"`
	TerminalSN  *string `json:"terminal_sn"`
}

// ParseStatement parses a file of Shouqianba order query responses: Shouqianba
// publishes no statement file, so the operator collects one /upay/v2/query
// response per order, one whole JSON response a line (UTF-8; LF or CRLF; a
// leading byte-order mark is ignored; blank lines are skipped).
//
// Every response must have the HTTP-level result_code "200" and
// biz_response.result_code "SUCCESS"; its biz_response.data becomes one
// Line of Kind KindOrder: TradeNo is sn (the trade number the callbacks key
// on, not the WeChat/Alipay trade_no), MerchantOrderNo client_sn, Amount
// total_amount and SettledAmount net_amount (both integer fen as strings,
// parsed exactly like the callbacks' with channels.ParseFen: no sign, no
// decimals, at most channels.MaxAmount; net_amount at most total_amount),
// Status order_status, Time finish_time (13-digit epoch milliseconds, in
// UTC), Currency "CNY", MerchantID terminal_sn (empty when absent) and
// FeeMicroYuan 0, since the query API exposes no fee.
//
// Any documented order_status is kept as it is, final (PAID, PAY_CANCELED,
// REFUNDED, PARTIAL_REFUNDED, CANCELED) or not (CREATED, PAY_ERROR,
// REFUND_ERROR, CANCEL_ERROR, CANCEL_INPROGRESS, INVALID_STATUS_CODE): the
// caller decides what a non-final order means, and should query it again.
// A non-final order may lack finish_time (its Time is then zero); a final
// one may not. An undocumented order_status is refused. The amounts are
// not checked against the status (a PAID order whose net_amount is below
// its total_amount is kept as it is).
//
// The same sn on two lines is refused, unless the two lines are
// byte-identical (the same response saved twice): then the later one is
// ignored and appears nowhere in the Statement.
//
// The file has no summary of its own, so Totals are computed from the
// lines: Lines counts every order; Payments, PaymentAmount (total_amount),
// SettledPayments (net_amount) and RefundAmount (the refunded part,
// total_amount − net_amount) count only the orders whose payment the
// channel settled (Settled: PAID, PARTIAL_REFUNDED, REFUNDED), the
// orders reconciliation expects a payment posting for. A CANCELED order is
// neither a payment received nor a refund: the cancel does not say whether
// the payment had gone through, and either way the trade nets to zero; a
// failed or unfinished order moved no money the merchant keeps. Refunds and
// SettledRefunds stay zero. SHA1 is over the bytes read, taken as they
// go by: r is read a line at a time, never whole, within
// statements.ReadLines' limits, and of a line only the hash is kept to
// tell a response saved twice.
//
// Errors: a read error is returned wrapped; anything else (malformed JSON,
// a failing result_code, a missing or malformed field, a duplicate sn)
// wraps ErrFormat, and its message names the line number and the field or
// the byte column.
func ParseStatement(r io.Reader) (statements.Statement, error) {
	h := sha1.New() //nolint:gosec // see the import
	st := statements.Statement{Channel: Code, Format: FormatQuery}
	// seen maps an sn to the line that first had it and the hash of that
	// line's bytes (a line may be 64 KiB: its hash is what is kept).
	type seenLine struct {
		lineNo int
		raw    [sha256.Size]byte
	}
	seen := make(map[string]seenLine)
	err := statements.ReadLines(io.TeeReader(r, h), func(lineNo int, text string) error {
		if lineNo == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		if strings.TrimSpace(text) == "" {
			return nil
		}
		raw := sha256.Sum256([]byte(text))
		line, err := parseSQBLine(lineNo, []byte(text))
		if err != nil {
			return err
		}
		if first, dup := seen[line.TradeNo]; dup {
			if first.raw == raw {
				return nil
			}
			return fmt.Errorf("sqb query line %d: sn %q already on line %d with a different response: %w",
				lineNo, line.TradeNo, first.lineNo, statements.ErrFormat)
		}
		seen[line.TradeNo] = seenLine{lineNo: lineNo, raw: raw}
		if err := addTotals(&st.Totals, line); err != nil {
			return fmt.Errorf("sqb query line %d: %w", lineNo, err)
		}
		st.Lines = append(st.Lines, line.Detached())
		return nil
	})
	if err != nil && !errors.Is(err, statements.ErrFormat) {
		return statements.Statement{}, fmt.Errorf("read sqb query responses: %w", err)
	}
	if err != nil {
		return statements.Statement{}, err
	}
	st.SHA1 = hex.EncodeToString(h.Sum(nil))
	return st, nil
}

// addTotals adds one order to the totals, refusing a sum beyond int64: every
// order is a line, and only one the channel settled (Settled) adds a
// payment and its refunded part.
func addTotals(t *statements.Totals, l statements.Line) error {
	if !Settled(l.Status) {
		t.Lines++
		return nil
	}
	refunded := l.Amount - l.SettledAmount
	if t.PaymentAmount > math.MaxInt64-l.Amount || t.SettledPayments > math.MaxInt64-l.SettledAmount ||
		t.RefundAmount > math.MaxInt64-refunded {
		return fmt.Errorf("totals overflow: %w", statements.ErrFormat)
	}
	t.Lines++
	t.Payments++
	t.PaymentAmount += l.Amount
	t.SettledPayments += l.SettledAmount
	t.RefundAmount += refunded
	return nil
}

// parseSQBLine turns one non-blank line into a Line.
func parseSQBLine(lineNo int, raw []byte) (statements.Line, error) {
	fail := func(field, format string, args ...any) error {
		return fmt.Errorf("sqb query line %d: %s: %s: %w", lineNo, field, fmt.Sprintf(format, args...), statements.ErrFormat)
	}
	if !utf8.Valid(raw) {
		return statements.Line{}, fmt.Errorf("sqb query line %d: not valid UTF-8: %w", lineNo, statements.ErrFormat)
	}
	var resp sqbQueryResponse
	if err := channels.DecodeJSON(raw, &resp); err != nil {
		return statements.Line{}, sqbJSONError(lineNo, err)
	}
	if resp.ResultCode == nil || *resp.ResultCode != sqbHTTPSuccess {
		return statements.Line{}, fail("result_code", "%s, want %q%s", sqbQuoteOpt(resp.ResultCode), sqbHTTPSuccess,
			sqbErrorDetail(resp.ErrorCode, resp.ErrorMessage))
	}
	biz := resp.BizResponse
	if biz == nil {
		return statements.Line{}, fail("biz_response", "missing")
	}
	if biz.ResultCode == nil || *biz.ResultCode != sqbBizSuccess {
		return statements.Line{}, fail("biz_response.result_code", "%s, want %q%s", sqbQuoteOpt(biz.ResultCode), sqbBizSuccess,
			sqbErrorDetail(biz.ErrorCode, biz.ErrorMessage))
	}
	d := biz.Data
	if d == nil {
		return statements.Line{}, fail("biz_response.data", "missing")
	}
	const prefix = "biz_response.data."
	sn, err := sqbID(d.SN)
	if err != nil {
		return statements.Line{}, fail(prefix+"sn", "%v", err)
	}
	clientSN, err := sqbID(d.ClientSN)
	if err != nil {
		return statements.Line{}, fail(prefix+"client_sn", "%v", err)
	}
	if d.OrderStatus == nil || *d.OrderStatus == "" {
		return statements.Line{}, fail(prefix+"order_status", "missing")
	}
	status := *d.OrderStatus
	final, known := sqbFinal(status)
	if !known {
		return statements.Line{}, fail(prefix+"order_status", "%q is not a documented order status", status)
	}
	total, err := sqbAmount(d.TotalAmount)
	if err != nil {
		return statements.Line{}, fail(prefix+"total_amount", "%v", err)
	}
	net, err := sqbAmount(d.NetAmount)
	if err != nil {
		return statements.Line{}, fail(prefix+"net_amount", "%v", err)
	}
	if net > total {
		return statements.Line{}, fail(prefix+"net_amount", "%d exceeds total_amount %d", net, total)
	}
	var terminal string
	if d.TerminalSN != nil {
		terminal = *d.TerminalSN
	}
	var at time.Time
	switch {
	case d.FinishTime != nil && *d.FinishTime != "":
		if at, err = sqbMillis(*d.FinishTime); err != nil {
			return statements.Line{}, fail(prefix+"finish_time", "%v", err)
		}
	case final:
		return statements.Line{}, fail(prefix+"finish_time", "missing for final order_status %s", status)
	}
	return statements.Line{
		LineNo:          lineNo,
		Channel:         Code,
		Kind:            statements.KindOrder,
		TradeNo:         sn,
		MerchantOrderNo: clientSN,
		Amount:          total,
		SettledAmount:   net,
		Status:          status,
		Time:            at,
		Currency:        "CNY",
		MerchantID:      terminal,
	}, nil
}

// sqbJSONError names the line and, where encoding/json says, the byte
// column or the field of a JSON error.
func sqbJSONError(lineNo int, err error) error {
	if _, repeated := channels.KindOf(err); repeated {
		return fmt.Errorf("sqb query line %d: %w: %w", lineNo, errors.Unwrap(err), statements.ErrFormat)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("sqb query line %d, column %d: malformed JSON: %w: %w", lineNo, syn.Offset, err, statements.ErrFormat)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return fmt.Errorf("sqb query line %d, column %d: the response is a JSON %s, not an object: %w",
				lineNo, typ.Offset, typ.Value, statements.ErrFormat)
		}
		return fmt.Errorf("sqb query line %d, column %d: %s: JSON %s where a %s belongs: %w",
			lineNo, typ.Offset, typ.Field, typ.Value, typ.Type, statements.ErrFormat)
	}
	return fmt.Errorf("sqb query line %d: malformed JSON: %w: %w", lineNo, err, statements.ErrFormat)
}

// sqbErrorDetail renders a response's error_code and error_message, if any.
func sqbErrorDetail(code, msg string) string {
	if code == "" && msg == "" {
		return ""
	}
	return fmt.Sprintf(" (error_code %q, error_message %q)", code, msg)
}

// sqbQuoteOpt quotes an optional string, or says it is missing.
func sqbQuoteOpt(s *string) string {
	if s == nil {
		return "missing"
	}
	return fmt.Sprintf("%q", *s)
}

// sqbID checks an identifier: present, at most channels.MaxIDLen bytes,
// without control characters or surrounding spaces (the rules the
// callbacks' identifiers follow).
func sqbID(p *string) (string, error) {
	if p == nil || *p == "" {
		return "", errors.New("missing")
	}
	v := *p
	if len(v) > channels.MaxIDLen {
		return "", fmt.Errorf("%d bytes, at most %d", len(v), channels.MaxIDLen)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", fmt.Errorf("%q contains a control character", v)
		}
	}
	if v[0] == ' ' || v[len(v)-1] == ' ' {
		return "", fmt.Errorf("%q has surrounding spaces", v)
	}
	return v, nil
}

// sqbAmount parses a fen amount written as a JSON string.
func sqbAmount(p *string) (int64, error) {
	if p == nil {
		return 0, errors.New("missing")
	}
	return channels.ParseFen(*p)
}

// sqbMillis parses a 13-digit epoch-milliseconds time into UTC.
func sqbMillis(s string) (time.Time, error) {
	if len(s) != sqbTimeDigits {
		return time.Time{}, fmt.Errorf("%q is not %d-digit epoch milliseconds", s, sqbTimeDigits)
	}
	var ms int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return time.Time{}, fmt.Errorf("%q is not %d-digit epoch milliseconds", s, sqbTimeDigits)
		}
		ms = ms*10 + int64(c-'0')
	}
	if s[0] == '0' {
		return time.Time{}, fmt.Errorf("%q is not %d-digit epoch milliseconds", s, sqbTimeDigits)
	}
	return time.UnixMilli(ms).UTC(), nil
}
