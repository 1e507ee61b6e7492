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
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestImportRefusesALineAnotherMerchantHolds: two sub-merchants' WeChat
// bills of one day are held side by side, but a bill of one holding a
// line the other's bill holds (the same payment) is refused naming both
// files' lines: the day would otherwise hold it twice.
func TestImportRefusesALineAnotherMerchantHolds(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		pay := func(trade string, h int) statements.Line {
			return statements.Line{
				Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: trade, MerchantOrderNo: "M-" + trade,
				Amount: 1000, SettledAmount: 1000, Status: "SUCCESS", Time: at(h, 0), Currency: "CNY",
			}
		}
		bill := func(sub string, lines ...statements.Line) statements.Statement {
			f, err := wechat.SampleBill(lines, wechat.SampleBillOptions{MchID: "1900000100", SubMchID: sub})
			require.NoError(t, err)
			st, err := statements.Parse(channels.WeChat, f.Data, "")
			require.NoError(t, err)
			st.Day = mergeDay
			return st
		}
		first := importOne(t, db, 1, bill("1900000101", pay("4200000001", 9), pay("4200000002", 10)))
		assert.Equal(t, statementbook.ImportNew, first.Status)
		second := importOne(t, db, 1, bill("1900000102", pay("4200000003", 11)))
		assert.Equal(t, 3, second.Held, "another merchant's bill of the day is held beside it")

		_, err := statementbook.ImportStatement(context.Background(), db, 1, bill("1900000102", pay("4200000003", 11), pay("4200000002", 10)), time.Now())
		require.ErrorIs(t, err, statements.ErrRepeated)
		require.ErrorContains(t, err, "line 3 (PAYMENT 4200000002) is held for the day already, from merchant 1900000101's statement")
		held := heldLines(t, db, 1, channels.WeChat, mergeDay)
		assert.Len(t, held, 3, "nothing changed")
		assert.Equal(t, "1900000101", held["4200000002"].MerchantID)
	})
}

// TestCheckImportRefusesUnreadableNumbers: a trade number that is not
// valid UTF-8 is refused before anything is stored.
func TestCheckImportRefusesUnreadableNumbers(t *testing.T) {
	st := statements.Statement{Channel: channels.WeChat, Day: mergeDay, Lines: []statements.Line{{
		LineNo: 2, Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: "4200\xff01", Time: at(9, 0),
	}}}
	err := statementbook.CheckImport(st)
	require.ErrorIs(t, err, statements.ErrFormat)
	require.ErrorContains(t, err, "line 2: the trade number is not valid UTF-8")
	_, err = statementbook.ImportStatement(context.Background(), sqldbtest.MustSQLite(t), 1, st, time.Now())
	require.ErrorIs(t, err, statements.ErrFormat)
}
