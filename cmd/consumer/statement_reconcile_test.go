package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestStatementReconcile runs the verb over a day whose ledger holds one
// WeChat payment: exit 0 when the statement agrees, 3 when it holds a
// payment the ledger never saw, 1 for a day with no statement, 2 for a
// missing or malformed flag.
func TestStatementReconcile(t *testing.T) {
	ctx := context.Background()
	lookup, _ := opsEnv(t)
	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	paid, withheld := channelstest.NewTrade(channels.WeChat, 1), channelstest.NewTrade(channels.WeChat, 2)
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(channelstest.PaymentEnvelope(paid, channelstest.Delivery{}))
	require.NoError(t, err)
	ev := res.Event
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	claims := idempotent.NewStore(db)
	_, err = claims.Acquire(ctx, idempotent.Claim{
		TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body, OccurredAt: ev.OccurredAt,
		Source: idempotent.Source{Topic: "channel-events", Partition: 0, Offset: 1},
	})
	require.NoError(t, err)
	svc, err := settlement.New(db, claims, nil, nil)
	require.NoError(t, err)
	_, err = svc.Settle(ctx, ev)
	require.NoError(t, err)

	line := func(no int, tr channelstest.Trade) statements.Line {
		return statements.Line{
			LineNo: no, Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo,
			Amount: tr.Total, SettledAmount: tr.Total, FeeMicroYuan: 15480, Status: "SUCCESS", Time: tr.PaidAt, Currency: "CNY",
		}
	}
	importBill := func(sha string, lines ...statements.Line) {
		_, err := ops.ImportStatement(ctx, db, 1001, statements.Statement{Channel: channels.WeChat, Format: "test", SHA1: sha, Lines: lines}, time.Now())
		require.NoError(t, err)
	}
	day := channelstest.BaseTime.Format(time.DateOnly)
	args := []string{"statement", "reconcile", "--channel", "WECHAT", "--tenant", "1001", "--date", day}

	importBill("clean", line(2, paid))
	out, stderr, err := runCmd(t, lookup, args...)
	require.NoError(t, err, out+stderr)
	assert.Contains(t, out, "no discrepancies")
	assert.Contains(t, out, "fees of the day: 0.15480 yuan")

	importBill("withheld", line(2, paid), line(3, withheld))
	out, _, err = runCmd(t, lookup, args...)
	assert.Equal(t, exitFound, exitCode(err), out)
	assert.Regexp(t, `missing_in_ledger\s+`+withheld.TradeNo+`\s+-\s+2580\s+-\s+3\s`, out)

	out, _, err = runCmd(t, lookup, append(args, "--json")...)
	assert.Equal(t, exitFound, exitCode(err))
	var rep ops.StatementReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Items, 1)
	assert.Equal(t, ops.StatementMissingInLedger, rep.Items[0].Category)

	_, _, err = runCmd(t, lookup, "statement", "reconcile", "--channel", "WECHAT", "--tenant", "1001", "--date", "2024-06-05")
	require.Error(t, err)
	assert.Equal(t, exitFailure, exitCode(err))
	assert.Contains(t, err.Error(), "nothing to reconcile")

	for _, bad := range [][]string{
		{"--channel", "WECHAT", "--tenant", "1001"},
		{"--channel", "WECHAT", "--tenant", "1001", "--date", "01/06/2024"},
		{"--channel", "PAYPAL", "--tenant", "1001", "--date", day},
	} {
		_, _, err := runCmd(t, lookup, append([]string{"statement", "reconcile"}, bad...)...)
		assert.Equal(t, exitUsage, exitCode(err), "%v: %v", bad, err)
	}
}
