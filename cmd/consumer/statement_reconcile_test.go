package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/app/apptest"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
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
		_, err := statementbook.ImportStatement(ctx, db, 1001, statements.Statement{Channel: channels.WeChat, Format: "test", SHA1: sha, Lines: lines}, time.Now())
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
	assert.Regexp(t, `missing_in_ledger\s+`+withheld.TradeNo+`\s+`+withheld.MerchantOrderNo+`\s+-\s+2580\s+-\s+3\s`, out,
		"the merchant order number, which merchants search by, beside the trade")

	out, _, err = runCmd(t, lookup, append(args, "--json")...)
	assert.Equal(t, exitFound, exitCode(err))
	var rep statementbook.StatementReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Items, 1)
	assert.Equal(t, statementbook.StatementMissingInLedger, rep.Items[0].Category)
	assert.Equal(t, withheld.MerchantOrderNo, rep.Items[0].MerchantOrderNo)
	assert.NotEmpty(t, rep.Items[0].MerchantOrderNo)

	// A day with nothing imported is no_statement (exit 3), until the
	// channel's answer that there is none is recorded.
	quiet := []string{"statement", "reconcile", "--channel", "WECHAT", "--tenant", "1001", "--date", "2024-06-05"}
	out, _, err = runCmd(t, lookup, append(quiet, "--json")...)
	require.Error(t, err)
	assert.Equal(t, exitFound, exitCode(err))
	assert.Contains(t, err.Error(), "no_statement")
	rep = statementbook.StatementReport{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Items, 1)
	assert.Equal(t, statementbook.StatementNoStatement, rep.Items[0].Category)
	empty := []string{"statement", "empty", "--channel", "WECHAT", "--tenant", "1001", "--date", "2024-06-05"}
	_, _, err = runCmd(t, lookup, empty...)
	assert.Equal(t, exitUsage, exitCode(err), "--note is required")
	out, _, err = runCmd(t, lookup, append(empty, "--note", "NO_STATEMENT_EXIST from GET /v3/bill/tradebill")...)
	require.NoError(t, err)
	assert.Contains(t, out, "2024-06-05: declared")
	_, _, err = runCmd(t, lookup, quiet...)
	require.NoError(t, err, "reconciled against an empty statement: no posting of the day")
	_, _, err = runCmd(t, lookup, "statement", "empty", "--channel", "WECHAT", "--tenant", "1001", "--date", "2024-06-01", "--note", "x")
	assert.Equal(t, exitFailure, exitCode(err), "the day holds a statement's lines")
	for _, bad := range [][]string{
		{"--from", "2024-06-05"},
		{"--date", "2024-06-05", "--from", "2024-06-01", "--to", "2024-06-02"},
		{"--from", "2024-06-05", "--to", "2024-06-01"},
		{"--date", "2099-01-01"},
		{"--from", "2024-01-01", "--to", "2024-06-01"},
	} {
		_, _, err = runCmd(t, lookup, append([]string{"statement", "empty", "--channel", "WECHAT", "--tenant", "1001", "--note", "x"}, bad...)...)
		assert.Equal(t, exitUsage, exitCode(err), "%v", bad)
	}

	for _, bad := range [][]string{
		{"--channel", "WECHAT", "--tenant", "1001"},
		{"--channel", "WECHAT", "--tenant", "1001", "--date", "01/06/2024"},
		{"--channel", "PAYPAL", "--tenant", "1001", "--date", day},
	} {
		_, _, err := runCmd(t, lookup, append([]string{"statement", "reconcile"}, bad...)...)
		assert.Equal(t, exitUsage, exitCode(err), "%v: %v", bad, err)
	}
}

// testWorker is a worker started on a test's configuration, with its metrics.
type testWorker struct {
	reg  *prometheus.Registry
	stop func()
}

// runWorker starts the worker on vars' configuration; stop (also run when
// the test ends) stops it and waits for it.
func runWorker(t *testing.T, vars map[string]string) testWorker {
	t.Helper()
	cfg, err := config.Load(nil, lookupIn(vars))
	require.NoError(t, err)
	reg := metrics.NewRegistry()
	m := apptest.MustRun(t, &app.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Registry: reg})
	stop := func() { apptest.MustClose(t, m) }
	return testWorker{reg: reg, stop: stop}
}

// events sums paycb_events_total over the series whose labels include
// match.
func (w testWorker) events(t *testing.T, match map[string]string) int {
	t.Helper()
	mfs, err := w.reg.Gather()
	require.NoError(t, err)
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if labels[k] != v {
					continue series
				}
			}
			n += m.GetCounter().GetValue()
		}
	}
	return int(n)
}

// waitConsumed waits until the worker has counted n messages.
func (w testWorker) waitConsumed(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return w.events(t, nil) >= n }, 60*time.Second, 50*time.Millisecond,
		"the worker consumes %d messages", n)
	assert.Equal(t, n, w.events(t, nil), "no more than the messages produced")
}

// statementEnv is smokeEnv with the test APIv3 key for every tenant.
func statementEnv(t *testing.T) map[string]string {
	t.Helper()
	vars := smokeEnv(t)
	vars["PAYCB_WECHAT_APIV3_KEY"] = channelstest.APIv3Key
	vars["PAYCB_TENANT_MERCHANTS_FILE"] = writeMerchants(t, testMerchants)
	vars["PAYCB_STATEMENT_KEY_FILE"] = writeStatementKeys(t, testStatementKeys)
	return vars
}

// testMerchants binds to tenant 1001 the merchants channelstest's
// callbacks and statementsample's files name, and to tenant 1002 the WeChat
// merchant tenant1002 names.
const testMerchants = `# tenant 1001: the callbacks' merchants, then the statement files'
1001 WECHAT 1230000109
1001 ALIPAY 2088101117955611
1001 SQB    01939202039923029
1001 WECHAT 1900000000
1001 ALIPAY 2088000000000000
1001 SQB    100000000000000001
# tenant 1002: a WeChat merchant of its own
1002 WECHAT 1230000102
1002 WECHAT 1900000002
`

// tenant1002 makes a WeChat callback name tenant 1002's merchant.
var tenant1002 = channelstest.Delivery{Edit: func(m map[string]any) { m["mchid"] = "1230000102" }}

// writeMerchants writes a merchant binding file for the test.
func writeMerchants(t *testing.T, contents string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "merchants")
	require.NoError(t, os.WriteFile(path, []byte(contents), 0o600))
	return path
}

// testStatementKeys is the statement key file --publish-missing signs with
// and the workers verify with in these tests.
const testStatementKeys = "# current first\ncmd-test-2=fedcba9876543210fedcba9876543210\ncmd-test-1=0123456789abcdef0123456789abcdef\n"

// writeStatementKeys writes a statement key file and returns its path.
func writeStatementKeys(t *testing.T, contents string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "statement-keys")
	require.NoError(t, os.WriteFile(path, []byte(contents), 0o600))
	return path
}

// signed returns the headers of a message of value: the statement signature
// of the key file vars names when value is a statement event, none for a
// callback.
func signed(t *testing.T, vars map[string]string, value []byte) []kafka.Header {
	t.Helper()
	env, err := channels.ParseEnvelope(value)
	if err != nil || !env.FromStatement() || vars["PAYCB_STATEMENT_KEY_FILE"] == "" {
		return nil
	}
	keys, err := statementauth.Load(vars["PAYCB_STATEMENT_KEY_FILE"])
	require.NoError(t, err)
	sig, err := keys.Sign(value)
	require.NoError(t, err)
	return []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}}
}

// produce writes values to the input topic keyed CHANNEL:trade_no, as the
// receiver keys callbacks, statement events signed as --publish-missing
// signs them.
func produce(t *testing.T, vars map[string]string, tr channelstest.Trade, values ...[]byte) {
	t.Helper()
	msgs := make([]kafkaops.Message, len(values))
	for i, v := range values {
		msgs[i] = kafkaops.Message{Key: []byte(string(tr.Channel) + ":" + tr.TradeNo), Value: v, Headers: signed(t, vars, v)}
	}
	require.NoError(t, kafkaops.Produce(context.Background(), []string{vars["PAYCB_KAFKA_BROKERS"]}, "channel-events", msgs))
}

// statementValue is the value --publish-missing publishes for the event the
// callback value decodes to: rebuilt from what a statement line says.
func statementValue(t *testing.T, callback []byte) []byte {
	t.Helper()
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(callback)
	require.NoError(t, err)
	cb := res.Event
	ev, err := channels.NewStatementEvent(channels.Event{
		TenantID: cb.TenantID, Channel: cb.Channel, Type: cb.Type, TradeNo: cb.TradeNo, MerchantOrderNo: cb.MerchantOrderNo,
		RefundNo: cb.RefundNo, OrderTotal: cb.OrderTotal, RefundAmount: cb.RefundAmount,
		OccurredAt: cb.OccurredAt.Add(-2 * time.Second), ReceivedAt: time.Now(), RawStatus: "SUCCESS",
	})
	require.NoError(t, err)
	v, err := channels.StatementEnvelope(ev, time.Now())
	require.NoError(t, err)
	return v
}

// TestStatementEventAndCallbackAreOneEvent: the worker claims an event
// rebuilt from a statement like the callback of the same event, whichever
// comes first: the second is a duplicate, never a conflict, and the ledger
// posts it once. WeChat payment and refund, Alipay payment, SQB payment.
func TestStatementEventAndCallbackAreOneEvent(t *testing.T) {
	vars := statementEnv(t)
	dsn := vars["PAYCB_DB_DSN"]
	d := channelstest.Delivery{}
	type pair struct {
		tr                  channelstest.Trade
		callback, statement []byte
	}
	var pairs []pair
	produced := 0
	for i, ch := range channels.Codes() {
		for j, statementFirst := range []bool{true, false} {
			tr := channelstest.NewTrade(ch, 800+10*i+j)
			cb := channelstest.PaymentEnvelope(tr, d)
			p := pair{tr, cb, statementValue(t, cb)}
			pairs = append(pairs, p)
			if statementFirst {
				produce(t, vars, tr, p.statement, p.callback)
			} else {
				produce(t, vars, tr, p.callback, p.statement)
			}
			produced += 2
		}
	}
	for j, statementFirst := range []bool{true, false} {
		tr := channelstest.NewTrade(channels.WeChat, 830+j)
		cb := channelstest.RefundEnvelope(tr, channelstest.Refund{No: fmt.Sprintf("RF-%d", j), Amount: 700}, d)
		p := pair{tr, cb, statementValue(t, cb)}
		pairs = append(pairs, p)
		pay := channelstest.PaymentEnvelope(tr, d)
		if statementFirst {
			produce(t, vars, tr, pay, p.statement, p.callback)
		} else {
			produce(t, vars, tr, pay, p.callback, p.statement)
		}
		produced += 3
	}

	w := runWorker(t, vars)
	w.waitConsumed(t, produced)
	assert.Equal(t, len(pairs), w.events(t, map[string]string{"outcome": "duplicate"}))
	assert.Equal(t, produced-len(pairs), w.events(t, map[string]string{"outcome": "acquired"}))
	assert.Zero(t, w.events(t, map[string]string{"outcome": "conflict"}))
	assert.Zero(t, w.events(t, map[string]string{"outcome": "dead_lettered"}))
	for _, m := range []map[string]string{
		{"channel": "WECHAT", "event_type": "PAYMENT_RECEIVED"},
		{"channel": "WECHAT", "event_type": "REFUND_SUCCEEDED"},
		{"channel": "ALIPAY", "event_type": "PAYMENT_RECEIVED"},
		{"channel": "SQB", "event_type": "PAYMENT_RECEIVED"},
	} {
		m["outcome"] = "duplicate"
		assert.Equal(t, 2, w.events(t, m), "%v: one duplicate in each order", m)
	}

	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	for _, p := range pairs {
		res, err := channels.NewDecoder(channelstest.Keys()).Decode(p.callback)
		require.NoError(t, err)
		n, err := db.NewSelect().TableExpr("ss_ledger_entry").Where("tenant_id = ?", res.Event.TenantID).
			Where("idempotent_key = ?", string(res.Event.Key)).Count(context.Background())
		require.NoError(t, err)
		assert.EqualValues(t, 2, n, "%s posted once, both legs", res.Event.Key)
	}
}

// TestStatementReconcilePublishMissing is the recovery an operator runs:
// a day of the three channels from which some callbacks were withheld
// (a WeChat barcode payment never had one); statements generated from the
// whole day are imported; reconcile --publish-missing publishes what the
// statements describe exactly, twice without publishing twice, and lists
// the cumulative refunds for the query API; the worker settles what was
// published; the withheld callbacks, delivered afterwards, are duplicates;
// then every day reconciles clean. Beside it, a WeChat refund the statement
// shows PROCESSING that the ledger posted: a status_mismatch, nothing
// published.
func TestStatementReconcilePublishMissing(t *testing.T) {
	vars := statementEnv(t)
	lookup := lookupIn(vars)
	audits := auditRows(t, lookup)
	d := channelstest.Delivery{}
	dec := channels.NewDecoder(channelstest.Keys())
	day := channelstest.BaseTime.Format(time.DateOnly)

	type callback struct {
		tr    channelstest.Trade
		value []byte
	}
	var delivered, withheld []callback
	events := map[channels.Channel][]channels.Event{}
	add := func(list *[]callback, tr channelstest.Trade, value []byte) {
		*list = append(*list, callback{tr, value})
		res, err := dec.Decode(value)
		require.NoError(t, err)
		events[tr.Channel] = append(events[tr.Channel], res.Event)
	}
	trade := func(ch channels.Channel, seq int) channelstest.Trade { return channelstest.NewTrade(ch, seq) }

	// WeChat: w2 paid by barcode (never a callback); w3's refund and all of
	// w4 withheld.
	w1, w2, w3, w4 := trade(channels.WeChat, 901), trade(channels.WeChat, 902), trade(channels.WeChat, 903), trade(channels.WeChat, 904)
	add(&delivered, w1, channelstest.PaymentEnvelope(w1, d))
	add(&withheld, w2, channelstest.PaymentEnvelope(w2, d)) // its event is in the statement only
	add(&delivered, w3, channelstest.PaymentEnvelope(w3, d))
	add(&withheld, w3, channelstest.RefundEnvelope(w3, channelstest.Refund{No: "W3-R1", Amount: 800}, d))
	add(&withheld, w4, channelstest.PaymentEnvelope(w4, d))
	add(&withheld, w4, channelstest.RefundEnvelope(w4, channelstest.Refund{No: "W4-R1", Amount: 500}, d))
	// Alipay and Shouqianba: a payment withheld, a refund withheld.
	a1, a2 := trade(channels.Alipay, 911), trade(channels.Alipay, 912)
	add(&delivered, a1, channelstest.PaymentEnvelope(a1, d))
	add(&withheld, a1, channelstest.RefundEnvelope(a1, channelstest.Refund{No: "A1-R1", Cumulative: 600}, d))
	add(&withheld, a2, channelstest.PaymentEnvelope(a2, d))
	s1, s2 := trade(channels.SQB, 921), trade(channels.SQB, 922)
	add(&delivered, s1, channelstest.PaymentEnvelope(s1, d))
	add(&withheld, s1, channelstest.RefundEnvelope(s1, channelstest.Refund{No: "S1-R1", Cumulative: 700}, d))
	add(&withheld, s2, channelstest.PaymentEnvelope(s2, d))
	// Tenant 1002: a refund the ledger posted, PROCESSING on the statement.
	p := trade(channels.WeChat, 931)
	p.TenantID = 1002
	pDelivered := []callback{
		{p, channelstest.PaymentEnvelope(p, tenant1002)},
		{p, channelstest.RefundEnvelope(p, channelstest.Refund{No: "P-R1", Amount: 900}, tenant1002)},
	}

	w := runWorker(t, vars)
	for _, c := range append(slices.Clone(delivered), pDelivered...) {
		produce(t, vars, c.tr, c.value)
	}
	w.waitConsumed(t, len(delivered)+len(pDelivered))
	w.stop() // no worker while publishing: what each run publishes is then certain

	// The statements of the whole day, imported through the command.
	dir := t.TempDir()
	importFile := func(tenant int64, ch channels.Channel, f statementsample.File) {
		t.Helper()
		name := filepath.Join(dir, fmt.Sprintf("%d-%s", tenant, ch))
		require.NoError(t, os.WriteFile(name, f.Data, 0o600))
		args := []string{"statement", "import", "--channel", string(ch), "--tenant", fmt.Sprint(tenant), "--file", name}
		if ch == channels.WeChat {
			args = append(args, "--date", day)
		}
		out, errOut, err := consumerCmd(t, vars, args...)
		require.NoError(t, err, out+errOut)
	}
	lines, err := statementsample.FromEvents(channels.WeChat, events[channels.WeChat])
	require.NoError(t, err)
	f, err := wechat.SampleBill(lines, wechat.SampleBillOptions{MicroPay: map[string]bool{w2.TradeNo: true}})
	require.NoError(t, err)
	importFile(1001, channels.WeChat, f)
	lines, err = statementsample.FromEvents(channels.Alipay, events[channels.Alipay])
	require.NoError(t, err)
	f, err = alipay.SampleBill("20880000000000000156", day, lines)
	require.NoError(t, err)
	importFile(1001, channels.Alipay, f)
	lines, err = statementsample.FromEvents(channels.SQB, events[channels.SQB])
	require.NoError(t, err)
	f, err = sqb.SampleQueryResponses(lines)
	require.NoError(t, err)
	importFile(1001, channels.SQB, f)
	var pEvents []channels.Event
	for _, c := range pDelivered {
		res, err := dec.Decode(c.value)
		require.NoError(t, err)
		pEvents = append(pEvents, res.Event)
	}
	lines, err = statementsample.FromEvents(channels.WeChat, pEvents)
	require.NoError(t, err)
	for i := range lines {
		if lines[i].Kind == statements.KindRefund {
			lines[i].Status = "PROCESSING"
		}
	}
	f, err = wechat.SampleBill(lines, wechat.SampleBillOptions{MchID: "1900000002"})
	require.NoError(t, err)
	importFile(1002, channels.WeChat, f)

	reconcile := func(tenant int64, ch channels.Channel, extra ...string) (string, error) {
		t.Helper()
		args := append([]string{"statement", "reconcile", "--channel", string(ch), "--tenant", fmt.Sprint(tenant), "--date", day}, extra...)
		out, errOut, err := consumerCmd(t, vars, args...)
		return out + errOut, err
	}
	publishJSON := func(tenant int64, ch channels.Channel) (statementReconcileJSON, int) {
		t.Helper()
		out, err := reconcile(tenant, ch, "--publish-missing", "--json")
		var rep statementReconcileJSON
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		require.NotNil(t, rep.Publish, out)
		return rep, exitCode(err)
	}
	auditsBefore := len(audits())

	// WeChat: the text report, then the same run again in JSON.
	out, err := reconcile(1001, channels.WeChat, "--publish-missing")
	assert.Equal(t, exitFound, exitCode(err), out)
	assert.Contains(t, out, "publish missing: published 4 to channel-events, already published 0, claimed 0, needs the query API 0")
	for _, want := range []string{
		`published\s+` + w2.TradeNo + `\s+-\s+2580\s`, `published\s+` + w4.TradeNo + `\s+-\s+2580\s`,
		`published\s+` + w3.TradeNo + `\s+W3-R1\s+800\s`, `published\s+` + w4.TradeNo + `\s+W4-R1\s+500\s`,
	} {
		assert.Regexp(t, want, out)
	}
	assert.Contains(t, out, "reconcile the day again")
	rep, code := publishJSON(1001, channels.WeChat)
	assert.Equal(t, exitFound, code)
	assert.Empty(t, rep.Publish.Published, "a second run publishes nothing")
	assert.Len(t, rep.Publish.AlreadyPublished, 4)
	assert.Len(t, rep.Items, 4, "the discrepancies remain until the worker settles")

	for _, c := range []struct {
		ch         channels.Channel
		paid, refd channelstest.Trade
		api        string
	}{{channels.Alipay, a2, a1, "alipay.trade.fastpay.refund.query"}, {channels.SQB, s2, s1, "/upay/v2/query"}} {
		rep, code := publishJSON(1001, c.ch)
		assert.Equal(t, exitFound, code, "%s", c.ch)
		require.Len(t, rep.Publish.Published, 1, "%s", c.ch)
		assert.Equal(t, string(c.ch)+":"+c.paid.TradeNo+":PAYMENT_RECEIVED", rep.Publish.Published[0].Key)
		require.Len(t, rep.Publish.NeedsQuery, 1, "%s", c.ch)
		assert.Equal(t, c.refd.TradeNo, rep.Publish.NeedsQuery[0].TradeNo)
		assert.Contains(t, rep.Publish.NeedsQuery[0].Reason, c.api)
	}

	// The PROCESSING refund: a status_mismatch, nothing published.
	rep, code = publishJSON(1002, channels.WeChat)
	assert.Equal(t, exitFound, code)
	require.Len(t, rep.Items, 1)
	assert.Equal(t, statementbook.StatementStatusMismatch, rep.Items[0].Category)
	assert.Equal(t, "P-R1", rep.Items[0].RefundNo)
	assert.Empty(t, rep.Publish.Published)
	assert.Empty(t, rep.Publish.NeedsQuery)

	// One audit row per --publish-missing run.
	rows := audits()
	require.Len(t, rows, auditsBefore+5)
	assert.Equal(t, "statement reconcile", rows[0].Command)
	assert.Equal(t, "found", rows[0].Result)
	assert.Contains(t, rows[0].Detail, "published 0")
	assert.Contains(t, rows[4].Detail, "published 4")
	assert.Contains(t, rows[4].Detail, "WECHAT:"+w2.TradeNo+":PAYMENT_RECEIVED")

	// The worker settles what was published; then the withheld callbacks
	// arrive. Only the cumulative refunds are new.
	published := 4 + 1 + 1
	w = runWorker(t, vars)
	w.waitConsumed(t, published)
	assert.Equal(t, published, w.events(t, map[string]string{"outcome": "acquired"}))
	out, err = reconcile(1001, channels.WeChat)
	require.NoError(t, err, "the WeChat day is settled by what was published\n%s", out)
	late := 0
	for _, c := range withheld {
		if c.tr == w2 {
			continue // a barcode payment: WeChat never calls back
		}
		produce(t, vars, c.tr, c.value)
		late++
	}
	w.waitConsumed(t, published+late)
	assert.Equal(t, late-2, w.events(t, map[string]string{"outcome": "duplicate"}), "every withheld callback of a published event is a duplicate")
	assert.Equal(t, published+2, w.events(t, map[string]string{"outcome": "acquired"}), "the two cumulative refunds are new")
	assert.Zero(t, w.events(t, map[string]string{"outcome": "conflict"}))
	assert.Zero(t, w.events(t, map[string]string{"outcome": "dead_lettered"}))
	for _, ch := range channels.Codes() {
		out, err := reconcile(1001, ch)
		require.NoError(t, err, "%s\n%s", ch, out)
		assert.Contains(t, out, "no discrepancies")
	}
	out, err = reconcile(1002, channels.WeChat)
	assert.Equal(t, exitFound, exitCode(err), out)

	// --publish-missing names its tenant.
	_, _, err = consumerCmd(t, vars, "statement", "reconcile", "--channel", "WECHAT", "--date", day, "--publish-missing")
	assert.Equal(t, exitUsage, exitCode(err))
	assert.ErrorContains(t, err, "--publish-missing publishes for one tenant")
}

// TestStatementReconcilePublishMissingRefusesWithoutAKey: without
// PAYCB_STATEMENT_KEY_FILE --publish-missing refuses (exit 4), naming the
// variable, before it reconciles or publishes anything; a key file that
// does not parse is a configuration error (exit 2) that names its line and
// shows no secret; a plain reconcile needs no key.
func TestStatementReconcilePublishMissingRefusesWithoutAKey(t *testing.T) {
	vars := statementEnv(t)
	day := channelstest.BaseTime.Format(time.DateOnly)
	tr := channelstest.NewTrade(channels.WeChat, 951)
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
	require.NoError(t, err)
	lines, err := statementsample.FromEvents(channels.WeChat, []channels.Event{res.Event})
	require.NoError(t, err)
	f, err := wechat.SampleBill(lines, wechat.SampleBillOptions{})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bill.csv")
	require.NoError(t, os.WriteFile(path, f.Data, 0o600))
	_, errOut, err := consumerCmd(t, vars, "statement", "import", "--channel", "WECHAT", "--date", day, "--tenant", "1001", "--file", path)
	require.NoError(t, err, errOut)
	reconcileArgs := []string{"statement", "reconcile", "--channel", "WECHAT", "--tenant", "1001", "--date", day}

	none := maps.Clone(vars)
	delete(none, "PAYCB_STATEMENT_KEY_FILE")
	out, errOut, err := consumerCmd(t, none, append(reconcileArgs, "--publish-missing")...)
	require.Equal(t, exitRefused, exitCode(err), out+errOut)
	require.ErrorContains(t, err, "PAYCB_STATEMENT_KEY_FILE")
	msgs, err := kafkaops.ReadAll(context.Background(), []string{vars["PAYCB_KAFKA_BROKERS"]}, "channel-events")
	require.NoError(t, err)
	assert.Empty(t, msgs, "nothing published")

	short := maps.Clone(vars)
	short["PAYCB_STATEMENT_KEY_FILE"] = writeStatementKeys(t, "# a key too short\nk1=short-secret-xyz\n")
	out, errOut, err = consumerCmd(t, short, append(reconcileArgs, "--publish-missing")...)
	require.Equal(t, exitUsage, exitCode(err), out+errOut)
	require.ErrorContains(t, err, "line 2")
	assert.NotContains(t, out+errOut+err.Error(), "short-secret-xyz")

	out, errOut, err = consumerCmd(t, none, reconcileArgs...)
	assert.Equal(t, exitFound, exitCode(err), "a plain reconcile needs no key: %s", out+errOut)
}
