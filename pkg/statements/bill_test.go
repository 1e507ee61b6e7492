package statements_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// billLine is a payment line numbered n of trade, at h:00 Beijing on
// day (YYYY-MM-DD).
func billLine(t *testing.T, n int, trade, day string, h int) statements.Line {
	t.Helper()
	d, err := time.ParseInLocation(time.DateOnly, day, statements.Beijing)
	require.NoError(t, err)
	return statements.Line{LineNo: n, Kind: statements.KindPayment, TradeNo: trade, Time: d.Add(time.Duration(h) * time.Hour).UTC()}
}

// TestBillDay: a bill is the day it states or is given, every line on it;
// anything else is refused by line, date and day.
func TestBillDay(t *testing.T) {
	window := func(st statements.Statement, day string, days int) statements.Statement {
		from, err := time.ParseInLocation(time.DateOnly, day, statements.Beijing)
		require.NoError(t, err)
		st.From, st.To = from.UTC(), from.AddDate(0, 0, days).UTC()
		return st
	}
	wx := func(day string, lines ...statements.Line) statements.Statement {
		return statements.Statement{Channel: channels.WeChat, Day: day, Lines: lines}
	}
	ali := func(day string, lines ...statements.Line) statements.Statement {
		return window(statements.Statement{Channel: channels.Alipay, Lines: lines}, day, 1)
	}
	l := func(n int, day string, h int) statements.Line { return billLine(t, n, "T"+string(rune('0'+n)), day, h) }
	for _, tc := range []struct {
		name string
		st   statements.Statement
		want string // the day, or the error's text
	}{
		{"wechat of the day given", wx("2026-12-04", l(2, "2026-12-04", 0), l(3, "2026-12-04", 23)), "2026-12-04"},
		{
			"wechat stray row", wx("2026-12-04", l(2, "2026-12-04", 9), l(3, "2026-12-04", 10), l(6, "2026-12-03", 23)),
			"WECHAT bill: line 6 is dated 2026-12-03, outside the bill's day 2026-12-04",
		},
		{
			"wechat stray rows counted", wx("2026-12-04", l(2, "2026-12-03", 9), l(3, "2026-12-05", 0), l(4, "2026-12-04", 1)),
			"line 2 is dated 2026-12-03, outside the bill's day 2026-12-04 (and 1 more lines outside it)",
		},
		{"wechat nothing but a stray row", wx("2026-12-04", l(2, "2026-12-03", 9)), "line 2 is dated 2026-12-03, outside the bill's day 2026-12-04"},
		{"no day given, lines of one", wx("", l(2, "2026-12-04", 9), l(3, "2026-12-04", 10)), "2026-12-04"},
		{
			"no day given, lines of two", wx("", l(2, "2026-12-04", 9), l(3, "2026-12-03", 10)),
			"line 2 is dated 2026-12-04 and line 3 2026-12-03: a bill is one day, and it states none",
		},
		{"no day, no lines", wx(""), "it has no lines and states no day"},
		{"a day that is none", wx("04/12/2026", l(2, "2026-12-04", 9)), `day "04/12/2026" is not YYYY-MM-DD`},
		{"alipay window", ali("2026-12-04", l(6, "2026-12-04", 9)), "2026-12-04"},
		{"alipay empty", ali("2026-12-04"), "2026-12-04"},
		{
			"alipay stray row", ali("2026-12-04", l(6, "2026-12-04", 9), l(7, "2026-12-05", 0)),
			"ALIPAY bill: line 7 is dated 2026-12-05, outside the bill's day 2026-12-04",
		},
		{"alipay day given is the window's", func() statements.Statement {
			st := ali("2026-12-04", l(6, "2026-12-04", 9))
			st.Day = "2026-12-04"
			return st
		}(), "2026-12-04"},
		{"alipay day given is not the window's", func() statements.Statement {
			st := ali("2026-12-04", l(6, "2026-12-04", 9))
			st.Day = "2026-12-03"
			return st
		}(), "ALIPAY bill: the file states the day 2026-12-04, not 2026-12-03"},
		{
			"alipay monthly window", window(statements.Statement{Channel: channels.Alipay}, "2026-12-01", 31),
			"its window [2026-12-01 00:00:00, 2027-01-01 00:00:00) is not one Beijing day",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			day, err := tc.st.BillDay()
			if _, perr := time.Parse(time.DateOnly, tc.want); perr == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, day)
				return
			}
			require.ErrorIs(t, err, statements.ErrDay)
			require.ErrorContains(t, err, tc.want)
			assert.Empty(t, day)
		})
	}

	sqb := statements.Statement{Channel: channels.SQB, Day: "2026-12-04", Lines: []statements.Line{l(1, "2026-12-03", 9), l(2, "2026-12-04", 9)}}
	day, err := sqb.BillDay()
	require.NoError(t, err, "Shouqianba's responses are dated order by order")
	assert.Empty(t, day)
}

// TestCheckUnique: a payment, refund or order twice is refused naming both
// lines; a payment and its refund, or two refunds of a trade, are not
// repeats.
func TestCheckUnique(t *testing.T) {
	pay := billLine(t, 2, "4200000001", "2026-12-04", 9)
	refund := func(n int, no string) statements.Line {
		r := pay
		r.LineNo, r.Kind, r.RefundNo = n, statements.KindRefund, no
		return r
	}
	again := pay
	again.LineNo = 7
	ok := statements.Statement{Channel: channels.WeChat, Lines: []statements.Line{pay, refund(3, "R1"), refund(4, "R2")}}
	require.NoError(t, ok.CheckUnique())

	st := statements.Statement{Channel: channels.WeChat, Lines: []statements.Line{pay, refund(3, "R1"), refund(5, "R1"), again}}
	err := st.CheckUnique()
	require.ErrorIs(t, err, statements.ErrRepeated)
	assert.EqualError(t, err, `WECHAT statement: line 5 repeats line 3 (REFUND 4200000001 refund "R1") (and 1 more repeated lines): statement line repeated`)
}
