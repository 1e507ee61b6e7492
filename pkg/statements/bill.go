package statements

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrDay is wrapped by BillDay's error for a bill that is not wholly of
// one day: a line dated outside the day the bill is of, a window that is
// not one Beijing day, a day given that is not the one the file states,
// or no day stated or given and lines on several days.
var ErrDay = errors.New("statement is not of one day")

// ErrRepeated is wrapped by the error of a statement holding the same
// payment, refund or order (Identity) twice; the message names both
// lines.
var ErrRepeated = errors.New("statement line repeated")

// Identity names a line across files: its kind, trade number and refund
// number, e.g. `REFUND 4200000001 refund "rf-1"`. A line number is not an
// identity: a corrected file may order its lines differently.
func Identity(kind Kind, tradeNo, refundNo string) string {
	id := string(kind) + " " + tradeNo
	if refundNo != "" {
		id += " refund " + strconv.Quote(refundNo)
	}
	return id
}

// Identity is l's Identity.
func (l Line) Identity() string { return Identity(l.Kind, l.TradeNo, l.RefundNo) }

// Day is t's Beijing-time day, YYYY-MM-DD, the day a statement dates a
// line at t by.
func Day(t time.Time) string { return t.In(Beijing).Format(time.DateOnly) }

// BillDay returns the Beijing-time day (YYYY-MM-DD) s is the bill of and
// checks that every line lies on it. A statement of a channel whose
// refunds are per order (RefundLinesPerOrder: Shouqianba's query
// responses, dated order by order) is no bill of a day: "" and no error.
//
// The day is the one the file states (From, and To when set, which must
// be one whole Beijing day: Alipay's window), or the one the caller gives
// (Day: WeChat's bill_date, which the file does not state); when both are
// there they must agree. When neither is, the day is that of the lines,
// which must all fall on one (a caller that knows the day gives it: the
// lines of a bill holding nothing but a stray row would otherwise name
// the wrong day).
//
// Errors wrap ErrDay: a line outside the day (the message names the first
// such line, its date and the bill's day, and counts the others), a
// window that is not one day, a day given that is malformed or not the
// file's, lines on several days with no day stated or given (naming a line
// of each of two days), or no lines and no day.
func (s Statement) BillDay() (string, error) {
	if RefundLinesOf(s.Channel) == RefundLinesPerOrder {
		return "", nil
	}
	day := s.Day
	if day != "" {
		if _, err := time.ParseInLocation(time.DateOnly, day, Beijing); err != nil {
			return "", fmt.Errorf("%s bill: day %q is not YYYY-MM-DD: %w", s.Channel, day, ErrDay)
		}
	}
	if !s.From.IsZero() {
		from := s.From.In(Beijing)
		stated := Day(from)
		next := time.Date(from.Year(), from.Month(), from.Day()+1, 0, 0, 0, 0, Beijing)
		if from.Hour() != 0 || from.Minute() != 0 || from.Second() != 0 || from.Nanosecond() != 0 ||
			(!s.To.IsZero() && !s.To.Equal(next)) {
			return "", fmt.Errorf("%s bill: its window [%s, %s) is not one Beijing day: %w", s.Channel,
				from.Format(time.DateTime), s.To.In(Beijing).Format(time.DateTime), ErrDay)
		}
		if day != "" && day != stated {
			return "", fmt.Errorf("%s bill: the file states the day %s, not %s: %w", s.Channel, stated, day, ErrDay)
		}
		day = stated
	}
	if day == "" {
		if len(s.Lines) == 0 {
			return "", fmt.Errorf("%s bill: it has no lines and states no day: %w", s.Channel, ErrDay)
		}
		first := s.Lines[0]
		for _, l := range s.Lines[1:] {
			if Day(l.Time) != Day(first.Time) {
				return "", fmt.Errorf("%s bill: line %d is dated %s and line %d %s: a bill is one day, and it states none; say which: %w",
					s.Channel, first.LineNo, Day(first.Time), l.LineNo, Day(l.Time), ErrDay)
			}
		}
		day = Day(first.Time)
	}
	var outside []Line
	for _, l := range s.Lines {
		if Day(l.Time) != day {
			outside = append(outside, l)
		}
	}
	if len(outside) > 0 {
		more := ""
		if n := len(outside) - 1; n > 0 {
			more = fmt.Sprintf(" (and %d more lines outside it)", n)
		}
		return "", fmt.Errorf("%s bill: line %d is dated %s, outside the bill's day %s%s: %w",
			s.Channel, outside[0].LineNo, Day(outside[0].Time), day, more, ErrDay)
	}
	return day, nil
}

// CheckUnique returns an error wrapping ErrRepeated when two lines of s
// are the same payment, refund or order (the same Identity): a bill holds
// each once, and a repeated row would count twice against one posting.
// The message names the first repeat's line and the line it repeats, and
// counts the other repeats.
func (s Statement) CheckUnique() error {
	first := make(map[string]int, len(s.Lines))
	var repeat, of, n int
	var id string
	for _, l := range s.Lines {
		k := l.Identity()
		if at, ok := first[k]; ok {
			if n == 0 {
				repeat, of, id = l.LineNo, at, k
			}
			n++
			continue
		}
		first[k] = l.LineNo
	}
	if n == 0 {
		return nil
	}
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (and %d more repeated lines)", n-1)
	}
	return fmt.Errorf("%s statement: line %d repeats line %d (%s)%s: %w", s.Channel, repeat, of, id, more, ErrRepeated)
}
