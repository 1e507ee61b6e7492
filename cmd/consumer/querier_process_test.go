package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/dberr"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// The process tests' budget and size: a budget far below what two
// queriers could ask (each has 4 queries in flight against a fake that
// answers in 30 ms), so the budget, not the queriers, sets the pace; and
// registrations each asked three times (not paid, not paid, paid).
const (
	procRate          = 20 // PAYCB_QUERY_RATE
	procBurst         = 5  // PAYCB_QUERY_BURST
	procRegistrations = 40
	procAnswerDelay   = 30 * time.Millisecond
	// procLease is --lease: the shortest the querier accepts (longer than
	// a query's 10 s timeout), so a killed querier's leases end soon.
	procLease = 11 * time.Second
)

// querierWorld is the built consumer binary, an in-process broker, a
// migrated database of the test's own and the fake WeChat, and the
// registered payments no callback settles (register): each is asked about
// by the queriers, answered not paid twice and then paid.
type querierWorld struct {
	t      *testing.T
	bin    string
	env    []string
	db     *bun.DB
	wx     *fakechannel.WeChat
	trades []channelstest.Trade

	mu       sync.Mutex
	children []*child // every child started, killed and stopped ones too
}

func newQuerierWorld(t *testing.T) *querierWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildConsumer(ctx, t)
	cluster, brokers, err := inprocess.Start(map[string]int32{runTopic: 2, runDLQ: 1, runSettled: 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	dsn := migratedDatabase(ctx, t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	wx := fakechannel.MustWeChat(t, fakechannel.Options{})
	vars := querierFiles(t, wx.Keys(), wx.CertificatePEM())
	vars["PAYCB_QUERY_WECHAT_URL"] = wx.URL()
	vars["PAYCB_QUERY_FIRST_WAIT"] = "1s"
	vars["PAYCB_QUERY_RATE"] = fmt.Sprint(procRate)
	vars["PAYCB_QUERY_BURST"] = fmt.Sprint(procBurst)
	env := append(os.Environ(), "PAYCB_DB_DSN="+dsn, "PAYCB_KAFKA_BROKERS="+brokers[0], "PAYCB_KAFKA_TOPIC="+runTopic,
		"PAYCB_WECHAT_APIV3_KEY="+channelstest.APIv3Key, "PAYCB_LOG_LEVEL=warn", "PAYCB_LOG_FORMAT=json",
		"PAYCB_KAFKA_SESSION_TIMEOUT=6s", "PAYCB_KAFKA_HEARTBEAT_INTERVAL=300ms", "PAYCB_KAFKA_REBALANCE_TIMEOUT=6s",
		"PAYCB_KAFKA_MAX_WAIT=100ms", "PAYCB_SHUTDOWN_TIMEOUT=10s")
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return &querierWorld{t: t, bin: bin, env: env, db: db, wx: wx}
}

// register registers n payments, each scripted on the fake to answer not
// paid twice and then paid; they are due their first wait (1 s) later.
func (w *querierWorld) register(n int) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	svc, err := settlement.New(w.db, idempotent.NewStore(w.db), nil, nil)
	require.NoError(t, err)
	for i := range n {
		tr := channelstest.NewTrade(channels.WeChat, 100+i)
		w.wx.Script(tr, fakechannel.Step{Answer: fakechannel.Pending, Delay: procAnswerDelay},
			fakechannel.Step{Answer: fakechannel.Pending, Delay: procAnswerDelay}, fakechannel.Step{Delay: procAnswerDelay})
		_, err := svc.RegisterPayment(ctx, settlement.PaymentRequest{
			TenantID: tr.TenantID, Channel: tr.Channel, MerchantID: fakechannel.WeChatMerchantID, MerchantOrderNo: tr.MerchantOrderNo,
			Amount: tr.Total, Currency: "CNY", CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().UTC().Add(time.Hour),
		})
		require.NoError(t, err)
		w.trades = append(w.trades, tr)
	}
}

// started waits until each querier has logged that it started: its
// rounds run.
func (w *querierWorld) started(queriers ...*child) {
	w.t.Helper()
	w.waitFor(time.Minute, "the queriers started", func() bool {
		for _, q := range queriers {
			if !strings.Contains(q.logs.String(), `"msg":"querier started"`) {
				return false
			}
		}
		return true
	})
}

// child is one consumer process of the test's.
type child struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan struct{}
	// ended is set before the test kills or stops the child: any other
	// end is a failure.
	ended bool
}

// lockedBuffer is a child's output, written by its copier and read by the
// test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start starts the binary with args; a child still running when the test
// ends is killed.
func (w *querierWorld) start(name string, extraEnv []string, args ...string) *child {
	w.t.Helper()
	cmd := exec.Command(w.bin, args...) //nolint:noctx // stopped by signals, as an operator's would be
	cmd.Env = append(slices.Clone(w.env), extraEnv...)
	c := &child{t: w.t, name: name, cmd: cmd, logs: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.logs, c.logs
	require.NoError(w.t, cmd.Start(), "start %s", name)
	w.mu.Lock()
	w.children = append(w.children, c)
	w.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	w.t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// querier starts a `consumer query run`, asking at most 5 registrations
// a round, 4 at once, logging each token of the budget it takes (debug).
// The queriers' rounds come at different intervals (100 ms, 70 ms, …):
// at one interval, the querier whose rounds happened to come just after
// each refill of the budget would take nearly every token for the whole
// run, and the other would hardly ask.
func (w *querierWorld) querier(name string) *child {
	w.t.Helper()
	w.mu.Lock()
	n := 0
	for _, c := range w.children {
		if len(c.cmd.Args) > 1 && c.cmd.Args[1] == "query" {
			n++
		}
	}
	w.mu.Unlock()
	interval := []time.Duration{100 * time.Millisecond, 70 * time.Millisecond, 130 * time.Millisecond}[n%3]
	return w.start(name, []string{"PAYCB_ADMIN_ADDR=127.0.0.1:0", "PAYCB_LOG_LEVEL=debug"},
		"query", "run", "--interval", interval.String(), "--batch", "5", "--parallel", "4", "--lease", procLease.String())
}

// worker starts a `consumer run`.
func (w *querierWorld) worker(name string) *child {
	w.t.Helper()
	return w.start(name, []string{"PAYCB_ADMIN_ADDR=127.0.0.1:0"}, "run")
}

// ownerPrefix is how the querier names itself in leases and the query log
// (querierName): host, then its process id.
func (c *child) ownerPrefix() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "querier"
	}
	if len(host) > 40 {
		host = host[:40]
	}
	return fmt.Sprintf("%s-%d-", host, c.cmd.Process.Pid)
}

// kill9 kills the child with SIGKILL and waits for it to be gone.
func (c *child) kill9() {
	c.t.Helper()
	c.ended = true
	require.NoError(c.t, c.cmd.Process.Signal(syscall.SIGKILL), "kill -9 %s", c.name)
	<-c.done
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(c.t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "%s died of SIGKILL: %v\n%s", c.name, c.cmd.ProcessState, c.logs)
}

// stop stops the child with SIGTERM and requires a clean exit within a
// minute.
func (c *child) stop() {
	c.t.Helper()
	c.ended = true
	require.NoError(c.t, c.cmd.Process.Signal(syscall.SIGTERM), "stop %s", c.name)
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.done
		c.t.Fatalf("%s did not stop within a minute of SIGTERM:\n%s", c.name, c.logs)
	}
	assert.True(c.t, c.cmd.ProcessState.Success(), "%s exits 0 on SIGTERM: %v\n%s", c.name, c.cmd.ProcessState, c.logs)
}

// timePasses brings every open registration's next ask, minutes away on
// the schedule after a not-paid answer, to now, every 50 ms until the
// returned function is called: as if those minutes had passed. Leases and
// the budget are left alone.
func (w *querierWorld) timePasses() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now().UTC()
			_, err := w.db.NewUpdate().Table("ss_payment_registration").Set("query_next_at = ?", now).
				Where("status = 'REGISTERED' AND query_stopped = 0 AND query_next_at > ?", now).Exec(ctx)
			// A deadlock with a querier's lease is tried again next tick.
			if err != nil && ctx.Err() == nil && !dberr.IsRetryableConflict(err) {
				w.t.Errorf("bring the next asks to now: %v", err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// statuses counts the registrations by status.
func (w *querierWorld) statuses() map[string]int {
	w.t.Helper()
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	require.NoError(w.t, w.db.NewSelect().Table("ss_payment_registration").ColumnExpr("status, COUNT(*) AS n").
		Group("status").Scan(context.Background(), &rows))
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out
}

// waitFor waits until cond holds, up to within; on a timeout, or when a
// child the test did not end has ended, it fails with the children's
// logs.
func (w *querierWorld) waitFor(within time.Duration, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		w.mu.Lock()
		children := slices.Clone(w.children)
		w.mu.Unlock()
		failed := ""
		for _, c := range children {
			select {
			case <-c.done:
				if !c.ended {
					failed = c.name + " ended by itself"
				}
			default:
			}
		}
		if failed == "" && time.Now().After(deadline) {
			failed = "not within " + within.String()
		}
		if failed != "" {
			var logs strings.Builder
			for _, c := range children {
				fmt.Fprintf(&logs, "--- %s:\n%s\n", c.name, c.logs)
			}
			w.t.Fatalf("%s: %s; registrations %v, %d requests to the fake\n%s", what, failed, w.statuses(), len(w.wx.Requests()), logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling the database, not standing in for an event
	}
}

// checkSettledOnce: every registration SUCCEEDED, every payment posted
// once (one claim SETTLED, one debit and one credit of its amount, one
// settled event, from the query's answer), nothing dead-lettered.
func (w *querierWorld) checkSettledOnce() {
	t := w.t
	t.Helper()
	ctx := context.Background()
	assert.Equal(t, map[string]int{"SUCCEEDED": len(w.trades)}, w.statuses(), "every registration settled")

	var ledger []struct {
		TradeNo   string `bun:"channel_trade_no"`
		Key       string `bun:"idempotent_key"`
		Direction string `bun:"direction"`
		Amount    int64  `bun:"amount"`
	}
	require.NoError(t, w.db.NewSelect().Table("ss_ledger_entry").Column("channel_trade_no", "idempotent_key", "direction", "amount").
		Scan(ctx, &ledger))
	type posting struct {
		keys            map[string]bool
		debit, credit   int64
		debits, credits int
	}
	byTrade := map[string]*posting{}
	for _, e := range ledger {
		p := byTrade[e.TradeNo]
		if p == nil {
			p = &posting{keys: map[string]bool{}}
			byTrade[e.TradeNo] = p
		}
		p.keys[e.Key] = true
		if e.Direction == "DEBIT" {
			p.debit += e.Amount
			p.debits++
		} else {
			p.credit += e.Amount
			p.credits++
		}
	}
	assert.Len(t, byTrade, len(w.trades), "postings for every trade and no other")
	for _, tr := range w.trades {
		p := byTrade[tr.TradeNo]
		if !assert.NotNil(t, p, "trade %s posted", tr.TradeNo) {
			continue
		}
		assert.Equal(t, map[string]bool{"WECHAT:" + tr.TradeNo + ":PAYMENT_RECEIVED": true}, p.keys, "trade %s: one source key", tr.TradeNo)
		assert.Equal(t, [4]int64{tr.Total, tr.Total, 1, 1}, [4]int64{p.debit, p.credit, int64(p.debits), int64(p.credits)},
			"trade %s posted once: one debit and one credit of its amount", tr.TradeNo)
	}

	var claims []struct {
		Key    string `bun:"idempotent_key"`
		Status string `bun:"status"`
	}
	require.NoError(t, w.db.NewSelect().Table("ss_channel_idempotent").Column("idempotent_key", "status").Scan(ctx, &claims))
	assert.Len(t, claims, len(w.trades), "one claim per payment")
	for _, c := range claims {
		assert.Equal(t, "SETTLED", c.Status, c.Key)
	}
	var outbox []struct {
		TradeNo string `bun:"channel_trade_no"`
		Source  string `bun:"source"`
	}
	require.NoError(t, w.db.NewSelect().Table("ss_settled_outbox").Column("channel_trade_no", "source").Scan(ctx, &outbox))
	assert.Len(t, outbox, len(w.trades), "one settled event per payment")
	for _, o := range outbox {
		assert.Equal(t, "query", o.Source, o.TradeNo)
	}
	dead, err := w.db.NewSelect().Table("ss_dead_letter").Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, dead, "nothing dead-lettered")
}

// loggedAsk is one row of ss_query_log.
type loggedAsk struct {
	OrderNo string    `bun:"merchant_order_no"`
	AskedAt time.Time `bun:"asked_at"`
	Querier string    `bun:"querier"`
}

func (w *querierWorld) queryLog() []loggedAsk {
	w.t.Helper()
	var rows []loggedAsk
	require.NoError(w.t, w.db.NewSelect().Table("ss_query_log").Column("merchant_order_no", "asked_at", "querier").
		OrderExpr("asked_at").Scan(context.Background(), &rows))
	return rows
}

// budgetReport is what the fake's record shows of the merchant's budget.
type budgetReport struct {
	requests int
	unlogged int           // requests no querier recorded: sent by a querier killed before it could
	latency  time.Duration // the longest from a request's token to the fake receiving it
	span     time.Duration // the first request to the last
	most     map[time.Duration]int
	// plainOver counts the windows holding more than burst + rate × w
	// requests, the bound on tokens; worst is the most over it.
	plainOver, worst map[time.Duration]int
}

// tokens reads the budget's tokens the queriers took, from their debug
// logs ("query token taken"): each token's time by order number, in the
// order taken.
func (w *querierWorld) tokens() map[string][]time.Time {
	w.t.Helper()
	w.mu.Lock()
	children := slices.Clone(w.children)
	w.mu.Unlock()
	out := map[string][]time.Time{}
	for _, c := range children {
		if len(c.cmd.Args) < 2 || c.cmd.Args[1] != "query" {
			continue
		}
		for _, line := range strings.Split(c.logs.String(), "\n") {
			var rec struct {
				Msg     string    `json:"msg"`
				OrderNo string    `json:"merchant_order_no"`
				TokenAt time.Time `json:"token_at"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "query token taken" {
				out[rec.OrderNo] = append(out[rec.OrderNo], rec.TokenAt)
			}
		}
	}
	for _, ts := range out {
		slices.SortFunc(ts, time.Time.Compare)
	}
	return out
}

// checkRequests checks the fake's record: every request signed, each sent
// with a token of the budget, none asking about an order while another
// request about it was unanswered, and in every window of 100 ms and 1 s
// (starting at each request) no more requests than the budget allows.
//
// The budget bounds its tokens: however many queriers take them, the
// tokens taken from a time T to a time U number at most burst + rate ×
// (U − T), T being the budget's clock (the database's, on this host the
// fake's too) when the first of them was taken. The fake notes when each
// request came, later than its token by however long taking the token,
// signing and sending took, and these delays differ (a request whose
// token waited on the bucket's row lock, or its connection's handshake):
// arrivals are squeezed, and a window of w may hold a few more than
// burst + rate × w requests, each sent on its own token. So the allowance
// of a window's requests runs from the earliest of their tokens to the
// last of their arrivals: burst + rate × (last arrival − earliest token).
// Each request's token is the last its order's querier took before it
// came and after the order's request before it (the asks of one order
// never overlap), read from the queriers' debug lines. How often the
// plain burst + rate × w was passed, and by how much, is reported.
func (w *querierWorld) checkRequests() budgetReport {
	t := w.t
	t.Helper()
	reqs := w.wx.Requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		assert.True(t, r.SignatureOK, "request %s at %s signed: %s", r.Asked, r.At, r.SignatureError)
		assert.Zero(t, r.InFlight, "%s asked at %s while %d request(s) about it were unanswered", r.Asked, r.At.Format(time.RFC3339Nano), r.InFlight)
	}

	rep := budgetReport{requests: len(reqs), most: map[time.Duration]int{}, plainOver: map[time.Duration]int{}, worst: map[time.Duration]int{}}
	tokens := w.tokens()
	logged := map[string][]loggedAsk{}
	for _, l := range w.queryLog() {
		logged[l.OrderNo] = append(logged[l.OrderNo], l)
	}
	type sent struct{ token, at time.Time }
	var all []sent
	prev := map[string]time.Time{}
	for _, r := range reqs { // in the order received
		var token time.Time
		for _, at := range tokens[r.Asked] {
			if !at.After(r.At) && at.After(prev[r.Asked]) {
				token = at
			}
		}
		if assert.False(t, token.IsZero(), "%s asked at %s with a token of the budget", r.Asked, r.At.Format(time.RFC3339Nano)) {
			rep.latency = max(rep.latency, r.At.Sub(token))
			all = append(all, sent{token: token, at: r.At})
		}
		asks := logged[r.Asked]
		match := slices.IndexFunc(asks, func(l loggedAsk) bool { return !l.AskedAt.After(r.At) && l.AskedAt.After(prev[r.Asked]) })
		if match < 0 {
			rep.unlogged++
		} else {
			logged[r.Asked] = slices.Delete(asks, match, match+1)
		}
		prev[r.Asked] = r.At
	}
	for no, rest := range logged {
		assert.Empty(t, rest, "logged asks about %s the fake never received", no)
	}
	require.NotEmpty(t, all)

	slices.SortFunc(all, func(a, b sent) int { return a.at.Compare(b.at) })
	rep.span = all[len(all)-1].at.Sub(all[0].at)
	tokensIn := func(d time.Duration) int { return procBurst + int(d.Seconds()*procRate+0.001) }
	for _, window := range []time.Duration{100 * time.Millisecond, time.Second} {
		plain := tokensIn(window)
		j := 0
		for i := range all {
			for j < len(all) && all[j].at.Sub(all[i].at) < window {
				j++
			}
			n := j - i
			rep.most[window] = max(rep.most[window], n)
			if n > plain {
				rep.plainOver[window]++
				rep.worst[window] = max(rep.worst[window], n-plain)
			}
			first := all[i].token
			for _, s := range all[i:j] {
				if s.token.Before(first) {
					first = s.token
				}
			}
			if allowed := tokensIn(all[j-1].at.Sub(first)); n > allowed {
				t.Errorf("%d requests for merchant %s in the %s from %s: their tokens, from %s to their last arrival %s, allow %d (burst %d + %d/s)",
					n, fakechannel.WeChatMerchantID, window, all[i].at.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano),
					all[j-1].at.Format(time.RFC3339Nano), allowed, procBurst, procRate)
			}
		}
	}
	// And over the whole run: the budget, not the queriers, set the pace.
	assert.LessOrEqual(t, len(all), tokensIn(all[len(all)-1].at.Sub(all[0].token)), "requests over the whole run")
	t.Logf("%d requests to the fake in %s (%.1f/s; budget %d/s, burst %d), %d unrecorded; longest token-to-arrival %s; "+
		"most in 100ms %d (plain bound %d, passed in %d windows by at most %d), in 1s %d (plain bound %d, passed in %d windows by at most %d)",
		rep.requests, rep.span.Round(time.Millisecond), float64(rep.requests)/rep.span.Seconds(), procRate, procBurst, rep.unlogged,
		rep.latency.Round(time.Microsecond),
		rep.most[100*time.Millisecond], tokensIn(100*time.Millisecond), rep.plainOver[100*time.Millisecond], rep.worst[100*time.Millisecond],
		rep.most[time.Second], tokensIn(time.Second), rep.plainOver[time.Second], rep.worst[time.Second])
	return rep
}

// TestTwoQuerierProcessesShareOneMerchantsBudget: two `consumer query
// run` processes and a `consumer run`, on one database and broker, ask
// the fake WeChat about one merchant's registered payments: together they
// stay within the merchant's budget (PAYCB_QUERY_RATE, PAYCB_QUERY_BURST)
// in every window of the fake's record, never ask about one order while
// another ask about it is unanswered, and every payment is posted once
// from the answers and its registration SUCCEEDED.
func TestTwoQuerierProcessesShareOneMerchantsBudget(t *testing.T) {
	w := newQuerierWorld(t)
	worker := w.worker("worker")
	stopTime := w.timePasses()
	a, b := w.querier("querier A"), w.querier("querier B")
	w.started(a, b)
	w.register(procRegistrations)
	w.waitFor(90*time.Second, "every registration SUCCEEDED", func() bool {
		return w.statuses()["SUCCEEDED"] == len(w.trades)
	})
	stopTime()
	a.stop()
	b.stop()
	worker.stop()

	w.checkSettledOnce()
	rep := w.checkRequests()
	assert.Zero(t, rep.unlogged, "every ask recorded: nothing was killed")
	assert.GreaterOrEqual(t, rep.requests, 3*len(w.trades), "each order asked at least three times (not paid, not paid, paid)")
	byQuerier := map[bool]int{}
	pa, pb := a.ownerPrefix(), b.ownerPrefix()
	for _, l := range w.queryLog() {
		byQuerier[strings.HasPrefix(l.Querier, pa)]++
		assert.True(t, strings.HasPrefix(l.Querier, pa) || strings.HasPrefix(l.Querier, pb), "asked by A or B: %s", l.Querier)
	}
	assert.Positive(t, byQuerier[true], "querier A asked")
	assert.Positive(t, byQuerier[false], "querier B asked")
	t.Logf("asks by querier A: %d, by querier B: %d", byQuerier[true], byQuerier[false])
}

// heldLease is a registration leased to a querier.
type heldLease struct {
	OrderNo string    `bun:"merchant_order_no"`
	Until   time.Time `bun:"lease_until"`
}

// TestQuerierAndWorkerKilledMidRunLoseNothing: a querier process is
// killed with SIGKILL while it holds leases, after it has asked about some
// registrations but not all, and started again; then the worker, after it
// settled some but not all; then started again. Every registration ends
// SUCCEEDED and posted once; the leases the dead querier held end
// (--lease) and those registrations are asked again by the living, never
// before the lease ended; the fake's record shows the merchant's budget
// kept across the restarts and no order asked twice at once; and no
// registration is left leased (a settled one may keep the dead querier's
// expired stamp: it is never leased again).
func TestQuerierAndWorkerKilledMidRunLoseNothing(t *testing.T) {
	w := newQuerierWorld(t)
	ctx := context.Background()
	worker := w.worker("worker")
	stopTime := w.timePasses()
	a, b := w.querier("querier A"), w.querier("querier B")
	w.started(a, b)
	w.register(procRegistrations)

	// Kill A once it has asked about some registrations and holds leases.
	// Its rounds hold leases only part of the time: a kill that finds it
	// holding none (it had just recorded its round) starts it again and
	// tries once more.
	var (
		orphans []heldLease
		killed  *child
		killAt  time.Time
	)
	w.waitFor(time.Minute, "the queriers sent a quarter of the requests the registrations need", func() bool {
		return len(w.wx.Requests()) >= len(w.trades)*3/4
	})
	for attempt := 0; len(orphans) == 0; attempt++ {
		require.Less(t, attempt, 50, "querier A never killed while holding a lease")
		w.waitFor(time.Minute, "querier A holds a lease", func() bool {
			n, err := w.db.NewSelect().Table("ss_payment_registration").Where("lease_owner LIKE ?", a.ownerPrefix()+"%").
				Where("lease_until > ?", time.Now().UTC()).Count(ctx)
			require.NoError(t, err)
			return n > 0
		})
		a.kill9()
		killAt = time.Now().UTC()
		require.NoError(t, w.db.NewSelect().Table("ss_payment_registration").Column("merchant_order_no", "lease_until").
			Where("lease_owner LIKE ?", a.ownerPrefix()+"%").Where("lease_until > ?", killAt).Scan(ctx, &orphans))
		killed = a
		a = w.querier(fmt.Sprintf("querier A (restart %d)", attempt+1))
	}
	asked := map[string]bool{}
	for _, r := range w.wx.Requests() {
		asked[r.Asked] = true
	}
	require.Less(t, w.statuses()["SUCCEEDED"], len(w.trades), "querier A killed mid-run: not everything settled yet")
	tokensOfA := strings.Count(killed.logs.String(), `"msg":"query token taken"`)
	require.Positive(t, tokensOfA, "querier A asked before it was killed")
	t.Logf("querier A killed holding %d leases, after %d asks of its own; %d of %d orders asked about by then",
		len(orphans), tokensOfA, len(asked), len(w.trades))

	// Kill the worker once it has settled some but not all.
	w.waitFor(2*time.Minute, "the worker settled a quarter of the registrations", func() bool {
		return w.statuses()["SUCCEEDED"] >= len(w.trades)/4
	})
	worker.kill9()
	settledAtKill := w.statuses()["SUCCEEDED"]
	require.Less(t, settledAtKill, len(w.trades), "the worker killed mid-run")
	t.Logf("the worker killed with %d of %d registrations SUCCEEDED", settledAtKill, len(w.trades))
	worker = w.worker("worker (restarted)")

	w.waitFor(90*time.Second, "every registration SUCCEEDED", func() bool {
		return w.statuses()["SUCCEEDED"] == len(w.trades)
	})
	stopTime()
	a.stop()
	b.stop()
	worker.stop()

	w.checkSettledOnce()
	rep := w.checkRequests()
	t.Logf("%d requests of the killed querier A unanswered or unrecorded", rep.unlogged)

	// The dead querier's leases ended and were taken by the living: each
	// of those registrations was asked about again by another querier, no
	// earlier than the lease's end, unless an answer A published before it
	// died had settled it.
	log := w.queryLog()
	reasked := 0
	for _, o := range orphans {
		for _, l := range log {
			if l.OrderNo != o.OrderNo || strings.HasPrefix(l.Querier, killed.ownerPrefix()) || !l.AskedAt.After(killAt) {
				continue
			}
			assert.False(t, l.AskedAt.Before(o.Until), "%s asked by %s at %s, before querier A's lease ended at %s",
				o.OrderNo, l.Querier, l.AskedAt, o.Until)
			reasked++
			break
		}
	}
	t.Logf("%d of the %d registrations querier A held when killed asked again after its lease", reasked, len(orphans))
	// The queriers stopped by SIGTERM released theirs; the dead one's end
	// where they stand: a registration settled from an answer it published
	// before it died is never leased again, and keeps its expired stamp.
	var stamped []struct {
		OrderNo string    `bun:"merchant_order_no"`
		Owner   string    `bun:"lease_owner"`
		Until   time.Time `bun:"lease_until"`
		Status  string    `bun:"status"`
	}
	require.NoError(t, w.db.NewSelect().Table("ss_payment_registration").Column("merchant_order_no", "lease_owner", "lease_until", "status").
		Where("lease_owner IS NOT NULL").Scan(ctx, &stamped))
	now := time.Now().UTC()
	for _, l := range stamped {
		assert.True(t, strings.HasPrefix(l.Owner, killed.ownerPrefix()) && l.Until.Before(now) && l.Status == "SUCCEEDED",
			"%s left leased to %s until %s (%s): only the killed querier's expired leases of settled registrations remain", l.OrderNo, l.Owner, l.Until, l.Status)
	}
	t.Logf("%d settled registrations keep the killed querier's expired lease stamp", len(stamped))
}
