package statemente2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// TestCallbacksAreBoundToTheirMerchant runs the real binary on kfake and
// MariaDB with a merchant binding: the callback of a merchant bound to its
// envelope's tenant settles; one of a merchant bound to another tenant, one
// of a merchant bound to none and one naming no merchant are dead-lettered
// tenant_mismatch with nothing claimed; an edit of the binding (a new
// terminal) is picked up by the running worker, a broken edit is logged and
// changes nothing, and a redrive then settles the dead letter of the
// terminal. Without the binding, run says once at start that callbacks are
// not checked.
func TestCallbacksAreBoundToTheirMerchant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	w := newWorld(ctx, t)
	_, code := w.consumer("migrate")
	require.Equal(t, 0, code, "consumer migrate")
	// Tenant 1001 has the WeChat merchant; the Alipay seller is tenant
	// 2002's; the Shouqianba terminal is bound to nobody yet.
	w.writeMerchants("1001 WECHAT 1230000109\n2002 ALIPAY 2088101117955611\n")
	wk := w.startWorker()
	assert.Contains(t, wk.logText(), "callbacks are checked against the merchant binding")
	assert.NotContains(t, wk.logText(), "callbacks are not checked against merchants")

	bound := channelstest.NewTrade(channels.WeChat, 801)
	otherTenants := channelstest.NewTrade(channels.Alipay, 802)
	newTerminal := channelstest.NewTrade(channels.SQB, 803)
	noMerchant := channelstest.NewTrade(channels.SQB, 804)
	msg := func(tr channelstest.Trade, d channelstest.Delivery) demo.Message {
		return demo.Message{Key: []byte(string(tr.Channel) + ":" + tr.TradeNo), Value: channelstest.PaymentEnvelope(tr, d)}
	}
	w.produce([]demo.Message{
		msg(bound, channelstest.Delivery{}),
		msg(otherTenants, channelstest.Delivery{}),
		msg(newTerminal, channelstest.Delivery{}),
		msg(noMerchant, channelstest.Delivery{Edit: func(m map[string]any) { delete(m, "terminal_sn") }}),
	})

	assert.Equal(t, 1, w.count("SELECT COUNT(*) FROM ss_channel_idempotent"), "only the bound merchant's payment is claimed")
	assert.Equal(t, 2, w.count("SELECT COUNT(*) FROM ss_ledger_entry"), "and posted")
	assert.Equal(t, 1, w.count("SELECT COUNT(*) FROM ss_channel_order WHERE channel_trade_no = ?", bound.TradeNo))
	letters := w.deadLetters()
	require.Len(t, letters, 3, "%v", letters)
	for _, want := range []string{
		"ALIPAY merchant 2088101117955611 is not bound to tenant 1001: " + w.merchants + " binds it to tenant 2002",
		"SQB merchant 01939202039923029 is not bound to tenant 1001: " + w.merchants + " binds it to no tenant",
		"the SQB callback of tenant 1001 names no merchant (terminal_sn)",
	} {
		found := false
		for _, l := range letters {
			found = found || (l.Kind == "tenant_mismatch" && strings.Contains(l.Error, want))
		}
		assert.True(t, found, "a tenant_mismatch dead letter says %q: %v", want, letters)
	}
	assert.InDelta(t, 3, wk.scrape(t, `paycb_dead_letters_total{kind="tenant_mismatch"}`), 0)

	// The new terminal is tenant 1001's: the running worker re-reads the
	// binding, and the terminal's next callback settles.
	w.writeMerchants("1001 WECHAT 1230000109\n2002 ALIPAY 2088101117955611\n1001 SQB 01939202039923029\n")
	wk.waitLog(t, "configuration file re-read", 1)
	next := channelstest.NewTrade(channels.SQB, 805)
	w.produce([]demo.Message{msg(next, channelstest.Delivery{})})
	assert.Equal(t, 1, w.count("SELECT COUNT(*) FROM ss_channel_order WHERE channel_trade_no = ?", next.TradeNo), "settled without a restart")

	// A broken edit (the terminal given to two tenants) is logged, and the
	// last good binding stays in force.
	w.writeMerchants("1001 SQB 01939202039923029\n2002 SQB 01939202039923029\n")
	wk.waitLog(t, "configuration file refused; the last good contents stay in force", 1)
	assert.Contains(t, wk.logText(), "line 2: SQB merchant 01939202039923029 is bound to tenant 2002, but line 1 binds it to tenant 1001")
	last := channelstest.NewTrade(channels.SQB, 806)
	w.produce([]demo.Message{msg(last, channelstest.Delivery{})})
	assert.Equal(t, 1, w.count("SELECT COUNT(*) FROM ss_channel_order WHERE channel_trade_no = ?", last.TradeNo), "the last good binding still holds")
	// Every command refuses the broken file at start, as a configuration
	// error; it is put right.
	_, code = w.consumer("dlq", "list")
	assert.Equal(t, 2, code, "a broken binding is a configuration error")
	good := "1001 WECHAT 1230000109\n2002 ALIPAY 2088101117955611\n1001 SQB 01939202039923029\n"
	w.writeMerchants(good)
	assert.Len(t, w.deadLetters(), 3, "nothing more dead-lettered")

	// The redrive settles the new terminal's dead letter.
	var at string
	for _, l := range w.deadLetters() {
		if strings.Contains(l.Error, "SQB merchant 01939202039923029") {
			at = l.At
		}
	}
	require.NotEmpty(t, at)
	out, code := w.consumer("dlq", "redrive", "--at", at)
	require.Equal(t, 0, code, out)
	w.waitConsumed()
	assert.Equal(t, 1, w.count("SELECT COUNT(*) FROM ss_channel_order WHERE channel_trade_no = ?", newTerminal.TradeNo), "the redriven letter settled")
	assert.Equal(t, 0, w.count("SELECT COUNT(*) FROM ss_channel_order WHERE channel_trade_no IN (?, ?)", otherTenants.TradeNo, noMerchant.TradeNo),
		"the other letters still moved nothing")
	for _, l := range w.deadLetters() {
		if l.At == at {
			assert.Equal(t, "resolved", l.Status, "the redriven letter is resolved: %+v", l)
		}
	}
	wk.stop(t)

	// Without the binding, run says so, once.
	w.env = append(w.env, "PAYCB_TENANT_MERCHANTS_FILE=")
	wk = w.startWorker()
	wk.stop(t)
	assert.Equal(t, 1, strings.Count(wk.logText(), "callbacks are not checked against merchants"), wk.logText())
}

// writeMerchants replaces the merchant binding file's contents at once (a
// rename), as an operator's editor or a configuration manager does.
func (w *world) writeMerchants(contents string) {
	w.t.Helper()
	tmp := w.merchants + ".new"
	require.NoError(w.t, os.WriteFile(tmp, []byte(contents), 0o600))
	require.NoError(w.t, os.Rename(tmp, w.merchants))
}

// count runs a COUNT(*) query on the world's database.
func (w *world) count(q string, args ...any) int {
	w.t.Helper()
	var n int
	w.query(&n, q, args...)
	return n
}

// deadLetter is one dead letter as `dlq list --json` shows it.
type deadLetter struct {
	At     string `json:"at"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// deadLetters lists the dead-letter topic with `consumer dlq list --json`.
func (w *world) deadLetters() []deadLetter {
	w.t.Helper()
	out, code := w.consumer("dlq", "list", "--json")
	require.Equal(w.t, 0, code, out)
	var doc struct {
		DeadLetters []deadLetter `json:"dead_letters"`
	}
	require.NoError(w.t, json.Unmarshal([]byte(out), &doc), out)
	return doc.DeadLetters
}

// waitLog waits until the worker has logged msg at least n times.
func (wk *worker) waitLog(t *testing.T, msg string, n int) {
	t.Helper()
	quoted, err := json.Marshal(msg)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Count(wk.logText(), `"msg":`+string(quoted)) >= n },
		30*time.Second, 50*time.Millisecond, "the worker did not log %q", msg)
}

// scrape reads one sample of the worker's /metrics.
func (wk *worker) scrape(t *testing.T, series string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+wk.admin+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+]+)$`).FindSubmatch(body)
	require.NotNil(t, m, "no %s in:\n%s", series, body)
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}
