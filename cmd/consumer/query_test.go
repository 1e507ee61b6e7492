package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/app/apptest"
	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// querierFiles writes the querier's files for the fake WeChat of keys:
// the credentials list, the statement key file, the channels' public keys
// and the fake's CA; it returns the settings naming them.
func querierFiles(t *testing.T, keys *fakechannel.Keys, caPEM []byte) map[string]string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	write("wechat.pem", string(fakechannel.PrivateKeyPEM(keys.Merchant)))
	write("wechatpay_pub.pem", string(fakechannel.PublicKeyPEM(&keys.Platform.PublicKey)))
	vars := map[string]string{
		"PAYCB_QUERY_CREDENTIALS_FILE": write("credentials.yaml", `- {tenant_id: 1001, channel: WECHAT, merchant_id: "`+fakechannel.WeChatMerchantID+`",
   serial_no: "`+fakechannel.WeChatSerialNo+`", private_key_file: wechat.pem}
`),
		"PAYCB_STATEMENT_KEY_FILE": write("statement_keys", "q1=0123456789abcdef0123456789abcdef\n"),
		"PAYCB_CHANNEL_PUBLIC_KEYS_FILE": write("channel_keys.yaml", `- {channel: WECHAT, merchant_id: "`+fakechannel.WeChatMerchantID+`", key_id: "`+fakechannel.WeChatPlatformKeyID+`", public_key_file: wechatpay_pub.pem}
`),
		"PAYCB_ADMIN_ADDR": "",
	}
	if caPEM != nil {
		vars["PAYCB_QUERY_TLS_CA_FILE"] = write("ca.pem", string(caPEM))
	}
	return vars
}

// TestQueryRunExitStatuses: what consumer query run needs, and the
// status it exits with when it is missing.
func TestQueryRunExitStatuses(t *testing.T) {
	lookup, _ := opsEnv(t)
	keys, err := fakechannel.SharedKeys()
	require.NoError(t, err)
	files := querierFiles(t, keys, nil)
	good := with(lookup, files)
	bad := filepath.Join(t.TempDir(), "bad")
	require.NoError(t, os.WriteFile(bad, []byte("not: [a list"), 0o600))

	cases := []struct {
		name   string
		lookup func(string) (string, bool)
		args   []string
		code   int
		msg    string
	}{
		{"no credentials file", with(good, map[string]string{"PAYCB_QUERY_CREDENTIALS_FILE": ""}), nil, 2, "PAYCB_QUERY_CREDENTIALS_FILE"},
		{"a bad credentials file", with(good, map[string]string{"PAYCB_QUERY_CREDENTIALS_FILE": bad}), nil, 2, "PAYCB_QUERY_CREDENTIALS_FILE"},
		{"no statement key", with(good, map[string]string{"PAYCB_STATEMENT_KEY_FILE": ""}), nil, 2, "PAYCB_STATEMENT_KEY_FILE"},
		{"a bad statement key file", with(good, map[string]string{"PAYCB_STATEMENT_KEY_FILE": bad}), nil, 2, "PAYCB_STATEMENT_KEY_FILE"},
		{"a bad public keys file", with(good, map[string]string{"PAYCB_CHANNEL_PUBLIC_KEYS_FILE": bad}), nil, 2, "PAYCB_CHANNEL_PUBLIC_KEYS_FILE"},
		{"a lease no longer than a query", good, []string{"--lease", "5s"}, 2, "--lease"},
		{"a database not migrated", with(good, map[string]string{"PAYCB_DB_DSN": sqldbtest.NewDatabase(t)}), nil, 1, "consumer migrate"},
		{"no input topic", with(good, map[string]string{"PAYCB_KAFKA_TOPIC": "no-such-topic"}), nil, 1, "never creates it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runCmd(t, tc.lookup, append([]string{"query", "run"}, tc.args...)...)
			assert.Equal(t, tc.code, exitCode(err), "%v\nstdout: %s\nstderr: %s", err, out, errOut)
			require.Error(t, err)
			assert.Contains(t, errOut+err.Error(), tc.msg)
		})
	}
}

// TestQueryRunAsksAndPublishes: consumer query run, on MariaDB and the
// in-process broker against the fake WeChat, asks about a registered
// payment with no callback once its first wait is over, publishes the
// proving answer to the input topic (signed), and stops on SIGTERM's
// context; a registration whose payment settled is never asked about.
func TestQueryRunAsksAndPublishes(t *testing.T) {
	lookup, _ := opsEnv(t)
	ctx := context.Background()
	wx := fakechannel.MustWeChat(t, fakechannel.Options{})
	files := querierFiles(t, wx.Keys(), wx.CertificatePEM())
	files["PAYCB_QUERY_WECHAT_URL"] = wx.URL()
	files["PAYCB_QUERY_FIRST_WAIT"] = "1s"
	env := with(lookup, files)

	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	svc, err := settlement.New(db, idempotent.NewStore(db), nil, nil)
	require.NoError(t, err)
	unpaid := sample.NewTrade(channels.WeChat, 1)
	wx.Script(unpaid, fakechannel.Step{Answer: fakechannel.Pending}, fakechannel.Step{Answer: fakechannel.Success})
	_, err = svc.RegisterPayment(ctx, settlement.PaymentRequest{
		TenantID: unpaid.TenantID, Channel: unpaid.Channel, MerchantID: fakechannel.WeChatMerchantID, MerchantOrderNo: unpaid.MerchantOrderNo,
		Amount: unpaid.Total, Currency: "CNY", CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().UTC().Add(time.Hour),
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"query", "run", "--interval", "100ms"}, io.Discard, io.Discard, env)
	}()

	require.Eventually(t, func() bool { return len(wx.Requests()) >= 1 }, 20*time.Second, 50*time.Millisecond, "asked after the first wait")
	var next []time.Time
	require.Eventually(t, func() bool {
		next = nil
		err := db.NewSelect().Table("ss_payment_registration").Column("query_next_at").
			Where("query_next_at IS NOT NULL").Scan(ctx, &next)
		return err == nil && len(next) == 1
	}, 10*time.Second, 50*time.Millisecond, "the not-yet answer recorded with its next ask")
	// The schedule's next ask is minutes away: bring it to now, as if that
	// time had passed.
	_, err = db.NewUpdate().Table("ss_payment_registration").Set("query_next_at = ?", time.Now().UTC()).
		Where("merchant_order_no = ?", unpaid.MerchantOrderNo).Exec(ctx)
	require.NoError(t, err)

	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")
	require.Eventually(t, func() bool {
		msgs, err := kafkaops.ReadAll(ctx, []string{brokers}, "channel-events")
		return err == nil && len(msgs) == 1
	}, 20*time.Second, 100*time.Millisecond, "the paid answer published")
	stop()
	select {
	case err := <-done:
		require.NoError(t, err, "a clean stop")
	case <-time.After(30 * time.Second):
		t.Fatal("consumer query run did not stop")
	}

	msgs, err := kafkaops.ReadAll(ctx, []string{brokers}, "channel-events")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "WECHAT:"+unpaid.TradeNo, string(msgs[0].Key))
	env2, err := channels.ParseEnvelope(msgs[0].Value)
	require.NoError(t, err)
	assert.Equal(t, channels.ContentTypeQuery, env2.ContentType)
	assert.Len(t, wx.Requests(), 2, "asked twice: not paid, then paid")

	var log []struct {
		Answer    string `bun:"answer"`
		Published bool   `bun:"published"`
	}
	require.NoError(t, db.NewSelect().Table("ss_query_log").Column("answer", "published").OrderExpr("id").Scan(ctx, &log))
	require.Len(t, log, 2)
	assert.False(t, log[0].Published)
	assert.True(t, log[1].Published)
}

// TestQuerierAndWorkerSettleAPaymentWithNoCallback is the querier end to
// end on MariaDB and the in-process broker: a registered payment whose
// callback never came is asked about after its first wait (not paid, then
// paid), the paid answer published, and the worker settles it through the
// claim with source query: the registration ends SUCCEEDED and is not
// asked about again, and the callback that comes late is a duplicate.
func TestQuerierAndWorkerSettleAPaymentWithNoCallback(t *testing.T) {
	lookup, _ := opsEnv(t)
	ctx := context.Background()
	wx := fakechannel.MustWeChat(t, fakechannel.Options{})
	files := querierFiles(t, wx.Keys(), wx.CertificatePEM())
	files["PAYCB_QUERY_WECHAT_URL"] = wx.URL()
	files["PAYCB_QUERY_FIRST_WAIT"] = "1s"
	files["PAYCB_WECHAT_APIV3_KEY"] = channelstest.APIv3Key
	files["PAYCB_KAFKA_SESSION_TIMEOUT"] = "6s"
	files["PAYCB_KAFKA_HEARTBEAT_INTERVAL"] = "300ms"
	files["PAYCB_KAFKA_MAX_WAIT"] = "100ms"
	env := with(lookup, files)

	workerEnv := with(env, map[string]string{"PAYCB_ADMIN_ADDR": "127.0.0.1:0"})
	cfg, err := config.Load(nil, workerEnv)
	require.NoError(t, err)
	reg := metrics.NewRegistry()
	apptest.MustRun(t, &app.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Registry: reg})

	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	svc, err := settlement.New(db, idempotent.NewStore(db), nil, nil)
	require.NoError(t, err)
	register := func(tr channelstest.Trade) {
		t.Helper()
		_, err := svc.RegisterPayment(ctx, settlement.PaymentRequest{
			TenantID: tr.TenantID, Channel: tr.Channel, MerchantID: fakechannel.WeChatMerchantID, MerchantOrderNo: tr.MerchantOrderNo,
			Amount: tr.Total, Currency: "CNY", CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().UTC().Add(time.Hour),
		})
		require.NoError(t, err)
	}
	asked := func(tr channelstest.Trade) int {
		n := 0
		for _, r := range wx.Requests() {
			if r.Asked == tr.MerchantOrderNo || r.Asked == tr.TradeNo {
				n++
			}
		}
		return n
	}
	status := func(tr channelstest.Trade) settlement.RegistrationStatus {
		r, err := svc.GetPaymentRegistration(ctx, tr.TenantID, tr.Channel, tr.MerchantOrderNo)
		require.NoError(t, err)
		return r.Status
	}

	paid := channelstest.NewTrade(channels.WeChat, 7)
	wx.Script(paid, fakechannel.Step{Answer: fakechannel.Pending}, fakechannel.Step{Answer: fakechannel.Success})
	register(paid)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"query", "run", "--interval", "100ms"}, io.Discard, io.Discard, env)
	}()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-done, "a clean stop")
	})

	require.Eventually(t, func() bool {
		var next []time.Time
		err := db.NewSelect().Table("ss_payment_registration").Column("query_next_at").
			Where("merchant_order_no = ?", paid.MerchantOrderNo).Where("query_next_at IS NOT NULL").Scan(ctx, &next)
		return err == nil && len(next) == 1
	}, 20*time.Second, 50*time.Millisecond, "asked after the first wait, not paid yet, its next ask recorded")
	require.Equal(t, settlement.RegistrationRegistered, status(paid))
	// The schedule's next ask is minutes away: bring it to now, as if that
	// time had passed.
	_, err = db.NewUpdate().Table("ss_payment_registration").Set("query_next_at = ?", time.Now().UTC()).
		Where("merchant_order_no = ?", paid.MerchantOrderNo).Exec(ctx)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return status(paid) == settlement.RegistrationSucceeded }, 30*time.Second, 100*time.Millisecond,
		"the paid answer settled by the worker")
	var source []string
	require.NoError(t, db.NewSelect().Table("ss_settled_outbox").Column("source").
		Where("channel_trade_no = ?", paid.TradeNo).Scan(ctx, &source))
	assert.Equal(t, []string{"query"}, source, "settled from the query's answer")
	assert.Equal(t, 2, asked(paid))
	out, errOut, err := runCmd(t, env, "trade", "--tenant", "1001", "--channel", "WECHAT", "--trade-no", paid.TradeNo, "--since", "0")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "payment query of "+paid.MerchantOrderNo)
	assert.Contains(t, out, ": not_yet (NOTPAY)")
	assert.Contains(t, out, ": paid (SUCCESS), published for the worker")

	// Not asked again, even when its next ask comes: a second registration
	// asked after that shows the rounds went on without it.
	_, err = db.NewUpdate().Table("ss_payment_registration").Set("query_next_at = ?", time.Now().UTC()).
		Where("merchant_order_no = ?", paid.MerchantOrderNo).Exec(ctx)
	require.NoError(t, err)
	later := channelstest.NewTrade(channels.WeChat, 8)
	wx.Script(later, fakechannel.Steps(50, fakechannel.Step{Answer: fakechannel.Pending})...)
	register(later)
	require.Eventually(t, func() bool { return asked(later) >= 1 }, 20*time.Second, 50*time.Millisecond)
	assert.Equal(t, 2, asked(paid), "a SUCCEEDED registration is never asked about")

	// The callback that comes late is a duplicate of the answer's event.
	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")
	require.NoError(t, kafkaops.Produce(ctx, []string{brokers}, "channel-events", []kafkaops.Message{
		{Key: []byte("WECHAT:" + paid.TradeNo), Value: channelstest.PaymentEnvelope(paid, channelstest.Delivery{})},
	}))
	require.Eventually(t, func() bool {
		return eventsOutcome(t, reg, "duplicate") == 1
	}, 30*time.Second, 100*time.Millisecond, "the late callback is a duplicate")
	var rows int64
	rows, err = db.NewSelect().Table("ss_ledger_entry").Where("channel_trade_no = ?", paid.TradeNo).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rows, "posted once: one debit, one credit")
}

// eventsOutcome sums paycb_events_total of outcome over its other labels.
func eventsOutcome(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
