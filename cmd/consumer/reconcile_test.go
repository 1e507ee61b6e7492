package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestReconcileGatesAJob: on a correct ledger whose refunds were never
// registered, reconcile exits 0 by default; with one ledger amount altered
// it exits 3 naming the row; checks are selected by name, and an unknown
// name is a usage error.
func TestReconcileGatesAJob(t *testing.T) {
	lookup, exec := opsEnv(t)
	ctx := context.Background()
	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	claims := idempotent.NewStore(db)
	svc, err := settlement.New(db, claims, nil, nil)
	require.NoError(t, err)
	dec := channels.NewDecoder(channelstest.Keys())
	wx, ali := channelstest.NewTrade(channels.WeChat, 1), channelstest.NewTrade(channels.Alipay, 2)
	for i, value := range [][]byte{
		channelstest.PaymentEnvelope(wx, channelstest.Delivery{}),
		channelstest.RefundEnvelope(wx, channelstest.Refund{No: "rf-1", Amount: 500}, channelstest.Delivery{}),
		channelstest.PaymentEnvelope(ali, channelstest.Delivery{}),
		channelstest.RefundEnvelope(ali, channelstest.Refund{No: "rf-2", Cumulative: 300}, channelstest.Delivery{}),
	} {
		res, err := dec.Decode(value)
		require.NoError(t, err)
		body, err := json.Marshal(res.Event)
		require.NoError(t, err)
		_, err = claims.Acquire(ctx, idempotent.Claim{
			TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type, Fingerprint: res.Event.Fingerprint,
			Event: body, Source: idempotent.Source{Topic: "channel-events", Partition: 0, Offset: int64(i)},
		})
		require.NoError(t, err)
		_, err = svc.Settle(ctx, res.Event)
		require.NoError(t, err)
	}

	out, _, err := runCmd(t, lookup, "reconcile")
	require.NoError(t, err, out)
	assert.Contains(t, out, "reconcile: no discrepancies")
	assert.Regexp(t, `refund_unregistered\s+skipped: refunds are not expected to be pre-registered`, out)

	preregistered := func(k string) (string, bool) {
		if k == "PAYCB_REFUNDS_PREREGISTERED" {
			return "true", true
		}
		return lookup(k)
	}
	out, _, err = runCmd(t, preregistered, "reconcile")
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err), out)
	assert.Regexp(t, `refund_unregistered\s+2\s+2`, out)
	out, _, err = runCmd(t, preregistered, "reconcile", "--skip", "refund_unregistered")
	require.NoError(t, err, out)

	out, _, err = runCmd(t, lookup, "reconcile", "--list-checks")
	require.NoError(t, err, out)
	for _, c := range settlement.Checks {
		assert.Contains(t, out, c+"  ")
	}

	for _, args := range [][]string{{"--checks", "posting_balance"}, {"--skip", "order_state,nope"}} {
		_, _, err = runCmd(t, lookup, append([]string{"reconcile"}, args...)...)
		require.Error(t, err, "%v", args)
		assert.Equal(t, 2, exitCode(err), "%v: %v", args, err)
	}

	// One altered ledger row fails the run and is named.
	key := "WECHAT:" + wx.TradeNo + ":PAYMENT_RECEIVED"
	var id int64
	require.NoError(t, db.NewRaw(`SELECT id FROM ss_ledger_entry WHERE idempotent_key = ? AND account = 'merchant_payable'`, key).Scan(ctx, &id))
	exec(`UPDATE ss_ledger_entry SET amount = amount + 1 WHERE id = ?`, id)
	out, _, err = runCmd(t, lookup, "reconcile")
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err), out)
	assert.Contains(t, out, key)
	assert.Contains(t, out, fmt.Sprintf("#%d CREDIT merchant_payable %d", id, wx.Total+1))

	out, _, err = runCmd(t, lookup, "reconcile", "--json", "--checks", "posting_unbalanced")
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err), out)
	var rep settlement.ReconcileReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, []string{"posting_unbalanced"}, rep.Checks)
	require.Len(t, rep.Discrepancies, 1)
	assert.Contains(t, rep.Discrepancies[0].LedgerIDs, id)

	out, _, err = runCmd(t, lookup, "reconcile", "--skip", "posting_unbalanced,order_ledger_mismatch")
	require.NoError(t, err, out)
}
