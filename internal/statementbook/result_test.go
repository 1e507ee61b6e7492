package statementbook_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/statements"
)

// resultRow is ss_statement_reconcile's row as a test reads it back.
type resultRow struct {
	SHA1               string    `bun:"statement_sha1"`
	ReconciledAt       time.Time `bun:"reconciled_at"`
	Lines              int       `bun:"line_count"`
	Postings           int       `bun:"posting_count"`
	MissingInLedger    int       `bun:"missing_in_ledger"`
	MissingInStatement int       `bun:"missing_in_statement"`
	AmountMismatch     int       `bun:"amount_mismatch"`
	StatusMismatch     int       `bun:"status_mismatch"`
	Fee                int64     `bun:"fee_micro_yuan"`
}

func readResults(t *testing.T, db bun.IDB, tenant int64, ch channels.Channel) []resultRow {
	t.Helper()
	var rows []resultRow
	require.NoError(t, db.NewSelect().TableExpr("ss_statement_reconcile").
		Column("statement_sha1", "reconciled_at", "line_count", "posting_count", "missing_in_ledger",
			"missing_in_statement", "amount_mismatch", "status_mismatch", "fee_micro_yuan").
		Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).
		Scan(context.Background(), &rows))
	return rows
}

// TestReconcileStatementRecordsItsResult: every run of a day leaves its
// counts per category, and a rerun of the day replaces them.
func TestReconcileStatementRecordsItsResult(t *testing.T) {
	w := newWorld(t)
	wx, d := channels.WeChat, channelstest.Delivery{}
	t1, t2, t3 := trade(wx, 1, 1), trade(wx, 1, 2), trade(wx, 1, 3)
	w.post(channelstest.PaymentEnvelope(t1, d))
	w.post(channelstest.PaymentEnvelope(t3, d)) // in no statement
	w.post(channelstest.RefundEnvelope(t1, channelstest.Refund{No: "R-1", Amount: 500}, d))
	w.importLines(1, wx, payLine(t1), payLine(t2), refundLine(t1, "R-1", 500, "PROCESSING"))
	var sha string
	require.NoError(t, w.DB.NewSelect().TableExpr("ss_statement_file").Column("sha1").Where("tenant_id = 1").Scan(context.Background(), &sha))

	before := time.Now().UTC().Add(-time.Millisecond)
	rep := reconcileDay(t, w, 1, wx, reconDay)
	require.Len(t, rep.Items, 3)
	rows := readResults(t, w.DB, 1, wx)
	require.Len(t, rows, 1)
	first := rows[0]
	assert.Equal(t, sha, first.SHA1)
	assert.Equal(t, [4]int{1, 1, 0, 1}, [4]int{first.MissingInLedger, first.MissingInStatement, first.AmountMismatch, first.StatusMismatch})
	assert.Equal(t, 3, first.Lines)
	assert.Equal(t, 3, first.Postings)
	assert.Equal(t, rep.FeeMicroYuan, first.Fee)
	assert.WithinRange(t, first.ReconciledAt.UTC(), before, time.Now().UTC())

	// The missing payment arrives; the rerun replaces the day's result.
	w.post(channelstest.PaymentEnvelope(t2, d))
	rep = reconcileDay(t, w, 1, wx, reconDay)
	require.Len(t, rep.Items, 2)
	rows = readResults(t, w.DB, 1, wx)
	require.Len(t, rows, 1, "one row per tenant, channel and day")
	assert.Equal(t, [4]int{0, 1, 0, 1}, [4]int{rows[0].MissingInLedger, rows[0].MissingInStatement, rows[0].AmountMismatch, rows[0].StatusMismatch})
	assert.Equal(t, 4, rows[0].Postings)
	assert.True(t, rows[0].ReconciledAt.After(first.ReconciledAt), "the rerun's time")
}

// TestReconcileStatementNoStatement: a day with nothing imported and not
// declared empty is no_statement, postings or not, over or not, and never
// recorded: a failed download and a lost day of callbacks look the same.
func TestReconcileStatementNoStatement(t *testing.T) {
	w := newWorld(t)
	wx, d := channels.WeChat, channelstest.Delivery{}
	ctx := context.Background()
	w.post(channelstest.PaymentEnvelope(trade(wx, 2, 1), d)) // on 2024-06-01

	today := time.Now().In(statements.Beijing).Format(time.DateOnly)
	for _, day := range []string{reconDay, "2024-06-02", today} {
		rep, err := statementbook.ReconcileStatement(ctx, w.DB, 2, wx, day)
		require.ErrorIs(t, err, statementbook.ErrNoStatement, day)
		require.Len(t, rep.Items, 1, day)
		assert.Equal(t, statementbook.StatementNoStatement, rep.Items[0].Category, day)
		assert.False(t, rep.OK(), day)
	}
	assert.Empty(t, readResults(t, w.DB, 2, wx), "a day without a statement is never recorded, quiet or not")
}

// TestDeclareEmptyStatements: a day the channel said had no statement is
// reconciled against an empty one: a posting of it is missing_in_statement,
// a day without postings is clean; a day holding lines is refused, and
// nothing of the range is recorded; a day not ended is refused.
func TestDeclareEmptyStatements(t *testing.T) {
	w := newWorld(t)
	wx, d := channels.WeChat, channelstest.Delivery{}
	ctx := context.Background()
	tr := trade(wx, 3, 1)
	w.post(channelstest.PaymentEnvelope(tr, d)) // on 2024-06-01
	now := time.Now()

	res, err := statementbook.DeclareEmptyStatements(ctx, w.DB, 3, wx, []string{reconDay, "2024-06-02"}, now)
	require.NoError(t, err)
	assert.Equal(t, []statementbook.EmptyDay{{Day: reconDay, Status: statementbook.EmptyDeclared}, {Day: "2024-06-02", Status: statementbook.EmptyDeclared}}, res)
	rep := reconcileDay(t, w, 3, wx, reconDay)
	assert.Equal(t, []string{statementbook.StatementMissingInStatement + " " + tr.TradeNo + " "}, categories(rep))
	assert.Zero(t, rep.Lines)
	quiet := reconcileDay(t, w, 3, wx, "2024-06-02")
	assert.True(t, quiet.OK(), "%+v", quiet.Items)
	rows := readResults(t, w.DB, 3, wx)
	require.Len(t, rows, 2)

	again, err := statementbook.DeclareEmptyStatements(ctx, w.DB, 3, wx, []string{"2024-06-02"}, now)
	require.NoError(t, err)
	assert.Equal(t, []statementbook.EmptyDay{{Day: "2024-06-02", Status: statementbook.EmptyAlready}}, again)

	w.importLines(4, wx, payLine(trade(wx, 4, 1)))
	_, err = statementbook.DeclareEmptyStatements(ctx, w.DB, 4, wx, []string{"2024-05-31", reconDay}, now)
	require.ErrorIs(t, err, statementbook.ErrStatementHeld)
	_, err = statementbook.ReconcileStatement(ctx, w.DB, 4, wx, "2024-05-31")
	require.ErrorIs(t, err, statementbook.ErrNoStatement, "nothing of the range was recorded")

	today := now.In(statements.Beijing).Format(time.DateOnly)
	_, err = statementbook.DeclareEmptyStatements(ctx, w.DB, 3, wx, []string{today}, now)
	require.ErrorContains(t, err, "has not ended")

	// A bill turning up later for a day declared empty is stored as usual.
	w.importLines(3, wx, payLine(tr))
	assert.True(t, reconcileDay(t, w, 3, wx, reconDay).OK())
}

// TestStatementResultLatestRunWins: runs of one day that finish out of
// order, and many at once: the row holds the run that started last.
func TestStatementResultLatestRunWins(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		base := time.Date(2024, 6, 2, 3, 0, 0, 0, time.UTC)
		day := "2024-06-01"
		report := func(missing int) statementbook.StatementReport {
			rep := statementbook.StatementReport{TenantID: 7, Channel: "ALIPAY", Day: day, Lines: missing}
			for range missing {
				rep.Items = append(rep.Items, statementbook.StatementItem{Category: statementbook.StatementMissingInLedger})
			}
			return rep
		}
		require.NoError(t, statementbook.RecordStatementResult(ctx, db, report(2), "sha-b", base.Add(2*time.Minute)))
		require.NoError(t, statementbook.RecordStatementResult(ctx, db, report(1), "sha-a", base.Add(time.Minute)), "an older run finishing later")
		rows := readResults(t, db, 7, channels.Alipay)
		require.Len(t, rows, 1)
		assert.Equal(t, "sha-b", rows[0].SHA1, "the older run changed nothing")
		assert.Equal(t, 2, rows[0].MissingInLedger)
		assert.True(t, rows[0].ReconciledAt.Equal(base.Add(2*time.Minute)), "got %s", rows[0].ReconciledAt)

		// Many runs of a day not recorded yet, at once, in a shuffled order
		// of start times: the last started wins.
		day = "2024-06-02"
		const n = 24
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			k := (i * 7) % n // a permutation of 0..n-1
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- statementbook.RecordStatementResult(ctx, db, report(k), fmt.Sprintf("sha-%02d", k), base.Add(time.Hour+time.Duration(k)*time.Second))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		rows = readResults(t, db, 7, channels.Alipay)
		require.Len(t, rows, 2)
		if rows[0].SHA1 == "sha-b" {
			rows = rows[1:]
		}
		assert.Equal(t, fmt.Sprintf("sha-%02d", n-1), rows[0].SHA1)
		assert.Equal(t, n-1, rows[0].MissingInLedger)
		assert.Equal(t, n-1, rows[0].Lines)
	})
}
