package statementbook_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
)

// mergeDay is the Beijing-time day the merge tests' lines fall on.
const mergeDay = "2024-03-15"

// at is a time of mergeDay (Beijing).
func at(h, m int) time.Time { return time.Date(2024, 3, 15, h, m, 0, 0, statements.Beijing) }

// sqbOrder is a Shouqianba order line at finish time t.
func sqbOrder(sn, status string, total, net int64, t time.Time) statements.Line {
	return statements.Line{
		LineNo: 1, Channel: channels.SQB, Kind: statements.KindOrder, TradeNo: sn, MerchantOrderNo: "C-" + sn,
		Amount: total, SettledAmount: net, Status: status, Time: t, Currency: "CNY", MerchantID: "100000000000000001",
	}
}

// sqbFile is a file of Shouqianba responses, lines numbered from 1.
func sqbFile(sha string, lines ...statements.Line) statements.Statement {
	for i := range lines {
		lines[i].LineNo = i + 1
	}
	return statements.Statement{Channel: channels.SQB, Format: sqb.FormatQuery, SHA1: sha, Lines: lines}
}

// heldLines reads the lines held for tenant, ch and day, by trade (and
// refund) number.
func heldLines(t *testing.T, db bun.IDB, tenant int64, ch channels.Channel, day string) map[string]heldRow {
	t.Helper()
	var rows []heldRow
	require.NoError(t, db.NewSelect().TableExpr("ss_statement_entry AS e").
		ColumnExpr("e.channel_trade_no, e.refund_no, e.status, e.settled_amount, e.merchant_id, e.source_sha1").
		Join("JOIN ss_statement_file AS f ON f.id = e.file_id").
		Where("f.tenant_id = ?", tenant).Where("f.channel_code = ?", string(ch)).Where("f.statement_day = ?", day).
		Scan(context.Background(), &rows))
	out := map[string]heldRow{}
	for _, r := range rows {
		k := r.TradeNo
		if r.RefundNo != "" {
			k += "/" + r.RefundNo
		}
		_, dup := out[k]
		require.False(t, dup, "%s held twice", k)
		out[k] = r
	}
	return out
}

type heldRow struct {
	TradeNo    string `bun:"channel_trade_no"`
	RefundNo   string `bun:"refund_no"`
	Status     string `bun:"status"`
	Settled    int64  `bun:"settled_amount"`
	MerchantID string `bun:"merchant_id"`
	Source     string `bun:"source_sha1"`
}

func importOne(t *testing.T, db *bun.DB, tenant int64, st statements.Statement) statementbook.DayImport {
	t.Helper()
	res, err := statementbook.ImportStatement(context.Background(), db, tenant, st, time.Now())
	require.NoError(t, err)
	require.Len(t, res.Days, 1)
	return res.Days[0]
}

// TestImportSQBFilesMerge: Shouqianba query responses gathered in several
// files for one day are all held and reconciled; a file never removes an
// order it does not itself answer for.
func TestImportSQBFilesMerge(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		first := importOne(t, db, 1, sqbFile("sqb-a", sqbOrder("7801", sqb.Paid, 1000, 1000, at(9, 0))))
		assert.Equal(t, statementbook.ImportNew, first.Status)
		second := importOne(t, db, 1, sqbFile("sqb-b", sqbOrder("7802", sqb.Paid, 2000, 2000, at(10, 0))))
		assert.Equal(t, statementbook.ImportMerged, second.Status)
		assert.Equal(t, 2, second.Held)
		require.Len(t, second.Changes, 1)
		assert.Nil(t, second.Changes[0].Old, "an order added, none removed")

		held := heldLines(t, db, 1, channels.SQB, mergeDay)
		require.Len(t, held, 2, "both files' orders are held")
		assert.Equal(t, "sqb-a", held["7801"].Source)
		assert.Equal(t, "sqb-b", held["7802"].Source)
		assert.Equal(t, "100000000000000001", held["7801"].MerchantID)

		rep, err := statementbook.ReconcileStatement(ctx, db, 1, channels.SQB, mergeDay)
		require.NoError(t, err)
		assert.Equal(t, 2, rep.Lines)
		assert.Equal(t, []string{statementbook.StatementMissingInLedger + " 7801 ", statementbook.StatementMissingInLedger + " 7802 "}, categories(rep),
			"both orders are reconciled: nothing is posted for either")
		assert.Equal(t, second.Version, rep.StatementVersion)

		again := importOne(t, db, 1, sqbFile("sqb-b", sqbOrder("7802", sqb.Paid, 2000, 2000, at(10, 0))))
		assert.Equal(t, statementbook.ImportUnchanged, again.Status, "the same responses again")
		assert.Equal(t, second.Version, again.Version)
	})
}

// TestImportSQBLaterResponseSupersedes: a later response for an order held
// supersedes it (a higher finish_time; the same finish_time saying
// something else: the later import); an earlier one does not.
func TestImportSQBLaterResponseSupersedes(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		importOne(t, db, 2, sqbFile("s1",
			sqbOrder("7901", sqb.Paid, 1000, 1000, at(9, 0)),
			sqbOrder("7902", sqb.Paid, 3000, 3000, at(11, 0)),
			sqbOrder("7903", sqb.Paid, 500, 500, at(12, 0))))

		// 7901 refunded later; 7902 answered the same second with another
		// net amount; 7903 an older response (before a refund) turning up late.
		day := importOne(t, db, 2, sqbFile("s2",
			sqbOrder("7901", sqb.Refunded, 1000, 0, at(15, 0)),
			sqbOrder("7902", sqb.PartialRefunded, 3000, 2000, at(11, 0)),
			sqbOrder("7903", sqb.PartialRefunded, 500, 100, at(11, 59))))
		assert.Equal(t, statementbook.ImportMerged, day.Status)
		assert.Equal(t, []string{"7903"}, day.Older)
		require.Len(t, day.Changes, 2)
		for _, c := range day.Changes {
			require.NotNil(t, c.Old, c.Identity)
			require.NotNil(t, c.New, c.Identity)
		}

		held := heldLines(t, db, 2, channels.SQB, mergeDay)
		require.Len(t, held, 3)
		assert.Equal(t, heldRow{TradeNo: "7901", Status: sqb.Refunded, Settled: 0, MerchantID: "100000000000000001", Source: "s2"}, held["7901"],
			"a higher finish_time supersedes")
		assert.Equal(t, "s2", held["7902"].Source, "the same finish_time: the later import supersedes")
		assert.Equal(t, int64(2000), held["7902"].Settled)
		assert.Equal(t, heldRow{TradeNo: "7903", Status: sqb.Paid, Settled: 500, MerchantID: "100000000000000001", Source: "s1"}, held["7903"],
			"an earlier finish_time does not supersede")

		// A response whose finish_time is on the next day moves the order
		// there: it is held once.
		next := importOne(t, db, 2, sqbFile("s3", sqbOrder("7903", sqb.Refunded, 500, 0, at(12, 0).AddDate(0, 0, 1))))
		assert.Equal(t, "2024-03-16", next.Day)
		assert.NotContains(t, heldLines(t, db, 2, channels.SQB, mergeDay), "7903")
		assert.Contains(t, heldLines(t, db, 2, channels.SQB, "2024-03-16"), "7903")
	})
}

// wechatBill is a WeChat bill of merchant mch for mergeDay.
func wechatBill(sha, mch string, trades ...string) statements.Statement {
	st := statements.Statement{Channel: channels.WeChat, Format: wechat.FormatAll, SHA1: sha}
	for i, tr := range trades {
		st.Lines = append(st.Lines, statements.Line{
			LineNo: i + 2, Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: tr, MerchantOrderNo: "M-" + tr,
			Amount: 100, SettledAmount: 100, Status: "SUCCESS", Time: at(9, 0), Currency: "CNY", MerchantID: mch,
		})
	}
	return st
}

// TestImportWeChatBillReplacesItsMerchantsDay: a bill is its merchant's
// whole day: a re-import for the same merchant replaces that merchant's
// lines, another merchant's bill of the same tenant and day stays.
func TestImportWeChatBillReplacesItsMerchantsDay(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		importOne(t, db, 3, wechatBill("a1", "1900000001", "4201", "4202"))
		b := importOne(t, db, 3, wechatBill("b1", "1900000002", "4301"))
		assert.Equal(t, statementbook.ImportReplaced, b.Status)
		require.Len(t, b.Changes, 1, "another merchant's bill changes none of the first merchant's lines")
		assert.Equal(t, "PAYMENT 4301", b.Changes[0].Identity)
		assert.Nil(t, b.Changes[0].Old)
		assert.Len(t, heldLines(t, db, 3, channels.WeChat, mergeDay), 3, "another merchant's bill of the day stays")

		corrected := importOne(t, db, 3, wechatBill("a2", "1900000001", "4202", "4203"))
		assert.Equal(t, statementbook.ImportReplaced, corrected.Status)
		require.Len(t, corrected.Changes, 2)
		assert.Equal(t, "PAYMENT 4201", corrected.Changes[0].Identity)
		assert.Nil(t, corrected.Changes[0].New, "removed from the merchant's day")
		assert.Equal(t, "PAYMENT 4203", corrected.Changes[1].Identity)
		held := heldLines(t, db, 3, channels.WeChat, mergeDay)
		assert.Equal(t, []string{"4202", "4203", "4301"}, sortedKeys(held))
		assert.Equal(t, "b1", held["4301"].Source)
		assert.Equal(t, "a2", held["4202"].Source)
		assert.Equal(t, 3, corrected.Held)

		same := importOne(t, db, 3, wechatBill("a2", "1900000001", "4202", "4203"))
		assert.Equal(t, statementbook.ImportUnchanged, same.Status)
	})
}

func sortedKeys(m map[string]heldRow) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestDayVersion: the version is the lines', whatever their order and
// files; a changed line changes it.
func TestDayVersion(t *testing.T) {
	a, b := sqbOrder("1", sqb.Paid, 100, 100, at(9, 0)), sqbOrder("2", sqb.Paid, 200, 200, at(9, 1))
	v := statementbook.DayVersion([]statements.Line{a, b})
	b2 := b
	b2.LineNo = 7
	assert.Equal(t, v, statementbook.DayVersion([]statements.Line{b2, a}), "order and line numbers are not the version")
	b2.SettledAmount = 150
	assert.NotEqual(t, v, statementbook.DayVersion([]statements.Line{a, b2}))
	b2 = b
	b2.MerchantID = "other"
	assert.NotEqual(t, v, statementbook.DayVersion([]statements.Line{a, b2}))
	assert.Len(t, v, 64)
}

// TestPublishMissingRefusesAStaleDayVersion: the day's lines changed after
// the reconciliation, though the file that last changed the day is the
// same (an order moved to the next day by a later response): publishing
// refuses; reconciled again, it publishes.
func TestPublishMissingRefusesAStaleDayVersion(t *testing.T) {
	ctx := context.Background()
	db := sqldbtest.MustMySQL(t)
	k := mustKafka(t, 2)
	importOne(t, db, 4, sqbFile("p1",
		sqbOrder("7701", sqb.Paid, 1000, 1000, at(9, 0)),
		sqbOrder("7702", sqb.Paid, 2000, 2000, at(10, 0))))
	rep, err := statementbook.ReconcileStatement(ctx, db, 4, channels.SQB, mergeDay)
	require.NoError(t, err)
	require.Len(t, rep.Items, 2)
	sha := rep.StatementSHA1

	importOne(t, db, 4, sqbFile("p2", sqbOrder("7702", sqb.Paid, 2000, 2000, at(10, 0).AddDate(0, 0, 1))))
	pub, err := statementbook.PublishMissing(ctx, db, input(k), rep, testSigning, time.Now())
	require.ErrorIs(t, err, statementbook.ErrStatementChanged)
	assert.Empty(t, pub.Published)
	assert.Equal(t, sha, pub.StatementSHA1, "the day's file is the same: only the version tells")

	rep, err = statementbook.ReconcileStatement(ctx, db, 4, channels.SQB, mergeDay)
	require.NoError(t, err)
	require.Len(t, rep.Items, 1)
	pub, err = statementbook.PublishMissing(ctx, db, input(k), rep, testSigning, time.Now())
	require.NoError(t, err)
	assert.Equal(t, []string{"SQB:7701:PAYMENT_RECEIVED"}, keysOf(pub.Published))
	assert.Equal(t, "p1", pub.Published[0].StatementSHA1, "the line's own file")
}
