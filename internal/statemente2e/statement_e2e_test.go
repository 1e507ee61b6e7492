// Package statemente2e is the end-to-end test of the channel statements:
// the real consumer binary, an in-process Kafka (kfake) and MariaDB. A
// realistic stream of one tenant's two days on the three channels is
// consumed with some callbacks withheld, payments and refunds of every
// channel (and WeChat barcode payments, which are never notified). The
// statements of the full stream are imported, and their reconciliation
// must report exactly what the ledger never saw; --publish-missing
// publishes what the statements describe exactly and leaves the cumulative
// channels' refunds to the query API; the withheld callbacks, delivered at
// last, are duplicates of what was published; then every statement day
// reconciles clean and the invariants hold.
package statemente2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/invariant"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

const (
	topic = "channel-events"
	group = "settlement-consumer"
	dlq   = topic + ".dlq"
	// alipayAccount is the account the Alipay bills are for.
	alipayAccount = "20880000000000000156"
)

type quiet struct{}

func (quiet) Print(...any) {}

func TestMain(m *testing.M) {
	_ = mysql.SetLogger(quiet{})
	os.Exit(m.Run())
}

// world is what the binary runs against: a built consumer, a broker, a
// database, and a directory for the statement files.
type world struct {
	t       *testing.T
	ctx     context.Context
	bin     string
	dir     string
	brokers []string
	dsn     string
	env     []string
	// merchants is the merchant binding file (PAYCB_TENANT_MERCHANTS_FILE),
	// testMerchants unless the test rewrites it.
	merchants string
}

// testMerchants binds to the scenario's tenant the merchants the
// channelstest callbacks and the statementsample files name.
const testMerchants = `# the callbacks' merchants
1001 WECHAT 1230000109
1001 ALIPAY 2088101117955611
1001 SQB 01939202039923029
# the statement files' merchants (the Alipay PID is the account less 0156)
1001 WECHAT 1900000000
1001 ALIPAY 2088000000000000
1001 SQB 100000000000000001
`

func newWorld(ctx context.Context, t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "consumer")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/paycallback/paycallback/cmd/consumer").CombinedOutput()
	require.NoError(t, err, "build the consumer: %s", out)
	cluster, brokers, err := inprocess.Start(map[string]int32{topic: 4, dlq: 1, topic + ".settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	w := &world{t: t, ctx: ctx, bin: bin, dir: dir, brokers: brokers, dsn: sqldbtest.NewDatabase(t)}
	w.merchants = filepath.Join(dir, "merchants")
	require.NoError(t, os.WriteFile(w.merchants, []byte(testMerchants), 0o600))
	// The statement keys --publish-missing signs with (the first) and the
	// worker verifies with (both).
	keys := filepath.Join(dir, "statement-keys")
	require.NoError(t, os.WriteFile(keys, []byte(statementKeys), 0o600))
	w.env = append(os.Environ(), "PAYCB_TENANT_MERCHANTS_FILE="+w.merchants, "PAYCB_STATEMENT_KEY_FILE="+keys,
		"PAYCB_KAFKA_BROKERS="+brokers[0], "PAYCB_KAFKA_TOPIC="+topic, "PAYCB_KAFKA_GROUP="+group,
		"PAYCB_DB_DSN="+w.dsn, "PAYCB_ADMIN_ADDR=127.0.0.1:0",
		"PAYCB_WECHAT_APIV3_KEY="+channelstest.APIv3Key, "PAYCB_LOG_FORMAT=json", "PAYCB_LOG_LEVEL=info",
		"PAYCB_KAFKA_SESSION_TIMEOUT=10s", "PAYCB_KAFKA_HEARTBEAT_INTERVAL=300ms", "PAYCB_KAFKA_REBALANCE_TIMEOUT=10s",
		"PAYCB_KAFKA_MAX_WAIT=100ms", "PAYCB_SHUTDOWN_TIMEOUT=10s")
	return w
}

// consumer runs the binary with args to its end and returns its standard
// output and exit status; the standard error is in failure messages.
func (w *world) consumer(args ...string) (stdout string, code int) {
	w.t.Helper()
	cmd := exec.CommandContext(w.ctx, w.bin, args...)
	cmd.Env = w.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		require.NoError(w.t, err, "consumer %s", strings.Join(args, " "))
	}
	if code != 0 && code != 3 {
		w.t.Logf("consumer %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String(), code
}

// worker is a running `consumer run`.
type worker struct {
	cmd   *exec.Cmd
	admin string
	mu    sync.Mutex
	logs  bytes.Buffer
	done  chan struct{}
}

// startWorker starts `consumer run` and waits until its admin server
// listens.
func (w *world) startWorker() *worker {
	w.t.Helper()
	cmd := exec.CommandContext(w.ctx, w.bin, "run")
	cmd.Env = w.env
	stderr, err := cmd.StderrPipe()
	require.NoError(w.t, err)
	require.NoError(w.t, cmd.Start())
	wk := &worker{cmd: cmd, done: make(chan struct{})}
	listening, started := make(chan string, 1), make(chan struct{}, 1)
	go func() {
		defer close(wk.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			wk.mu.Lock()
			wk.logs.Write(line)
			wk.logs.WriteByte('\n')
			wk.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			switch rec.Msg {
			case "admin server listening":
				listening <- rec.Addr
			case "starting worker": // every start-up check passed
				started <- struct{}{}
			}
		}
	}()
	w.t.Cleanup(func() { wk.stop(w.t) })
	// The admin server listens first (its address), then every start-up
	// check passes (started).
	deadline, waitStart := time.After(30*time.Second), started
	for wk.admin == "" || waitStart != nil {
		select {
		case wk.admin = <-listening:
		case <-waitStart:
			waitStart = nil
		case <-wk.done:
			w.t.Fatalf("consumer run ended before it started:\n%s", wk.logText())
		case <-deadline:
			w.t.Fatalf("consumer run did not start in 30s:\n%s", wk.logText())
		}
	}
	return wk
}

func (wk *worker) logText() string {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return wk.logs.String()
}

// stop stops the worker with SIGTERM and waits for it; the worker must
// exit 0.
func (wk *worker) stop(t *testing.T) {
	t.Helper()
	if wk.cmd.ProcessState != nil {
		return
	}
	_ = wk.cmd.Process.Signal(syscall.SIGTERM)
	<-wk.done
	err := wk.cmd.Wait()
	assert.NoError(t, err, "consumer run exits cleanly on SIGTERM:\n%s", wk.logText())
}

// outcomeLine matches a paycb_events_total sample and captures its outcome
// and value.
var outcomeLine = regexp.MustCompile(`^paycb_events_total\{.*outcome="([a-z_]+)".*\} ([0-9.e+]+)$`)

// outcomes scrapes the worker's paycb_events_total, summed by outcome.
func (wk *worker) outcomes(t *testing.T) map[string]int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+wk.admin+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	out := map[string]int{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := outcomeLine.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			require.NoError(t, err, line)
			if v != 0 {
				out[m[1]] += int(v)
			}
		}
	}
	return out
}

// produce writes msgs to the input topic and waits until the group has
// consumed the topic to its end.
func (w *world) produce(msgs []demo.Message) {
	w.t.Helper()
	kms := make([]kafkaops.Message, len(msgs))
	for i, m := range msgs {
		kms[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
	}
	require.NoError(w.t, kafkaops.Produce(w.ctx, w.brokers, topic, kms))
	w.waitConsumed()
}

func (w *world) waitConsumed() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 45*time.Second)
	defer cancel()
	require.NoError(w.t, kafkaops.WaitConsumed(ctx, w.brokers, group, topic, 50*time.Millisecond, nil))
}

// importStatements writes the scenario's statement files (per day for
// WeChat and Alipay, one file of query responses for Shouqianba) and
// imports each with `consumer statement import`.
func (w *world) importStatements(s *scenario) {
	w.t.Helper()
	type file struct {
		ch   channels.Channel
		name string
		day  string // the bill's day, for --date; "" for Shouqianba's responses
		f    statementsample.File
	}
	var files []file
	for _, day := range s.days {
		wf, err := wechat.SampleBill(statementsample.OnDay(s.lines[channels.WeChat], day),
			wechat.SampleBillOptions{MicroPay: s.barcode})
		require.NoError(w.t, err)
		files = append(files, file{channels.WeChat, "wechat_tradebill_ALL_" + day + ".csv", day, wf})
		af, err := alipay.SampleBill(alipayAccount, day, statementsample.OnDay(s.lines[channels.Alipay], day))
		require.NoError(w.t, err)
		files = append(files, file{channels.Alipay, alipayAccount + "_" + strings.ReplaceAll(day, "-", "") + ".csv.zip", day, af})
	}
	// Shouqianba's responses come in whatever files the operator gathers:
	// here two, each holding every other order, that merge per day.
	var halves [2][]statements.Line
	for i, l := range s.lines[channels.SQB] {
		halves[i%2] = append(halves[i%2], l)
	}
	for i, h := range halves {
		sf, err := sqb.SampleQueryResponses(h)
		require.NoError(w.t, err)
		files = append(files, file{channels.SQB, fmt.Sprintf("sqb_query_responses_%d.jsonl", i+1), "", sf})
	}

	for _, f := range files {
		path := filepath.Join(w.dir, f.name)
		require.NoError(w.t, os.WriteFile(path, f.f.Data, 0o600))
		args := []string{"statement", "import", "--channel", string(f.ch), "--tenant", strconv.Itoa(tenant), "--file", path, "--json"}
		if f.ch == channels.WeChat {
			args = append(args, "--sha1", f.f.Want.SHA1)
		}
		if f.day != "" {
			args = append(args, "--date", f.day)
		}
		out, code := w.consumer(args...)
		require.Equal(w.t, 0, code, "import %s", f.name)
		var res statementbook.ImportResult
		require.NoError(w.t, json.Unmarshal([]byte(out), &res), out)
		lines := 0
		for _, d := range res.Days {
			if f.ch == channels.SQB && d.Status == statementbook.ImportMerged {
				assert.Len(w.t, d.Changes, d.Lines, "%s %s: every order added, none removed", f.name, d.Day)
			} else {
				assert.Equal(w.t, statementbook.ImportNew, d.Status, "%s %s", f.name, d.Day)
			}
			lines += d.Lines
		}
		assert.Equal(w.t, len(f.f.Want.Lines), lines, "%s: every line stored", f.name)
	}
}

// reconcile runs `consumer statement reconcile --json` for every channel
// and day and returns the items reported (as expectedItems) and each run's
// exit status by "CHANNEL DAY".
func (w *world) reconcile(s *scenario) ([]expectedItem, map[string]int) {
	w.t.Helper()
	var items []expectedItem
	codes := map[string]int{}
	for _, ch := range channels.Codes() {
		for _, day := range s.days {
			out, code := w.consumer("statement", "reconcile", "--channel", string(ch), "--tenant", strconv.Itoa(tenant),
				"--date", day, "--json")
			codes[string(ch)+" "+day] = code
			var rep statementbook.StatementReport
			require.NoError(w.t, json.Unmarshal([]byte(out), &rep), "%s %s: %s", ch, day, out)
			require.Equal(w.t, code == 0, rep.OK(), "%s %s: exit %d for a report of %d items", ch, day, code, len(rep.Items))
			for _, it := range rep.Items {
				e := expectedItem{Channel: string(ch), Day: day, Category: it.Category, TradeNo: it.TradeNo, RefundNo: it.RefundNo, Key: it.Key}
				if it.StatementAmount != nil {
					e.StatementAmount = *it.StatementAmount
				}
				items = append(items, e)
			}
		}
	}
	sortItems(items)
	return items, codes
}

// publishMissing runs `consumer statement reconcile --publish-missing
// --json` for every channel and day, expecting the exit status wantCodes
// gives the day (the reconciliation's), and returns what was published
// (keys) and what needs the query API (as items of the day). Nothing may
// have been published before or be claimed without a posting.
func (w *world) publishMissing(s *scenario, wantCodes map[string]int) (published []string, needsQuery []expectedItem) {
	w.t.Helper()
	for _, ch := range channels.Codes() {
		for _, day := range s.days {
			out, code := w.consumer("statement", "reconcile", "--channel", string(ch), "--tenant", strconv.Itoa(tenant),
				"--date", day, "--publish-missing", "--json")
			require.Equal(w.t, wantCodes[string(ch)+" "+day], code, "%s %s --publish-missing: %s", ch, day, out)
			var rep struct {
				statementbook.StatementReport
				Publish *statementbook.PublishReport `json:"publish"`
			}
			require.NoError(w.t, json.Unmarshal([]byte(out), &rep), "%s %s: %s", ch, day, out)
			require.NotNil(w.t, rep.Publish, "%s %s: the report says what was published", ch, day)
			p := rep.Publish
			assert.Empty(w.t, p.AlreadyPublished, "%s %s", ch, day)
			assert.Empty(w.t, p.Claimed, "%s %s", ch, day)
			for _, it := range p.Published {
				published = append(published, it.Key)
			}
			for _, it := range p.NeedsQuery {
				needsQuery = append(needsQuery, expectedItem{
					Channel: string(ch), Day: day, Category: "missing_in_ledger",
					TradeNo: it.TradeNo, RefundNo: it.RefundNo, Key: it.Key, StatementAmount: it.Amount,
				})
			}
		}
	}
	slices.Sort(published)
	sortItems(needsQuery)
	return published, needsQuery
}

// TestStatementsRecoverWithheldCallbacks is the statements' end-to-end
// test; see the package comment.
func TestStatementsRecoverWithheldCallbacks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel) // after the worker's clean-up, which stops it
	w := newWorld(ctx, t)
	_, code := w.consumer("migrate")
	require.Zero(t, code, "consumer migrate")
	s := newScenario(t)

	notWithheld := func(e *event) bool { return !e.withheld }
	unseen := func(e *event) bool { return e.withheld || e.barcode }
	delivered := s.messages(notWithheld)
	var deliveredEvents, withheldEvents, barcodes int
	for _, e := range s.events {
		switch {
		case e.barcode:
			barcodes++
		case e.withheld:
			withheldEvents++
		default:
			deliveredEvents++
		}
	}
	kinds := map[string]bool{}
	for _, e := range s.events {
		if e.withheld {
			kinds[fmt.Sprintf("%s %s", e.trade.Channel, e.decoded.Type)] = true
		}
	}
	require.Len(t, kinds, 6, "payments and refunds of each channel withheld: %v", kinds)
	t.Logf("scenario: %d money events over %v (%d barcode payments never notified, %d withheld), %d messages delivered first",
		len(s.events), s.days, barcodes, withheldEvents, len(delivered))

	// The worker consumes everything but the withheld callbacks.
	wk := w.startWorker()
	w.produce(delivered)
	got := wk.outcomes(t)
	assert.Equal(t, map[string]int{"acquired": deliveredEvents, "duplicate": len(delivered) - deliveredEvents}, got,
		"each delivered event claimed once, its channel retries duplicates")

	// The statements of the full stream, imported; their reconciliation
	// finds exactly what the ledger never saw, and says so with exit 3.
	w.importStatements(s)
	items, codes := w.reconcile(s)
	want := s.missing(unseen)
	require.NotEmpty(t, want)
	assert.Equal(t, want, items, "reconcile reports exactly the withheld and never-notified events, as missing_in_ledger")
	for k, code := range codes {
		assert.Equal(t, 3, code, "%s: discrepancies found", k)
	}
	require.Len(t, codes, 6, "three channels, two days")

	// --publish-missing publishes what the statements describe exactly:
	// payments, WeChat refunds; the refunds of the cumulative channels are
	// left for the channel's query API.
	rebuilt := func(e *event) bool { return unseen(e) && e.rebuildable() }
	queryAPI := func(e *event) bool { return unseen(e) && !e.rebuildable() }
	var wantPublished []string
	for _, e := range s.events {
		if rebuilt(e) {
			wantPublished = append(wantPublished, e.key())
		}
	}
	slices.Sort(wantPublished)
	wantQuery := s.missing(queryAPI)
	require.NotEmpty(t, wantQuery)
	published, needsQuery := w.publishMissing(s, codes)
	assert.Equal(t, wantPublished, published, "every payment and WeChat refund missing from the ledger published, once")
	assert.Equal(t, wantQuery, needsQuery, "the Alipay and Shouqianba refunds left for the query API")

	// The worker settles what was published, as it would the callbacks.
	w.waitConsumed()
	before := got
	got = wk.outcomes(t)
	assert.Equal(t, map[string]int{"acquired": before["acquired"] + len(wantPublished), "duplicate": before["duplicate"]}, got,
		"each published event claimed once")
	items, codes = w.reconcile(s)
	assert.Equal(t, wantQuery, items, "only the refunds for the query API remain")
	for k, code := range codes {
		assert.Equal(t, map[bool]int{true: 0, false: 3}[strings.HasPrefix(k, "WECHAT")], code, k)
	}
	// A second run publishes nothing: what is settled is no longer
	// missing, what needs the query API is never published.
	published, needsQuery = w.publishMissing(s, codes)
	assert.Empty(t, published, "a second run publishes nothing")
	assert.Equal(t, wantQuery, needsQuery)
	var audited int
	w.query(&audited, "SELECT COUNT(*) FROM ss_operator_audit WHERE command = 'statement reconcile'")
	assert.Equal(t, 2*len(codes), audited, "every --publish-missing run in the audit trail, no plain reconciliation")

	// The withheld callbacks arrive at last: every one the statements
	// settled is a duplicate; the cumulative refunds are claimed now.
	late := s.messages(func(e *event) bool { return e.withheld })
	var lateDuplicates, lateAcquired int
	for _, e := range s.events {
		switch {
		case !e.withheld:
		case e.rebuildable():
			lateDuplicates += len(e.copies)
		default:
			lateAcquired++
			lateDuplicates += len(e.copies) - 1
		}
	}
	before = got
	w.produce(late)
	got = wk.outcomes(t)
	assert.Equal(t, map[string]int{"acquired": before["acquired"] + lateAcquired, "duplicate": before["duplicate"] + lateDuplicates}, got,
		"the late callbacks of published events are duplicates, never conflicts")
	wk.stop(t)

	// The ledger matches every statement, and the invariants hold.
	items, codes = w.reconcile(s)
	assert.Empty(t, items, "the ledger matches the statements")
	for k, code := range codes {
		assert.Zero(t, code, "%s: statement reconcile exits 0", k)
	}
	out, code := w.consumer("reconcile")
	assert.Zero(t, code, "consumer reconcile finds nothing: %s", out)
	w.checkInvariants(s, len(wantPublished))

	// The day after the scenario's has no statement and no posting: it is
	// not clean (a failed download looks the same) until the channel's
	// answer that there was no bill is recorded.
	const after = "2024-06-03"
	quiet := []string{"statement", "reconcile", "--channel", "WECHAT", "--tenant", strconv.Itoa(tenant), "--date", after, "--json"}
	out, code = w.consumer(quiet...)
	assert.Equal(t, 3, code, "no_statement: %s", out)
	var rep statementbook.StatementReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Items, 1)
	assert.Equal(t, statementbook.StatementNoStatement, rep.Items[0].Category)
	out, code = w.consumer("statement", "empty", "--channel", "WECHAT", "--tenant", strconv.Itoa(tenant), "--date", after,
		"--note", "NO_STATEMENT_EXIST from GET /v3/bill/tradebill")
	require.Zero(t, code, out)
	out, code = w.consumer(quiet...)
	assert.Zero(t, code, "declared empty, nothing posted on the day: %s", out)
}

// query scans the one row of a query on the world's database into dest.
func (w *world) query(dest any, q string, args ...any) {
	w.t.Helper()
	db, err := sqldb.OpenMySQL(w.dsn)
	require.NoError(w.t, err)
	defer db.Close()
	require.NoError(w.t, db.NewRaw(q, args...).Scan(w.ctx, dest), q)
}

// checkInvariants runs the invariant checker over everything the input
// topic holds, callbacks and events rebuilt from statements alike: every
// money event of the scenario posted exactly once, nothing dead-lettered,
// the tenant's merchant_payable net of what the channels moved.
// The topic must hold exactly published events rebuilt from statements.
func (w *world) checkInvariants(s *scenario, published int) {
	w.t.Helper()
	msgs, err := kafkaops.ReadAll(w.ctx, w.brokers, topic)
	require.NoError(w.t, err)
	stream := demo.Stream{Events: len(s.events), Paid: map[int64]int64{tenant: s.paid}, Refunded: map[int64]int64{tenant: s.refunded}}
	fromStatements := 0
	for _, m := range msgs {
		stream.Messages = append(stream.Messages, demo.Message{Key: m.Key, Value: m.Value})
		env, err := channels.ParseEnvelope(m.Value)
		require.NoError(w.t, err)
		if env.FromStatement() {
			fromStatements++
		}
	}
	assert.Equal(w.t, published, fromStatements, "events rebuilt from statements on the topic")
	db, err := sqldb.OpenMySQL(w.dsn)
	require.NoError(w.t, err)
	defer db.Close()
	rep, err := invariant.Check(w.ctx, db, w.brokers, dlq, stream)
	require.NoError(w.t, err)
	require.NoError(w.t, rep.Err())
	assert.Equal(w.t, map[string]int{"SETTLED/POSTED": len(s.events)}, rep.ClaimOutcomes,
		"one claim per money event, each posted: no refund's money was carried by another's claim")
}

// String makes a failing comparison of items readable.
func (e expectedItem) String() string {
	return fmt.Sprintf("%s %s %s trade=%s refund=%q key=%q statement=%d", e.Channel, e.Day, e.Category, e.TradeNo, e.RefundNo,
		e.Key, e.StatementAmount)
}
