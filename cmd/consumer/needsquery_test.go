package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// TestQuerierSettlesStatementNeedsQueryRefunds is statement needs_query
// items as the querier's work, end to end on MariaDB, the in-process
// broker and the fake Alipay: two Alipay refunds reach the statement but
// no callback reaches the worker, so reconcile --publish-missing lists
// both needs_query; it makes each a refund registration, once however
// often it runs. The querier asks about them: the whole trade's refund is
// answered with the callback's event, which the worker settles, and the
// day no longer lists it; the partial refund's answer cannot prove the
// callback's cumulative, so nothing is posted and it stays listed, with
// that answer, in statement reconcile and in reconcile's refund_open.
func TestQuerierSettlesStatementNeedsQueryRefunds(t *testing.T) {
	ctx := context.Background()
	vars := statementEnv(t)
	ap := fakechannel.MustAlipay(t, fakechannel.Options{})
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	write("alipay.pem", string(fakechannel.PrivateKeyPEM(ap.Keys().Merchant)))
	write("alipay_pub.pem", string(fakechannel.PublicKeyPEM(&ap.Keys().Platform.PublicKey)))
	// The sample callbacks' seller, whom the orders are bound to.
	vars["PAYCB_QUERY_CREDENTIALS_FILE"] = write("credentials.yaml", `- {tenant_id: 1001, channel: ALIPAY, merchant_id: "2088101117955611",
   app_id: "`+fakechannel.AlipayAppID+`", private_key_file: alipay.pem}
`)
	vars["PAYCB_CHANNEL_PUBLIC_KEYS_FILE"] = write("channel_keys.yaml", `- {channel: ALIPAY, app_id: "`+fakechannel.AlipayAppID+`", public_key_file: alipay_pub.pem}
`)
	vars["PAYCB_QUERY_TLS_CA_FILE"] = write("ca.pem", string(ap.CertificatePEM()))
	vars["PAYCB_QUERY_ALIPAY_URL"] = ap.GatewayURL()
	vars["PAYCB_QUERY_FIRST_WAIT"] = "1s"
	day := channelstest.BaseTime.Format(time.DateOnly)

	full, partial := channelstest.NewTrade(channels.Alipay, 961), channelstest.NewTrade(channels.Alipay, 962)
	rf := channelstest.Refund{No: "F961-R1", Amount: full.Total, Cumulative: full.Total}
	rp := channelstest.Refund{No: "P962-R1", Amount: 300, Cumulative: 300}
	d := channelstest.Delivery{}
	dec := channels.NewDecoder(channelstest.Keys())
	var events []channels.Event
	decode := func(value []byte) []byte {
		t.Helper()
		res, err := dec.Decode(value)
		require.NoError(t, err)
		events = append(events, res.Event)
		return value
	}
	payments := [][]byte{decode(channelstest.PaymentEnvelope(full, d)), decode(channelstest.PaymentEnvelope(partial, d))}
	decode(channelstest.RefundEnvelope(full, rf, d)) // withheld: in the statement only
	decode(channelstest.RefundEnvelope(partial, rp, d))

	w := runWorker(t, vars)
	produce(t, vars, full, payments[0])
	produce(t, vars, partial, payments[1])
	w.waitConsumed(t, 2)
	w.stop()

	lines, err := statementsample.FromEvents(channels.Alipay, events)
	require.NoError(t, err)
	f, err := alipay.SampleBill("20880000000000000156", day, lines)
	require.NoError(t, err)
	bill := write("bill", string(f.Data))
	out, errOut, err := consumerCmd(t, vars, "statement", "import", "--channel", "ALIPAY", "--tenant", "1001", "--file", bill)
	require.NoError(t, err, out+errOut)

	publish := func() statementReconcileJSON {
		t.Helper()
		out, errOut, err := consumerCmd(t, vars, "statement", "reconcile", "--channel", "ALIPAY", "--tenant", "1001", "--date", day,
			"--publish-missing", "--json")
		assert.Equal(t, exitFound, exitCode(err), out+errOut)
		var rep statementReconcileJSON
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out+errOut)
		require.NotNil(t, rep.Publish, out)
		return rep
	}
	db, err := sqldb.OpenMySQL(vars["PAYCB_DB_DSN"])
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	registered := func() []settlement.Registration {
		t.Helper()
		var regs []settlement.Registration
		require.NoError(t, db.NewSelect().Model(&regs).OrderExpr("refund_no").Scan(ctx))
		return regs
	}

	for run := 1; run <= 2; run++ {
		rep := publish()
		require.Len(t, rep.Publish.NeedsQuery, 2, "run %d", run)
		for _, it := range rep.Publish.NeedsQuery {
			assert.Contains(t, it.Reason, "alipay.trade.fastpay.refund.query")
			assert.Contains(t, it.Query, "the querier asks after its first wait", "run %d", run)
		}
		regs := registered()
		require.Len(t, regs, 2, "run %d: one registration per refund, however often it runs", run)
		assert.Equal(t, []string{"F961-R1", "P962-R1"}, []string{regs[0].RefundNo, regs[1].RefundNo})
		assert.Equal(t, []int64{full.Total, 300}, []int64{regs[0].Amount, regs[1].Amount}, "each refund's own amount")
		key, err := idempotent.NewRefundKey("ALIPAY", full.TradeNo, rf.No)
		require.NoError(t, err)
		require.NotNil(t, regs[0].Key)
		assert.Equal(t, string(key), *regs[0].Key, "the callback's key")
	}

	ap.ScriptRefund(full, rf, fakechannel.Step{Answer: fakechannel.Success})
	ap.ScriptRefund(partial, rp, fakechannel.Step{Answer: fakechannel.Success})
	w = runWorker(t, vars)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"query", "run", "--interval", "100ms"}, io.Discard, io.Discard,
			with(lookupIn(vars), map[string]string{"PAYCB_ADMIN_ADDR": ""}))
	}()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-done, "a clean stop")
	})
	svc, err := settlement.New(db, idempotent.NewStore(db), nil, nil)
	require.NoError(t, err)
	status := func(tr channelstest.Trade, r channelstest.Refund) settlement.RegistrationStatus {
		reg, err := svc.GetRegistration(ctx, tr.TenantID, tr.Channel, tr.TradeNo, r.No)
		require.NoError(t, err)
		return reg.Status
	}
	require.Eventually(t, func() bool { return status(full, rf) == settlement.RegistrationSucceeded }, 30*time.Second, 100*time.Millisecond,
		"the whole trade's refund answered and settled by the worker")
	require.Eventually(t, func() bool {
		n, err := db.NewSelect().Table("ss_query_log").Where("refund_no = ?", rp.No).Count(ctx)
		return err == nil && n >= 1
	}, 30*time.Second, 100*time.Millisecond, "the partial refund asked about")
	var source []string
	require.NoError(t, db.NewSelect().Table("ss_settled_outbox").Column("source").
		Where("channel_trade_no = ?", full.TradeNo).Where("event_type = ?", string(idempotent.RefundSucceeded)).Scan(ctx, &source))
	assert.Equal(t, []string{"query"}, source, "settled from the query's answer")
	o, err := settlement.GetOrder(ctx, db, partial.TenantID, channels.Alipay, partial.TradeNo)
	require.NoError(t, err)
	assert.Zero(t, o.RefundedAmount, "the partial refund's answer posts nothing")
	assert.Equal(t, settlement.RegistrationRegistered, status(partial, rp))

	// The day lists only the partial refund, with what the channel said.
	rep := publish()
	require.Len(t, rep.Items, 1, "the settled refund is no longer missing")
	assert.Equal(t, partial.TradeNo, rep.Items[0].TradeNo)
	require.Len(t, rep.Publish.NeedsQuery, 1)
	q := rep.Publish.NeedsQuery[0].Query
	assert.Contains(t, q, "the querier stopped asking after 1 query", "a partial refund's answer proves no event: asking again would learn nothing")
	assert.Contains(t, q, "a partial refund; no event")
	require.Len(t, registered(), 2, "nothing registered again")

	// reconcile's refund_open says the same of the registration.
	out, errOut, err = consumerCmd(t, vars, "reconcile", "--checks", "refund_open", "--open-after", "1ms")
	assert.Equal(t, exitFound, exitCode(err), out+errOut)
	assert.Contains(t, out, rp.No)
	assert.Contains(t, out, "a partial refund; no event")
	assert.NotContains(t, out, rf.No, "the settled refund is not open")
	assert.Zero(t, w.events(t, map[string]string{"outcome": "dead_lettered"}), "no dead letter")
}
