package conformance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// statementDays checks, on channel ch's sample statements imported into
// w's MariaDB for a tenant of its own (seq), that a statement keeps to its
// day and holds each line once: a bill of the next day carrying one stray
// row of the day before is refused by line, date and day, and the day
// before keeps every line it held (Shouqianba's responses, dated order by
// order, add the stray order to its day and remove nothing); a day
// imported again with a payment row twice is refused naming both lines
// (Shouqianba: the same response saved twice is one order).
func statementDays(t *testing.T, w *ledgertest.World, ch channels.Channel, seq int) {
	t.Helper()
	ctx := context.Background()
	b, ok := sample.BodiesOf(ch)
	require.True(t, ok)
	perOrder := statements.RefundLinesOf(ch) == statements.RefundLinesPerOrder
	tenant := int64(seq)
	day, next := "2024-06-01", "2024-06-02"
	at := func(d string, h int) time.Time {
		v, err := time.ParseInLocation(time.DateOnly, d, statements.Beijing)
		require.NoError(t, err)
		return v.Add(time.Duration(h) * time.Hour)
	}
	// line is the statement line of the payment of trade seq+50+n, at t.
	line := func(n int, t0 time.Time) statements.Line {
		tr := sample.NewTrade(ch, seq+50+n)
		lines, err := statementsample.FromEvents(ch, []channels.Event{decode(t, w, sample.PaymentEnvelope(tr, sample.Delivery{}))})
		require.NoError(t, err)
		require.Len(t, lines, 1)
		lines[0].Time = t0
		return lines[0]
	}
	// parse writes lines as the channel's statement and parses it, with
	// the bill's day given as consumer statement import --date gives it.
	parse := func(data []byte, billDay string) statements.Statement {
		st, err := statements.Parse(ch, data, "")
		require.NoError(t, err)
		if st.From.IsZero() && !perOrder {
			st.Day = billDay
		}
		return st
	}
	write := func(lines ...statements.Line) []byte {
		data, err := b.Statement(lines)
		require.NoError(t, err)
		return data
	}
	held := func(d string) (n int, version string) {
		var rows []struct {
			Count   int    `bun:"line_count"`
			Version string `bun:"version"`
		}
		require.NoError(t, w.DB.NewSelect().TableExpr("ss_statement_file").ColumnExpr("line_count, version").
			Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).Where("statement_day = ?", d).Scan(ctx, &rows))
		if len(rows) == 0 {
			return 0, ""
		}
		return rows[0].Count, rows[0].Version
	}

	first := []statements.Line{line(0, at(day, 9)), line(1, at(day, 10)), line(2, at(day, 11))}
	res, err := statementbook.ImportStatement(ctx, w.DB, tenant, parse(write(first...), day), time.Now())
	require.NoError(t, err)
	require.Len(t, res.Days, 1)
	require.Equal(t, day, res.Days[0].Day)
	n, version := held(day)
	require.Equal(t, 3, n)

	stray := parse(write(line(3, at(next, 9)), line(4, at(day, 23))), next)
	res, err = statementbook.ImportStatement(ctx, w.DB, tenant, stray, time.Now())
	if perOrder {
		require.NoError(t, err, "responses are dated order by order")
		n, _ := held(day)
		assert.Equal(t, 4, n, "the stray order joins its day; nothing is removed")
	} else {
		require.ErrorIs(t, err, statements.ErrDay)
		require.ErrorContains(t, err, fmt.Sprintf("line %d is dated %s, outside the bill's day %s", stray.Lines[1].LineNo, day, next))
		assert.Empty(t, res.Days, "nothing imported")
		n, v := held(day)
		assert.Equal(t, [2]any{3, version}, [2]any{n, v}, "the day before keeps every line it held")
		n, _ = held(next)
		assert.Zero(t, n, "and the bill's own day is not imported either")
	}

	if perOrder {
		// The same response saved twice: one order.
		_, err := b.Statement([]statements.Line{first[1], first[1]})
		require.ErrorIs(t, err, statementsample.ErrUnwritable, "the writer never repeats an order")
		one := write(first[1])
		st := parse(append(one, one...), day)
		require.Len(t, st.Lines, 1)
		_, err = statementbook.ImportStatement(ctx, w.DB, tenant, st, time.Now())
		require.NoError(t, err)
		n, _ := held(day)
		assert.Equal(t, 4, n, "the order is held once")
		return
	}
	again := parse(write(first[0], first[1], first[1], first[2]), day)
	res, err = statementbook.ImportStatement(ctx, w.DB, tenant, again, time.Now())
	require.ErrorIs(t, err, statements.ErrRepeated)
	require.ErrorContains(t, err, fmt.Sprintf("line %d repeats line %d", again.Lines[2].LineNo, again.Lines[1].LineNo))
	assert.Empty(t, res.Days, "nothing imported")
	n, v := held(day)
	assert.Equal(t, [2]any{3, version}, [2]any{n, v}, "the day keeps the lines it held")
}
