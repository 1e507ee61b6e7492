package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// binWorld is the real consumer binary with an in-process broker and a
// database of its own, refunds expected to be pre-registered.
type binWorld struct {
	t       *testing.T
	ctx     context.Context
	bin     string
	env     []string
	brokers []string
	db      *bun.DB
}

func newBinWorld(ctx context.Context, t *testing.T) *binWorld {
	t.Helper()
	bin := buildConsumer(ctx, t)
	cluster, brokers, err := inprocess.Start(map[string]int32{"channel-events": 2, "channel-events.dlq": 1, "channel-events.settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	w := &binWorld{t: t, ctx: ctx, bin: bin, brokers: brokers, db: db, env: append(os.Environ(),
		"PAYCB_DB_DSN="+dsn, "PAYCB_KAFKA_BROKERS="+brokers[0], "PAYCB_ADMIN_ADDR=127.0.0.1:0",
		"PAYCB_WECHAT_APIV3_KEY="+channelstest.APIv3Key, "PAYCB_REFUNDS_PREREGISTERED=true", "PAYCB_LOG_LEVEL=warn",
		"PAYCB_KAFKA_SESSION_TIMEOUT=10s", "PAYCB_KAFKA_HEARTBEAT_INTERVAL=300ms", "PAYCB_KAFKA_REBALANCE_TIMEOUT=10s",
		"PAYCB_KAFKA_MAX_WAIT=100ms", "PAYCB_SHUTDOWN_TIMEOUT=10s")}
	return w
}

// consumer runs the binary with args to its end: its standard output and
// error, and its exit status.
func (w *binWorld) consumer(args ...string) (stdout, stderr string, code int) {
	w.t.Helper()
	return runBinary(w.ctx, w.t, w.bin, w.env, args...)
}

// mustRun runs the binary and requires exit status code.
func (w *binWorld) mustRun(code int, args ...string) (stdout, stderr string) {
	w.t.Helper()
	out, errOut, got := w.consumer(args...)
	require.Equal(w.t, code, got, "consumer %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, errOut)
	return out, errOut
}

// startWorker starts `consumer run`; the cleanup stops it with SIGTERM and
// requires exit status 0.
func (w *binWorld) startWorker() {
	w.t.Helper()
	startConsumerRun(w.t, w.bin, w.env)
}

// publish sends callbacks to the input topic, keyed by channel and trade.
func (w *binWorld) publish(tr channelstest.Trade, values ...[]byte) {
	w.t.Helper()
	msgs := make([]kafkaops.Message, len(values))
	for i, v := range values {
		msgs[i] = kafkaops.Message{Key: []byte(string(tr.Channel) + ":" + tr.TradeNo), Value: v}
	}
	require.NoError(w.t, kafkaops.Produce(w.ctx, w.brokers, "channel-events", msgs))
}

// waitSettled waits until n claims are SETTLED.
func (w *binWorld) waitSettled(n int) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		var got int
		err := w.db.NewRaw(`SELECT COUNT(*) FROM ss_channel_idempotent WHERE status = 'SETTLED'`).Scan(w.ctx, &got)
		return err == nil && got >= n
	}, time.Minute, 50*time.Millisecond, "%d claims settled", n)
}

// reconcileJSON runs `reconcile --json` and requires exit status code.
func (w *binWorld) reconcileJSON(code int) settlement.ReconcileReport {
	w.t.Helper()
	out, _ := w.mustRun(code, "reconcile", "--json")
	var rep settlement.ReconcileReport
	require.NoError(w.t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

// TestRefundResolveThroughTheBinary: with refunds expected to be
// pre-registered, the worker settles an unregistered WeChat refund and an
// Alipay refund beyond its registration; reconcile lists both and exits 3;
// refund resolve records the decisions (audited, registrations untouched)
// and reconcile lists them resolved and exits 0; a later, different
// mismatch of the same refunds is open again. What cannot be resolved is
// refused with its exit status.
func TestRefundResolveThroughTheBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel) // after the worker's cleanup has stopped it
	w := newBinWorld(ctx, t)
	w.mustRun(0, "migrate")
	w.startWorker()

	wx, ali := channelstest.NewTrade(channels.WeChat, 1), channelstest.NewTrade(channels.Alipay, 2)
	w.publish(wx, channelstest.PaymentEnvelope(wx, channelstest.Delivery{}))
	w.publish(ali, channelstest.PaymentEnvelope(ali, channelstest.Delivery{}))
	w.waitSettled(2)
	tenant := "1001"
	w.mustRun(0, "refund", "register", "--tenant", tenant, "--channel", "ALIPAY", "--trade-no", ali.TradeNo, "--refund-no", "RF-1", "--amount", "100")
	w.mustRun(0, "refund", "register", "--tenant", tenant, "--channel", "WECHAT", "--trade-no", wx.TradeNo, "--refund-no", "OK-1", "--amount", "200")
	w.publish(wx,
		channelstest.RefundEnvelope(wx, channelstest.Refund{No: "WHO", Amount: 100, At: wx.PaidAt.Add(time.Hour)}, channelstest.Delivery{}),
		channelstest.RefundEnvelope(wx, channelstest.Refund{No: "OK-1", Amount: 200, At: wx.PaidAt.Add(2 * time.Hour)}, channelstest.Delivery{}))
	w.publish(ali, channelstest.RefundEnvelope(ali, channelstest.Refund{No: "RF-1", Cumulative: 300, At: ali.PaidAt.Add(time.Hour)}, channelstest.Delivery{}))
	w.waitSettled(5)

	// Both mismatches are open: exit 3.
	out, _ := w.mustRun(3, "reconcile")
	assert.Regexp(t, `refund_unregistered\s+1001\s+WECHAT\s+`+wx.TradeNo+`\s+WHO\s`, out)
	assert.Regexp(t, `refund_mismatch\s+1001\s+ALIPAY\s+`+ali.TradeNo+`\s+-\s+-\s+cumulative refunded 300 outside`, out)
	assert.NotContains(t, out, "resolved by an operator")
	rep := w.reconcileJSON(3)
	require.Len(t, rep.Discrepancies, 2, "%+v", rep.Discrepancies)
	assert.Empty(t, rep.Resolved)

	// Refused, each with its reason and status, nothing recorded.
	resolve := func(channel, trade, refund string, more ...string) []string {
		return append([]string{"refund", "resolve", "--tenant", tenant, "--channel", channel, "--trade-no", trade, "--refund-no", refund}, more...)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no note", resolve("WECHAT", wx.TradeNo, "WHO"), 2, "required: --note"},
		{"an empty note", resolve("WECHAT", wx.TradeNo, "WHO", "--note", " "), 2, "the note is empty"},
		{"no flags", []string{"refund", "resolve"}, 2, "required: --channel, --note, --refund-no, --tenant, --trade-no"},
		{"an unknown channel", resolve("PAYPAL", wx.TradeNo, "WHO", "--note", "n"), 2, `channel "PAYPAL"`},
		{"an unknown refund", resolve("WECHAT", wx.TradeNo, "who", "--note", "n"), 2, "neither a registration nor a refund callback"},
		{"an unknown tenant", append([]string{"refund", "resolve", "--tenant", "4242", "--channel", "WECHAT", "--trade-no", wx.TradeNo, "--refund-no", "WHO"}, "--note", "n"), 2, "tenant 4242"},
		{"the wrong channel", resolve("SQB", wx.TradeNo, "WHO", "--note", "n"), 2, "neither a registration nor a refund callback"},
		{"a refund with no mismatch", resolve("WECHAT", wx.TradeNo, "OK-1", "--note", "n"), 4, "reconcile finds none"},
	} {
		_, errOut, code := w.consumer(tc.args...)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, errOut)
		assert.Contains(t, errOut, tc.says, tc.name)
	}
	w.mustRun(3, "reconcile")

	// Resolved: exit 0, listed as resolved with the note.
	out, _ = w.mustRun(0, append(resolve("WECHAT", wx.TradeNo, "WHO"), "--note", "refunded by hand in the merchant portal; finance confirmed")...)
	assert.Contains(t, out, "resolved: tenant 1001 WECHAT trade "+wx.TradeNo+" refund WHO: refund_unregistered: ")
	out, _ = w.mustRun(0, append(resolve("ALIPAY", ali.TradeNo, "RF-1"), "--note", "Alipay confirms 300 refunded")...)
	assert.Contains(t, out, "the trade's cumulative total: refund_mismatch: cumulative refunded 300 outside")
	out, _ = w.mustRun(0, "reconcile")
	assert.Contains(t, out, "resolved by an operator (2,")
	assert.Contains(t, out, `"refunded by hand in the merchant portal; finance confirmed"`)
	assert.Contains(t, out, "reconcile: no discrepancies")
	rep = w.reconcileJSON(0)
	assert.Empty(t, rep.Discrepancies)
	require.Len(t, rep.Resolved, 2)
	notes := map[string]string{}
	for _, d := range rep.Resolved {
		notes[d.Channel] = d.Resolution.Note
		assert.NotEmpty(t, d.Fingerprint)
		assert.Contains(t, d.Resolution.ResolvedBy, "@")
	}
	assert.Equal(t, map[string]string{"WECHAT": "refunded by hand in the merchant portal; finance confirmed", "ALIPAY": "Alipay confirms 300 refunded"}, notes)

	_, errOut, code := w.consumer(append(resolve("WECHAT", wx.TradeNo, "WHO"), "--note", "again")...)
	assert.Equal(t, 4, code, errOut)
	assert.Contains(t, errOut, "resolved already")

	// Later, different mismatches of the same refunds are open again: the
	// Alipay trade's total moves with another refund; WHO is registered.
	w.publish(ali, channelstest.RefundEnvelope(ali, channelstest.Refund{No: "RF-2", Cumulative: 500, At: ali.PaidAt.Add(2 * time.Hour)}, channelstest.Delivery{}))
	w.waitSettled(6)
	w.mustRun(0, "refund", "register", "--tenant", tenant, "--channel", "WECHAT", "--trade-no", wx.TradeNo, "--refund-no", "WHO", "--amount", "100")
	rep = w.reconcileJSON(3)
	got := map[string]string{}
	for _, d := range rep.Discrepancies {
		got[d.Check+" "+d.Channel+" "+d.RefundNo] = d.Detail
	}
	assert.Equal(t, map[string]string{
		"refund_mismatch WECHAT WHO":      "refund callback settled POSTED but the registration is still REGISTERED",
		"refund_mismatch ALIPAY ":         "cumulative refunded 500 outside [succeeded 100, succeeded + open 100]",
		"refund_unregistered ALIPAY RF-2": "refund callback settled POSTED with no pre-registration",
	}, got)
	assert.Empty(t, rep.Resolved, "what was resolved is no longer what is found")

	// The registrations are as the channel made them.
	var statuses []struct {
		RefundNo string `bun:"refund_no"`
		Status   string `bun:"status"`
	}
	require.NoError(t, w.db.NewRaw(`SELECT refund_no, status FROM ss_refund_request ORDER BY refund_no`).Scan(ctx, &statuses))
	byNo := map[string]string{}
	for _, s := range statuses {
		byNo[s.RefundNo] = s.Status
	}
	assert.Equal(t, map[string]string{"OK-1": "SUCCEEDED", "RF-1": "SUCCEEDED", "WHO": "REGISTERED"}, byNo)

	// The audit trail: each resolve after the database opened, with its
	// result and its note.
	var rows []struct {
		Arguments string `bun:"arguments"`
		Result    string `bun:"result"`
		Detail    string `bun:"detail"`
	}
	require.NoError(t, w.db.NewRaw(`SELECT arguments, result, COALESCE(detail, '') AS detail FROM ss_operator_audit
WHERE command = 'refund resolve' ORDER BY id`).Scan(ctx, &rows))
	var results []string
	for _, r := range rows {
		results = append(results, r.Result)
	}
	assert.Equal(t, []string{"failed (exit 2)", "failed (exit 2)", "failed (exit 2)", "failed (exit 4)", "ok", "ok", "failed (exit 4)"}, results,
		"usage errors found before the database are not actions; the rest are recorded")
	require.Len(t, rows, 7)
	assert.Contains(t, rows[4].Arguments, `--note "refunded by hand in the merchant portal; finance confirmed"`)
	assert.Contains(t, rows[4].Detail, "refund_unregistered")
	assert.Contains(t, rows[4].Detail, "note: refunded by hand in the merchant portal; finance confirmed")
	assert.Contains(t, rows[6].Detail, "resolved already")
}
