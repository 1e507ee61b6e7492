package statementbook_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// bill is a two-line WeChat bill of 2024-03-15 (Beijing), the second line
// a refund accepted late in the evening, 23:30 Beijing (15:30 UTC).
func bill(sha string) statements.Statement {
	at := func(h, m int) time.Time { return time.Date(2024, 3, 15, h, m, 0, 0, statements.Beijing) }
	return statements.Statement{
		Channel: channels.WeChat, Format: "wechat-tradebill-all", SHA1: sha,
		Lines: []statements.Line{
			{
				LineNo: 2, Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: "4200000001", MerchantOrderNo: "M-1",
				Amount: 10000, SettledAmount: 10000, FeeMicroYuan: 60000, Status: "SUCCESS", Time: at(9, 12), Currency: "CNY",
			},
			{
				LineNo: 3, Channel: channels.WeChat, Kind: statements.KindRefund, TradeNo: "4200000001", MerchantOrderNo: "M-1", RefundNo: "rf-1",
				Amount: 3000, SettledAmount: 3000, FeeMicroYuan: -18000, Status: "SUCCESS", Time: at(23, 30), Currency: "CNY",
			},
		},
	}
}

func TestImportStatement(t *testing.T) {
	for name, open := range map[string]func(testing.TB) *bun.DB{"mysql": sqldbtest.MustMySQL, "sqlite": sqldbtest.MustSQLite} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := open(t)
			now := time.Date(2024, 3, 16, 2, 0, 0, 0, time.UTC)
			count := func() (files, lines int64) {
				t.Helper()
				var err error
				files, err = db.NewSelect().TableExpr("ss_statement_file").Count(ctx)
				require.NoError(t, err)
				lines, err = db.NewSelect().TableExpr("ss_statement_entry").Count(ctx)
				require.NoError(t, err)
				return files, lines
			}

			res, err := statementbook.ImportStatement(ctx, db, 1001, bill("aaaa"), now)
			require.NoError(t, err)
			require.Len(t, res.Days, 1, "a refund at 23:30 Beijing is still the bill's day, though 15:30 UTC")
			assert.Equal(t, statementbook.DayImport{Day: "2024-03-15", Status: statementbook.ImportNew, Lines: 2, Held: 2, Version: statementbook.DayVersion(bill("aaaa").Lines)}, res.Days[0])

			res, err = statementbook.ImportStatement(ctx, db, 1001, bill("aaaa"), now)
			require.NoError(t, err)
			assert.Equal(t, statementbook.ImportUnchanged, res.Days[0].Status, "the same file twice changes nothing")
			files, lines := count()
			assert.Equal(t, [2]int64{1, 2}, [2]int64{files, lines})

			other, err := statementbook.ImportStatement(ctx, db, 2002, bill("aaaa"), now)
			require.NoError(t, err)
			assert.Equal(t, statementbook.ImportNew, other.Days[0].Status, "statements are held per tenant")

			corrected := bill("bbbb")
			corrected.Lines[1].Status = "PROCESSING"
			corrected.Lines = append(corrected.Lines, statements.Line{
				LineNo: 4, Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: "4200000002", MerchantOrderNo: "M-2",
				Amount: 500, SettledAmount: 500, Status: "SUCCESS", Time: time.Date(2024, 3, 15, 12, 0, 0, 0, statements.Beijing), Currency: "CNY",
			})
			corrected.Lines = corrected.Lines[1:] // the first payment is gone
			res, err = statementbook.ImportStatement(ctx, db, 1001, corrected, now)
			require.NoError(t, err)
			day := res.Days[0]
			assert.Equal(t, statementbook.ImportReplaced, day.Status)
			require.Len(t, day.Changes, 3)
			byID := map[string]statementbook.LineChange{}
			for _, c := range day.Changes {
				byID[c.Identity] = c
			}
			removed := byID["PAYMENT 4200000001"]
			require.NotNil(t, removed.Old)
			assert.Nil(t, removed.New)
			assert.Equal(t, int64(10000), removed.Old.Amount)
			changed := byID[`REFUND 4200000001 refund "rf-1"`]
			require.NotNil(t, changed.Old)
			require.NotNil(t, changed.New)
			assert.Equal(t, "SUCCESS", changed.Old.Status)
			assert.Equal(t, "PROCESSING", changed.New.Status)
			added := byID["PAYMENT 4200000002"]
			assert.Nil(t, added.Old)
			require.NotNil(t, added.New)
			files, lines = count()
			assert.Equal(t, [2]int64{2, 4}, [2]int64{files, lines}, "the corrected file replaced the old one's lines")
		})
	}
}

func TestImportStatementSpreadsQueryResponsesOverTheirDays(t *testing.T) {
	ctx := context.Background()
	db := sqldbtest.MustSQLite(t)
	st := statements.Statement{Channel: channels.SQB, Format: "sqb-query", SHA1: "cccc", Lines: []statements.Line{
		{
			LineNo: 1, Kind: statements.KindOrder, TradeNo: "7890000001", Amount: 100, SettledAmount: 100, Status: "PAID",
			Time: time.Date(2024, 3, 14, 23, 59, 0, 0, statements.Beijing), Currency: "CNY",
		},
		{
			LineNo: 2, Kind: statements.KindOrder, TradeNo: "7890000002", Amount: 100, SettledAmount: 0, Status: "REFUNDED",
			Time: time.Date(2024, 3, 15, 0, 1, 0, 0, statements.Beijing), Currency: "CNY",
		},
	}}
	res, err := statementbook.ImportStatement(ctx, db, 1001, st, time.Now())
	require.NoError(t, err)
	require.Len(t, res.Days, 2)
	assert.Equal(t, "2024-03-14", res.Days[0].Day)
	assert.Equal(t, "2024-03-15", res.Days[1].Day)

	_, err = statementbook.ImportStatement(ctx, db, 1001, statements.Statement{Channel: channels.WeChat, SHA1: "dddd"}, time.Now())
	require.ErrorContains(t, err, "no lines and states no day")
	empty, err := statementbook.ImportStatement(ctx, db, 1001, statements.Statement{
		Channel: channels.Alipay, SHA1: "eeee", From: time.Date(2024, 3, 16, 0, 0, 0, 0, statements.Beijing),
	}, time.Now())
	require.NoError(t, err)
	assert.Equal(t, []statementbook.DayImport{{Day: "2024-03-16", Status: statementbook.ImportNew, Version: statementbook.DayVersion(nil)}}, empty.Days, "an empty Alipay bill is its stated day")
}
