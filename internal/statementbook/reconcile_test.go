package statementbook_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

const reconDay = "2024-06-01" // channelstest.BaseTime's day

// post settles value as the worker does, the claim keeping the channel's
// time of the event in occurred_at.
func (w *world) post(value []byte) {
	w.TB.Helper()
	ev, _ := w.Settle(value)
	w.Exec("UPDATE ss_channel_idempotent SET occurred_at = ? WHERE tenant_id = ? AND idempotent_key = ?",
		ev.OccurredAt.UTC(), ev.TenantID, string(ev.Key))
}

// importLines imports lines as statements of ch for tenant: one bill per
// day the lines fall on (a bill is one day), in the order of their days.
func (w *world) importLines(tenant int64, ch channels.Channel, lines ...statements.Line) {
	w.TB.Helper()
	for i := range lines {
		lines[i].LineNo, lines[i].Channel, lines[i].Currency = i+2, ch, "CNY"
	}
	for _, day := range statementsample.Days(lines) {
		st := statements.Statement{
			Channel: ch, Format: "test", SHA1: fmt.Sprintf("%d-%s-%s-%d", tenant, ch, day, time.Now().UnixNano()),
			Lines: statementsample.OnDay(lines, day),
		}
		_, err := statementbook.ImportStatement(context.Background(), w.DB, tenant, st, time.Now())
		require.NoError(w.TB, err)
	}
}

func payLine(tr channelstest.Trade) statements.Line {
	return statements.Line{
		Kind: statements.KindPayment, TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo,
		Amount: tr.Total, SettledAmount: tr.Total, FeeMicroYuan: tr.Total * 6, Status: "SUCCESS", Time: tr.PaidAt,
	}
}

func refundLine(tr channelstest.Trade, no string, amount int64, status string) statements.Line {
	return statements.Line{
		Kind: statements.KindRefund, TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo, RefundNo: no,
		Amount: amount, SettledAmount: amount, FeeMicroYuan: -amount * 6, Status: status, Time: tr.PaidAt.Add(time.Hour),
	}
}

func trade(ch channels.Channel, tenant int64, seq int) channelstest.Trade {
	tr := channelstest.NewTrade(ch, seq)
	tr.TenantID = tenant
	return tr
}

func reconcileDay(t *testing.T, w *world, tenant int64, ch channels.Channel, day string) statementbook.StatementReport {
	t.Helper()
	rep, err := statementbook.ReconcileStatement(context.Background(), w.DB, tenant, ch, day)
	require.NoError(t, err)
	return rep
}

func categories(rep statementbook.StatementReport) []string {
	var out []string
	for _, it := range rep.Items {
		out = append(out, it.Category+" "+it.TradeNo+" "+it.RefundNo)
	}
	return out
}

// TestReconcileStatement builds ledger history from channel callbacks and
// statements of the same day, one tenant per scenario, and checks that
// reconciling reports exactly the difference.
func TestReconcileStatement(t *testing.T) {
	w := newWorld(t)
	wx, ali, sq := channels.WeChat, channels.Alipay, channels.SQB
	d := channelstest.Delivery{}

	t.Run("clean day", func(t *testing.T) {
		t1, t2 := trade(wx, 1, 1), trade(wx, 1, 2)
		w.post(channelstest.PaymentEnvelope(t1, d))
		w.post(channelstest.PaymentEnvelope(t2, d))
		w.post(channelstest.RefundEnvelope(t2, channelstest.Refund{No: "R-1", Amount: 1000}, d))
		w.importLines(1, wx, payLine(t1), payLine(t2), refundLine(t2, "R-1", 1000, "SUCCESS"))
		rep := reconcileDay(t, w, 1, wx, reconDay)
		assert.Empty(t, rep.Items)
		assert.Equal(t, 3, rep.Lines)
		assert.Equal(t, 3, rep.Postings)
		assert.Equal(t, (2580+2580-1000)*6, int(rep.FeeMicroYuan))
		assert.Equal(t, "0.24960", rep.Fee)
	})

	t.Run("payment withheld from the ledger", func(t *testing.T) {
		t1, t2 := trade(wx, 2, 1), trade(wx, 2, 2)
		w.post(channelstest.PaymentEnvelope(t1, d))
		w.importLines(2, wx, payLine(t1), payLine(t2))
		rep := reconcileDay(t, w, 2, wx, reconDay)
		require.Len(t, rep.Items, 1)
		it := rep.Items[0]
		assert.Equal(t, statementbook.StatementMissingInLedger, it.Category)
		assert.Equal(t, t2.TradeNo, it.TradeNo)
		assert.Equal(t, int64(2580), *it.StatementAmount)
		assert.Nil(t, it.LedgerAmount)
		assert.Equal(t, 3, it.LineNo)
		assert.Equal(t, t2.MerchantOrderNo, it.MerchantOrderNo, "from the statement's line")
	})

	t.Run("posted payment absent from the statement", func(t *testing.T) {
		t1, t2 := trade(wx, 3, 1), trade(wx, 3, 2)
		t2.PaidAt = time.Date(2024, 6, 1, 23, 59, 59, 900_000_000, channelstest.Beijing)
		w.post(channelstest.PaymentEnvelope(t1, d))
		w.post(channelstest.PaymentEnvelope(t2, d))
		w.importLines(3, wx, payLine(t1))
		rep := reconcileDay(t, w, 3, wx, reconDay)
		assert.Equal(t, []string{statementbook.StatementMissingInStatement + " " + t2.TradeNo + " "}, categories(rep))
		assert.Equal(t, int64(2580), *rep.Items[0].LedgerAmount)
		require.NotEmpty(t, t2.MerchantOrderNo)
		assert.Equal(t, t2.MerchantOrderNo, rep.Items[0].MerchantOrderNo, "no line names it: the order row does")

		// The channel's clock put it in the next day's bill.
		late := payLine(t2)
		late.Time = time.Date(2024, 6, 2, 0, 0, 0, 100_000_000, statements.Beijing)
		w.importLines(3, wx, late)
		rep = reconcileDay(t, w, 3, wx, reconDay)
		assert.Empty(t, rep.Items, "the next day's imported statement holds it")
		assert.Equal(t, []string{"2024-06-02"}, rep.Neighbours)
		assert.Empty(t, reconcileDay(t, w, 3, wx, "2024-06-02").Items, "found in the ledger whatever its day")
	})

	t.Run("missing in statement, claim without occurred_at", func(t *testing.T) {
		t1, t2 := trade(wx, 4, 1), trade(wx, 4, 2)
		w.post(channelstest.PaymentEnvelope(t1, d))
		w.Settle(channelstest.PaymentEnvelope(t2, d)) // an old claim: the time only in event_json
		w.importLines(4, wx, payLine(t1))
		assert.Equal(t, []string{statementbook.StatementMissingInStatement + " " + t2.TradeNo + " "}, categories(reconcileDay(t, w, 4, wx, reconDay)))
	})

	t.Run("amount difference", func(t *testing.T) {
		t1 := trade(wx, 5, 1)
		w.post(channelstest.PaymentEnvelope(t1, d))
		l := payLine(t1)
		l.Amount = 2590
		w.importLines(5, wx, l)
		rep := reconcileDay(t, w, 5, wx, reconDay)
		require.Len(t, rep.Items, 1)
		assert.Equal(t, statementbook.StatementAmountMismatch, rep.Items[0].Category)
		assert.Equal(t, [2]int64{2590, 2580}, [2]int64{*rep.Items[0].StatementAmount, *rep.Items[0].LedgerAmount})
	})

	t.Run("WeChat refund PROCESSING that was posted, REVOKED payment that was posted", func(t *testing.T) {
		t1, t2 := trade(wx, 6, 1), trade(wx, 6, 2)
		w.post(channelstest.PaymentEnvelope(t1, d))
		w.post(channelstest.RefundEnvelope(t1, channelstest.Refund{No: "R-9", Amount: 500}, d))
		w.post(channelstest.PaymentEnvelope(t2, d))
		revoked := payLine(t2)
		revoked.Status = "REVOKED"
		w.importLines(6, wx, payLine(t1), refundLine(t1, "R-9", 500, "PROCESSING"), revoked)
		rep := reconcileDay(t, w, 6, wx, reconDay)
		assert.Equal(t, []string{
			statementbook.StatementStatusMismatch + " " + t1.TradeNo + " R-9",
			statementbook.StatementStatusMismatch + " " + t2.TradeNo + " ",
		}, categories(rep))
		assert.Contains(t, rep.Items[0].Message, "snapshot")
		assert.Contains(t, rep.Items[0].Message, "never updated")
	})

	t.Run("Alipay two partial refunds compare as a per-trade total", func(t *testing.T) {
		t1 := trade(ali, 7, 1)
		t1.Total = 10000
		w.post(channelstest.PaymentEnvelope(t1, d))
		w.post(channelstest.RefundEnvelope(t1, channelstest.Refund{No: "B-1", Cumulative: 3000, At: t1.PaidAt.Add(time.Hour)}, d))
		w.post(channelstest.RefundEnvelope(t1, channelstest.Refund{No: "B-2", Cumulative: 5000, At: t1.PaidAt.Add(2 * time.Hour)}, d))
		// The statement numbers refunds by out_request_no, not the callback's.
		w.importLines(7, ali, payLine(t1), refundLine(t1, "REQ-1", 3000, "SUCCESS"), refundLine(t1, "REQ-2", 2000, "SUCCESS"))
		assert.Empty(t, reconcileDay(t, w, 7, ali, reconDay).Items)

		w.importLines(7, ali, payLine(t1), refundLine(t1, "REQ-1", 3000, "SUCCESS"), refundLine(t1, "REQ-2", 2500, "SUCCESS"))
		rep := reconcileDay(t, w, 7, ali, reconDay)
		require.Len(t, rep.Items, 1)
		it := rep.Items[0]
		assert.Equal(t, statementbook.StatementAmountMismatch, it.Category)
		assert.Equal(t, [2]int64{5500, 5000}, [2]int64{*it.StatementAmount, *it.LedgerAmount}, "the day's totals of the trade")
	})

	t.Run("Shouqianba order: total and refunded", func(t *testing.T) {
		t1, t2 := trade(sq, 8, 1), trade(sq, 8, 2)
		w.post(channelstest.PaymentEnvelope(t1, d))
		w.post(channelstest.RefundEnvelope(t1, channelstest.Refund{No: "S-1", Amount: 1000}, d))
		w.post(channelstest.PaymentEnvelope(t2, d))
		order := func(tr channelstest.Trade, net int64, status string) statements.Line {
			return statements.Line{Kind: statements.KindOrder, TradeNo: tr.TradeNo, Amount: tr.Total, SettledAmount: net, Status: status, Time: tr.PaidAt.Add(time.Hour)}
		}
		w.importLines(8, sq, order(t1, 1580, sqb.PartialRefunded), order(t2, 2580, sqb.Paid))
		assert.Empty(t, reconcileDay(t, w, 8, sq, reconDay).Items)
		w.importLines(8, sq, order(t1, 580, sqb.PartialRefunded), order(t2, 2580, sqb.Paid))
		assert.Equal(t, []string{statementbook.StatementAmountMismatch + " " + t1.TradeNo + " "}, categories(reconcileDay(t, w, 8, sq, reconDay)))
	})

	t.Run("no statement for the day", func(t *testing.T) {
		_, err := statementbook.ReconcileStatement(context.Background(), w.DB, 9, wx, reconDay)
		require.ErrorIs(t, err, statementbook.ErrNoStatement)
	})
}

// aliRefund is the Alipay refund of tr numbered no reporting cumulative fen
// refunded so far, accepted at at.
func aliRefund(tr channelstest.Trade, no string, cumulative int64, at time.Time) []byte {
	return channelstest.RefundEnvelope(tr, channelstest.Refund{No: no, Cumulative: cumulative, At: at}, channelstest.Delivery{})
}

// aliRefundLine is the Alipay statement's row of a refund of amount fen
// (its own, not cumulative) at at.
func aliRefundLine(tr channelstest.Trade, no string, amount int64, at time.Time) statements.Line {
	l := refundLine(tr, no, amount, "SUCCESS")
	l.Time, l.FeeMicroYuan = at, 0
	return l
}

// TestReconcileStatementAlipayRunningTotals: an Alipay trade's refunds
// compare as running totals over the consecutive days imported, so a
// refund carried by a later refund's cumulative callback, or dated to a
// neighbouring day by one side, shows only until both sides hold the
// money, and a difference shows on the day it appears or grows, once. On
// MariaDB and on the embedded SQLite database.
func TestReconcileStatementAlipayRunningTotals(t *testing.T) {
	sqldbtest.Dialects(t, testAlipayRunningTotals)
}

func testAlipayRunningTotals(t *testing.T, db *bun.DB) {
	t.Helper()
	w := newWorldOn(t, db)
	ali := channels.Alipay
	d1, d2, d3 := "2024-06-01", "2024-06-02", "2024-06-03"
	at := func(day string, hour, minute int) time.Time {
		t0, err := time.ParseInLocation(time.DateOnly, day, statements.Beijing)
		require.NoError(t, err)
		return t0.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
	}
	paid := func(tenant int64, seq int) channelstest.Trade {
		tr := trade(ali, tenant, seq)
		tr.Total = 10000
		w.post(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		return tr
	}
	// filler is a payment line that gives a day a statement of its own.
	filler := func(tenant int64, seq int, day string) statements.Line {
		tr := trade(ali, tenant, seq)
		tr.PaidAt = at(day, 9, 0)
		w.post(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		return payLine(tr)
	}

	t.Run("a refund whose callback was lost and carried by the next day's cumulative one", func(t *testing.T) {
		const tenant = 21
		tr := paid(tenant, 1)
		w.post(aliRefund(tr, "B-2", 5000, at(d2, 10, 0))) // carries B-1's 3000: 5000 dated d2
		w.importLines(tenant, ali, payLine(tr), aliRefundLine(tr, "REQ-1", 3000, at(d1, 14, 0)))

		rep := reconcileDay(t, w, tenant, ali, d1)
		require.Equal(t, []string{statementbook.StatementMissingInLedger + " " + tr.TradeNo + " "}, categories(rep),
			"with only the first day imported, the refund is missing at the end of it")
		assert.Equal(t, int64(3000), *rep.Items[0].StatementAmount)
		assert.Nil(t, rep.Items[0].LedgerAmount)
		assert.Equal(t, 3, rep.Items[0].LineNo)

		w.importLines(tenant, ali, aliRefundLine(tr, "REQ-2", 2000, at(d2, 10, 0)))
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d2).Items, "5000 refunded by the end of the second day on both sides")
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d1).Items, "the ledger caught up on the second day")

		// The first refund's callback arrives at last: no money moves.
		_, res := w.Settle(aliRefund(tr, "B-1", 3000, at(d1, 14, 0)))
		assert.Equal(t, "NO_MONEY", string(res.Outcome))
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d1).Items)
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d2).Items)
	})

	t.Run("a refund posted late on a day, in the next day's statement", func(t *testing.T) {
		const tenant = 22
		tr := paid(tenant, 1)
		w.post(aliRefund(tr, "B-1", 1000, time.Date(2024, 6, 1, 23, 59, 59, 900_000_000, statements.Beijing)))
		w.importLines(tenant, ali, payLine(tr))
		rep := reconcileDay(t, w, tenant, ali, d1)
		require.Equal(t, []string{statementbook.StatementMissingInStatement + " " + tr.TradeNo + " B-1"}, categories(rep),
			"without the next day's statement the refund is in none")
		assert.Equal(t, int64(1000), *rep.Items[0].LedgerAmount)
		assert.Equal(t, "ALIPAY:"+tr.TradeNo+":REFUND_SUCCEEDED:B-1", rep.Items[0].Key)

		w.importLines(tenant, ali, aliRefundLine(tr, "REQ-1", 1000, at(d2, 0, 0)))
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d2).Items, "the refund the ledger dated to the day before")
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d1).Items, "the next day's statement holds it")
	})

	t.Run("a difference shows on the day it appears or grows, and clears when the ledger catches up", func(t *testing.T) {
		const tenant = 23
		tr := paid(tenant, 1)
		w.post(aliRefund(tr, "B-1", 1000, at(d1, 14, 0)))
		// B-2 (2000 on d2) and B-3 (500 on d3) are not posted yet.
		w.importLines(tenant, ali, payLine(tr), aliRefundLine(tr, "REQ-1", 1000, at(d1, 14, 0)),
			aliRefundLine(tr, "REQ-2", 2000, at(d2, 11, 0)), aliRefundLine(tr, "REQ-3", 500, at(d3, 9, 30)))
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d1).Items)
		rep := reconcileDay(t, w, tenant, ali, d2)
		require.Equal(t, []string{statementbook.StatementMissingInLedger + " " + tr.TradeNo + " "}, categories(rep))
		assert.Equal(t, int64(2000), *rep.Items[0].StatementAmount, "the day's refunds the ledger lacks")
		assert.Contains(t, rep.Items[0].Message, "at the end of 2024-06-03: statement 3500, ledger 1000")
		rep = reconcileDay(t, w, tenant, ali, d3)
		require.Equal(t, []string{statementbook.StatementMissingInLedger + " " + tr.TradeNo + " "}, categories(rep))
		assert.Equal(t, int64(500), *rep.Items[0].StatementAmount, "what the difference grew by, not the 2000 reported the day before")

		w.post(aliRefund(tr, "B-3", 3500, at(d3, 9, 30))) // carries B-2's 2000
		for _, day := range []string{d1, d2, d3} {
			assert.Empty(t, reconcileDay(t, w, tenant, ali, day).Items, day)
		}

		// A refund the ledger posted that the channel never made shows as
		// an amount_mismatch of the running totals.
		w.post(aliRefund(tr, "B-4", 4000, at(d3, 15, 0)))
		rep = reconcileDay(t, w, tenant, ali, d3)
		require.Equal(t, []string{statementbook.StatementAmountMismatch + " " + tr.TradeNo + " "}, categories(rep))
		assert.Equal(t, [2]int64{3500, 4000}, [2]int64{*rep.Items[0].StatementAmount, *rep.Items[0].LedgerAmount})
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d2).Items, "the ledger went past the day's total since")
	})

	t.Run("a difference that stays is reported once", func(t *testing.T) {
		const tenant = 26
		tr := paid(tenant, 1)
		w.post(aliRefund(tr, "B-1", 1000, at(d1, 14, 0)))
		w.post(aliRefund(tr, "B-2", 2000, at(d2, 14, 0)))
		// The statement has 1500 on the first day, then the same 1000 more.
		w.importLines(tenant, ali, payLine(tr), aliRefundLine(tr, "REQ-1", 1500, at(d1, 14, 0)),
			aliRefundLine(tr, "REQ-2", 1000, at(d2, 14, 0)))
		rep := reconcileDay(t, w, tenant, ali, d1)
		require.Equal(t, []string{statementbook.StatementAmountMismatch + " " + tr.TradeNo + " "}, categories(rep))
		assert.Equal(t, [2]int64{1500, 1000}, [2]int64{*rep.Items[0].StatementAmount, *rep.Items[0].LedgerAmount})
		assert.Contains(t, rep.Items[0].Message, "at the end of 2024-06-02: statement 2500, ledger 2000")
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d2).Items, "the same 500 apart: not reported again")
	})

	t.Run("the running totals start with the first of the consecutive days imported", func(t *testing.T) {
		const tenant = 24
		tr := paid(tenant, 1)
		w.post(aliRefund(tr, "B-2", 1500, at(d2, 10, 0))) // carries B-1's 1000 of d1
		// d1's statement is not imported; d3's has nothing of the trade.
		w.importLines(tenant, ali, aliRefundLine(tr, "REQ-2", 500, at(d2, 10, 0)), filler(tenant, 2, d3))
		rep := reconcileDay(t, w, tenant, ali, d2)
		require.Equal(t, []string{statementbook.StatementAmountMismatch + " " + tr.TradeNo + " "}, categories(rep))
		assert.Equal(t, [2]int64{500, 1500}, [2]int64{*rep.Items[0].StatementAmount, *rep.Items[0].LedgerAmount})
		assert.Contains(t, rep.Items[0].Message, "since 2024-06-02")
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d3).Items)

		w.importLines(tenant, ali, payLine(tr), aliRefundLine(tr, "REQ-1", 1000, at(d1, 14, 0)))
		for _, day := range []string{d1, d2, d3} {
			assert.Empty(t, reconcileDay(t, w, tenant, ali, day).Items, "%s: with the first day's statement imported", day)
		}
	})

	t.Run("a day without a statement ends the running totals", func(t *testing.T) {
		const tenant = 25
		tr := paid(tenant, 1)
		w.post(aliRefund(tr, "B-1", 1000, at(d1, 14, 0)))
		w.post(aliRefund(tr, "B-2", 3000, at(d2, 14, 0)))
		w.post(aliRefund(tr, "B-3", 3500, at(d3, 14, 0)))
		// d2's statement is missing: d3 compares its own refunds only.
		w.importLines(tenant, ali, payLine(tr), aliRefundLine(tr, "REQ-1", 1000, at(d1, 14, 0)),
			aliRefundLine(tr, "REQ-3", 500, at(d3, 14, 0)))
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d1).Items)
		assert.Empty(t, reconcileDay(t, w, tenant, ali, d3).Items)
	})
}
