package statementsample

import (
	"cmp"
	"crypto/sha1" //nolint:gosec // a source of fake digits, not a hash of anything secret
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/statements"
)

// File is a written statement file and what statements.Parse makes of it.
type File struct {
	// Data is the file as the channel serves it (the Alipay zip, the plain
	// WeChat bill, the Shouqianba lines).
	Data []byte
	// Want is the Statement statements.Parse returns for Data: the lines
	// given, numbered by their line in the file, their times in UTC at the
	// precision the file writes (seconds; milliseconds for Shouqianba),
	// the totals the summary or footer states, and the SHA-1.
	Want statements.Statement
}

// ErrUnwritable is wrapped by a writer's error when a line cannot be
// written in the channel's layout: another channel or kind, an amount out
// of range, an identifier the layout cannot carry (empty, a separator, a
// number a spreadsheet would mangle), a status the file cannot state.
var ErrUnwritable = errors.New("line cannot be written in the statement's layout")

// Unwritable is the refusal of line i (0-based) that a layout cannot
// carry: it wraps ErrUnwritable.
func Unwritable(i int, format string, args ...any) error {
	return fmt.Errorf("line %d: %s: %w", i+1, fmt.Sprintf(format, args...), ErrUnwritable)
}

// FromEvents returns the lines channel ch's statements report for the
// events of ch among events (each channel's sample.Bodies.StatementLines) (decoded callbacks; the same key twice counts
// once, the first wins; events of other channels are skipped), sorted by
// time, then trade number, payments before refunds, then refund number:
//
//   - WECHAT: a SUCCESS payment line per payment (Amount and SettledAmount
//     the order total) and a SUCCESS refund line per refund (its own
//     amount), each with WeChatFeeRate's fee, dated by the event's time;
//   - ALIPAY: a payment line per payment and a refund line per refund whose
//     amount is the refund's own, worked out from the cumulative amounts
//     the trade's refund callbacks report, in cumulative order; no fee;
//   - SQB: one order line per trade, as /upay/v2/query reports it once
//     every event has happened: total_amount the order total, net_amount
//     the total less the largest cumulative refund, order_status PAID,
//     PARTIAL_REFUNDED or REFUNDED, finish_time the trade's last event.
//
// Amounts are fen; currency CNY. It fails on an event that is not valid
// (channels.Event.Validate) and on Alipay refunds whose cumulative amounts
// do not grow.
func FromEvents(ch channels.Channel, events []channels.Event) ([]statements.Line, error) {
	seen := map[string]bool{}
	var evs []channels.Event
	for _, e := range events {
		if e.Channel != ch {
			continue
		}
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("statement lines from events: %s: %w", e.Key, err)
		}
		id := fmt.Sprintf("%d/%s", e.TenantID, e.Key)
		if seen[id] {
			continue
		}
		seen[id] = true
		evs = append(evs, e)
	}
	b, ok := sample.BodiesOf(ch)
	if !ok || b.StatementLines == nil {
		return nil, fmt.Errorf("statement lines from events: unknown channel %q", ch)
	}
	lines, err := b.StatementLines(evs)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(lines, func(a, b statements.Line) int {
		return cmp.Or(a.Time.Compare(b.Time), strings.Compare(a.TradeNo, b.TradeNo),
			strings.Compare(string(a.Kind), string(b.Kind)), // PAYMENT before REFUND
			strings.Compare(a.RefundNo, b.RefundNo))
	})
	return lines, nil
}

// Days returns the Beijing-time days (YYYY-MM-DD) lines fall on, in order.
func Days(lines []statements.Line) []string {
	var days []string
	for _, l := range lines {
		days = append(days, Day(l.Time))
	}
	slices.Sort(days)
	return slices.Compact(days)
}

// OnDay returns the lines whose time falls on the Beijing-time day
// (YYYY-MM-DD), in their order.
func OnDay(lines []statements.Line, day string) []statements.Line {
	var out []statements.Line
	for _, l := range lines {
		if Day(l.Time) == day {
			out = append(out, l)
		}
	}
	return out
}

// Day is t's Beijing-time day, YYYY-MM-DD, as statements date their lines
// (statements.Day).
func Day(t time.Time) string { return statements.Day(t) }

// Yuan writes fen as signed yuan with two decimals: "25.80", "-0.01".
func Yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}

// MicroYuan writes 0.00001-yuan units as signed yuan with five decimals.
func MicroYuan(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%05d", sign, v/100000, v%100000)
}

// CheckAmount refuses an amount the parsers refuse.
func CheckAmount(i int, what string, v int64) error {
	if v < 0 || v > channels.MaxAmount {
		return Unwritable(i, "%s %d fen is outside [0, %d]", what, v, channels.MaxAmount)
	}
	return nil
}

// CheckCell refuses a cell value that a comma-separated layout cannot
// carry, or that a spreadsheet would have turned into scientific notation
// (the parsers refuse those).
func CheckCell(i int, what, v string, required bool) error {
	switch {
	case v == "" && required:
		return Unwritable(i, "%s is empty", what)
	case strings.ContainsAny(v, ",\"`\t\r\n"):
		return Unwritable(i, "%s %q holds a separator, quote, backtick or line break", what, v)
	case strings.TrimSpace(v) != v:
		return Unwritable(i, "%s %q has surrounding spaces", what, v)
	case scientific(v):
		return Unwritable(i, "%s %q reads as a number in scientific notation", what, v)
	}
	return nil
}

// scientific reports whether s looks like 4.2E+27.
func scientific(s string) bool {
	mant, exp, ok := strings.Cut(strings.ToUpper(s), "E")
	if !ok || mant == "" || exp == "" {
		return false
	}
	exp = strings.TrimLeft(exp, "+-")
	digits := func(x string) bool {
		return x != "" && strings.Trim(x, "0123456789") == ""
	}
	intPart, frac, dot := strings.Cut(mant, ".")
	return digits(exp) && digits(intPart+frac) && (!dot || intPart != "" || frac != "")
}

// EventLine is the statement line of e: of kind, for amount, SUCCESS,
// dated by the event's time. A channel's StatementLines builds on it.
func EventLine(e channels.Event, kind statements.Kind, amount int64) statements.Line {
	return statements.Line{
		Channel: e.Channel, Kind: kind, TradeNo: e.TradeNo, MerchantOrderNo: e.MerchantOrderNo, RefundNo: e.RefundNo,
		Amount: amount, SettledAmount: amount, Status: "SUCCESS", Time: e.OccurredAt, Currency: e.Currency,
	}
}

// CheckAmounts checks line i's amounts for a writer: a line's amounts: both in range, the settled one not
// above the other.
func CheckAmounts(i int, l statements.Line) error {
	if err := CheckAmount(i, "amount", l.Amount); err != nil {
		return err
	}
	if err := CheckAmount(i, "settled amount", l.SettledAmount); err != nil {
		return err
	}
	if l.SettledAmount > l.Amount {
		return Unwritable(i, "settled amount %d above the amount %d", l.SettledAmount, l.Amount)
	}
	return nil
}

// DigitsOf is a deterministic string of n decimal digits derived from seed.
func DigitsOf(seed string, n int) string {
	sum := sha1.Sum([]byte(seed)) //nolint:gosec // a source of fake digits, not a hash of anything secret.
	out := make([]byte, n)
	for i := range out {
		out[i] = '0' + sum[i%len(sum)]%10
	}
	return string(out)
}
