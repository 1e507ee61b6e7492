package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// Defaults of QueryOptions.
const (
	// DefaultQueryRate is the registrations published per second: the
	// issue's 1,000/s.
	DefaultQueryRate = 1000
	// DefaultQueryDuration is how long registrations are published.
	DefaultQueryDuration = 10 * time.Second
	// DefaultQueryFirstWait is the querier's shortened first wait
	// (PAYCB_QUERY_FIRST_WAIT; 60s in production).
	DefaultQueryFirstWait = time.Second
	// DefaultQueryTenants is how many tenants the registrations are
	// spread over, round robin, each with a WeChat merchant of its own (a
	// merchant belongs to one tenant). The query budget is a merchant's, 5
	// queries/s with bursts of 10 (queryplan.DefaultBudget): 250 merchants
	// are 1,250 queries/s in all, so that the budget is not what bounds
	// the row at 1,000/s.
	DefaultQueryTenants = 250
	// DefaultQueryInterval, DefaultQueryBatch and DefaultQueryParallel
	// are the querier's --interval, --batch and --parallel: at the
	// defaults of consumer query run (1s, 100, 8) one querier asks at most
	// 100 registrations a second.
	DefaultQueryInterval = 100 * time.Millisecond
	DefaultQueryBatch    = 250
	DefaultQueryParallel = 16
	// RowQuery is the key of the querier's row.
	RowQuery = "query"
	// queryTopic is the querier row's input topic.
	queryTopic = "query-events"
	// queryLatencySlack is the goal's allowance over the first wait.
	queryLatencySlack = time.Second
	// signSamples and verifySamples are how many RSA-2048 signatures and
	// verifications the harness times on its own for the per-query costs.
	signSamples   = 300
	verifySamples = 1000
)

// QueryOptions shape the querier's row (RunQuery); a zero field takes its
// default.
type QueryOptions struct {
	// Rate is the registrations published per second (DefaultQueryRate).
	Rate float64
	// Duration is how long they are published (DefaultQueryDuration).
	Duration time.Duration
	// FirstWait is the querier's first wait (DefaultQueryFirstWait).
	FirstWait time.Duration
	// Tenants is how many tenants the registrations are spread over
	// (DefaultQueryTenants): each is a budget of its own.
	Tenants int
	// Interval, Batch and Parallel are the querier's flags
	// (DefaultQueryInterval, DefaultQueryBatch, DefaultQueryParallel).
	Interval time.Duration
	Batch    int
	Parallel int
}

func (q *QueryOptions) defaults() {
	if q.Rate <= 0 {
		q.Rate = DefaultQueryRate
	}
	if q.Duration <= 0 {
		q.Duration = DefaultQueryDuration
	}
	if q.FirstWait <= 0 {
		q.FirstWait = DefaultQueryFirstWait
	}
	if q.Tenants <= 0 {
		q.Tenants = DefaultQueryTenants
	}
	if q.Interval <= 0 {
		q.Interval = DefaultQueryInterval
	}
	if q.Batch <= 0 {
		q.Batch = DefaultQueryBatch
	}
	if q.Parallel <= 0 {
		q.Parallel = DefaultQueryParallel
	}
}

// QueryResult is what RunQuery measured.
type QueryResult struct {
	// Facts describe the run: machine, server, settings.
	Facts []string
	// Options are the settings the row ran with, defaults filled in.
	Options QueryOptions
	// Registrations is how many payments were registered (none with a
	// callback); Rate the registrations per second the publisher reached.
	Registrations int
	Rate          float64
	// Settled is how many of them ended SUCCEEDED with a settled claim.
	Settled int
	// Queries is the requests the fake WeChat received; QueryRate is
	// Queries per second from its first request to its last.
	Queries   int
	QueryRate float64
	// Published is the answers the querier published (its query log).
	Published int
	// P50 and P99 are of registered_at (the worker recording the
	// registration) -> settled_at (the claim of the answer's payment
	// settled), over the registrations settled.
	P50, P99 time.Duration
	// Asked50 and Asked99 are of registered_at -> the query's asked_at
	// (the querier's log), AskedToSettled50 and AskedToSettled99 of
	// asked_at -> settled_at.
	Asked50, Asked99                   time.Duration
	AskedToSettled50, AskedToSettled99 time.Duration
	// QuerierCPU, WorkerCPU and HarnessCPU are the utime+stime (/proc) of
	// the querier process, the worker process and the harness (the fake
	// WeChat, the registration publisher and the statement counter) from
	// the first registration published to the last settled. DBCPU is the
	// database server's over the same time (negative when unknown).
	QuerierCPU, WorkerCPU, HarnessCPU, DBCPU time.Duration
	// QuerierStatements is what the querier sent to the database (counted
	// on its connections); Statements the server's Questions over the row
	// (every client: the worker, the querier, others), the harness's
	// own polls left out.
	QuerierStatements, Statements int64
	// SignCost and VerifyCost are one WeChat v3 request signature
	// (RSA-2048, SHA256withRSA) and one answer verification, in CPU,
	// timed by the harness alone before the row.
	SignCost, VerifyCost time.Duration
	// Elapsed is from the first registration published to the last
	// settled.
	Elapsed time.Duration
	// Problems lists failed sanity checks; empty when all held.
	Problems []string
}

// perQuery is d in µs per query, -1 when unknown.
func (r QueryResult) perQuery(d time.Duration) float64 { return perUnit(d, r.Queries) }

// QuerierPerQuery is the querier's CPU per query in µs.
func (r QueryResult) QuerierPerQuery() float64 { return r.perQuery(r.QuerierCPU) }

// QuerierStatementsPerQuery is the querier's own statements per query.
func (r QueryResult) QuerierStatementsPerQuery() float64 {
	if r.Queries == 0 || r.QuerierStatements < 0 {
		return -1
	}
	return float64(r.QuerierStatements) / float64(r.Queries)
}

// Goal is the latency the issue sets: the first wait plus a second.
func (r QueryResult) Goal() time.Duration { return r.Options.FirstWait + queryLatencySlack }

// RunQuery measures the active query end to end: payments registered
// through the input topic at a paced rate, none with a callback; a worker
// process (the batched pipeline) recording them; a querier process
// (consumer query run, first wait shortened) asking a fake WeChat in the
// harness that answers every query SUCCESS signed with a test platform
// key; the worker settling the published answers. Of Options it uses
// Seed, ServerDSN, RepoDir, BinDir, GoTool, BatchMax, ConsumerEnv (given to
// the worker) and Logger. Like Run, it stops every subprocess and drops
// every database before it returns.
func RunQuery(ctx context.Context, o Options, qo QueryOptions) (QueryResult, error) {
	qo.defaults()
	res := QueryResult{Options: qo}
	err := session(ctx, o, []string{queryTopic}, func(h *harness, broker *proc) error {
		err := h.query(ctx, qo, &res)
		res.Problems = append(res.Problems, h.res.Problems...)
		if err != nil {
			return err
		}
		if err := broker.stop(10 * time.Second); err != nil {
			h.log.Warn("broker did not stop cleanly", "err", err)
		}
		return nil
	})
	return res, err
}

// queryTrade is registration i's trade: WeChat, tenant 1..tenants round
// robin.
func queryTrade(i, tenants int) sample.Trade {
	t := sample.NewTrade(channels.WeChat, i+1)
	t.TenantID = int64(1 + i%tenants)
	return t
}

// queryMerchant is tenant's WeChat merchant: the fake's own for tenant 1,
// one the fake is told to accept for the others.
func queryMerchant(tenant int64) string {
	if tenant == 1 {
		return fakechannel.WeChatMerchantID
	}
	return fmt.Sprintf("19%08d", tenant)
}

// queryMerchants are the merchants of tenants 2..tenants.
func queryMerchants(tenants int) []string {
	out := make([]string, 0, tenants)
	for t := 2; t <= tenants; t++ {
		out = append(out, queryMerchant(int64(t)))
	}
	return out
}

// querierFiles writes what the querier and the worker read: the
// credentials of every tenant (the fake's merchant, its key), the
// statement key, the fake's platform public key and its CA. It returns
// their settings.
func querierFiles(dir string, keys *fakechannel.Keys, caPEM []byte, tenants int) (querier, worker []string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("querier files: %w", err)
	}
	write := func(name string, content []byte) (string, error) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			return "", fmt.Errorf("querier files: %w", err)
		}
		return p, nil
	}
	var creds, pub strings.Builder
	for t := 1; t <= tenants; t++ {
		m := queryMerchant(int64(t))
		fmt.Fprintf(&creds, "- {tenant_id: %d, channel: WECHAT, merchant_id: %q, serial_no: %q, private_key_file: wechat.pem}\n",
			t, m, fakechannel.WeChatSerialNo)
		fmt.Fprintf(&pub, "- {channel: WECHAT, merchant_id: %q, key_id: %q, public_key_file: wechatpay_pub.pem}\n",
			m, fakechannel.WeChatPlatformKeyID)
	}
	files := []struct {
		name    string
		content []byte
		env     string
		who     int // 1 querier, 2 worker, 3 both
	}{
		{"wechat.pem", fakechannel.PrivateKeyPEM(keys.Merchant), "", 0},
		{"wechatpay_pub.pem", fakechannel.PublicKeyPEM(&keys.Platform.PublicKey), "", 0},
		{"credentials.yaml", []byte(creds.String()), "PAYCB_QUERY_CREDENTIALS_FILE", 1},
		{"statement_keys", []byte("q1=0123456789abcdef0123456789abcdef\n"), "PAYCB_STATEMENT_KEY_FILE", 3},
		{"channel_keys.yaml", []byte(pub.String()), "PAYCB_CHANNEL_PUBLIC_KEYS_FILE", 3},
		{"ca.pem", caPEM, "PAYCB_QUERY_TLS_CA_FILE", 1},
	}
	for _, f := range files {
		p, err := write(f.name, f.content)
		if err != nil {
			return nil, nil, err
		}
		if f.who&1 != 0 {
			querier = append(querier, f.env+"="+p)
		}
		if f.who&2 != 0 {
			worker = append(worker, f.env+"="+p)
		}
	}
	return querier, worker, nil
}

// rsaCosts times WeChat v3 request signatures and answer verifications
// with the fake's keys on one goroutine, in the harness's CPU (nothing
// else of it runs yet).
func rsaCosts(keys *fakechannel.Keys) (sign, verify time.Duration, err error) {
	creds := keys.WeChatCredentials(1, keys.Merchant)
	const nonce = "5K8264ILTKCH16CQ2502SI8ZNMTM67VS"
	start, err := procCPU(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	for i := range signSamples {
		path := "/v3/pay/transactions/out-trade-no/POS" + strconv.Itoa(i) + "?mchid=" + fakechannel.WeChatMerchantID
		if _, err := wechat.Authorization(creds, http.MethodGet, path, nil, time.Now(), nonce); err != nil {
			return 0, 0, fmt.Errorf("time request signatures: %w", err)
		}
	}
	mid, err := procCPU(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	body := wechat.SamplePaymentAnswer(queryTrade(0, 1), "SUCCESS")
	h, err := wechat.SignAnswer(keys.Platform, fakechannel.WeChatPlatformKeyID, time.Now(), nonce, body)
	if err != nil {
		return 0, 0, fmt.Errorf("time answer verifications: %w", err)
	}
	resp := channels.QueryResponse{StatusCode: http.StatusOK, Header: h, Body: body, ReceivedAt: time.Now()}
	for range verifySamples {
		if err := wechat.VerifyAnswer(resp, fakechannel.WeChatMerchantID, keys.WeChatPublicKeys(), time.Now()); err != nil {
			return 0, 0, fmt.Errorf("time answer verifications: %w", err)
		}
	}
	end, err := procCPU(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	return (mid - start) / signSamples, (end - mid) / verifySamples, nil
}

// query runs the querier's row into res.
func (h *harness) query(ctx context.Context, qo QueryOptions, res *QueryResult) error {
	o := h.o
	n := max(1, int(qo.Rate*qo.Duration.Seconds()))
	res.Facts = append(res.Facts,
		fmt.Sprintf("machine: %d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()))

	keys, err := fakechannel.SharedKeys()
	if err != nil {
		return err
	}
	if res.SignCost, res.VerifyCost, err = rsaCosts(keys); err != nil {
		return err
	}
	wx, err := fakechannel.NewWeChat(fakechannel.Options{Keys: keys, WeChatMerchants: queryMerchants(qo.Tenants)})
	if err != nil {
		return fmt.Errorf("start the fake WeChat: %w", err)
	}
	defer wx.Close()
	for i := range n {
		wx.Script(queryTrade(i, qo.Tenants), fakechannel.Step{Answer: fakechannel.Success})
	}
	querierEnv, workerEnv, err := querierFiles(filepath.Join(h.work, "query"), keys, wx.CertificatePEM(), qo.Tenants)
	if err != nil {
		return err
	}

	dsn, db, err := h.dbs.create(ctx, "query")
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	info, err := serverInfo(ctx, db)
	if err != nil {
		return err
	}
	res.Facts = append(res.Facts, "database: "+info)
	res.Facts = append(res.Facts, h.serverFacts(ctx)...)
	res.Facts = append(res.Facts, h.consumerFacts()...)

	// The querier's connections go through the counter, so that its
	// statements are told from the worker's.
	cfg, err := sqldb.MySQLConfig(dsn)
	if err != nil {
		return err
	}
	counter, err := newStatementCounter(ctx, cfg.Addr)
	if err != nil {
		return err
	}
	defer counter.close()
	cfg.Addr = counter.addr()
	querierDSN := cfg.FormatDSN()

	c := consumerRun{topic: queryTopic, group: h.dbs.prefix + "query", dsn: dsn, batchMax: o.BatchMax, env: workerEnv}
	worker, err := h.startReady(ctx, c)
	if err != nil {
		return err
	}
	defer worker.kill()
	q, err := h.startQuerier(ctx, querierDSN, qo, querierEnv, wx.URL())
	if err != nil {
		return err
	}
	defer q.kill()

	// Every figure runs from the first registration published to the
	// last settled: the processes' start-ups are left out.
	before := h.meter.read(ctx)
	qBefore, err := procCPU(q.pid())
	if err != nil {
		return err
	}
	wBefore, err := procCPU(worker.pid())
	if err != nil {
		return err
	}
	sBefore := counter.count()
	start := time.Now()
	achieved, err := produceRegistrations(ctx, h.brokers, n, qo)
	if err != nil {
		return err
	}
	res.Registrations, res.Rate = n, achieved
	polls, err := h.waitRegistrations(ctx, db, n, qo)
	if err != nil {
		return errors.Join(err, q.failure(), worker.failure())
	}
	if p, err := h.waitPublished(ctx, db, RowQuery); err == nil {
		polls += p
	} else {
		h.problem("%v", err)
	}
	res.Elapsed = time.Since(start)
	u := h.meter.since(before, h.meter.read(ctx))
	qAfter, err := procCPU(q.pid())
	if err != nil {
		return err
	}
	wAfter, err := procCPU(worker.pid())
	if err != nil {
		return err
	}
	res.QuerierStatements = counter.count() - sBefore
	res.QuerierCPU, res.WorkerCPU, res.HarnessCPU, res.DBCPU = qAfter-qBefore, wAfter-wBefore, u.self, u.server
	res.Statements = u.statements
	if res.Statements >= 0 {
		res.Statements = max(0, res.Statements-polls)
	}
	if err := q.stop(30 * time.Second); err != nil {
		return err
	}
	if err := worker.stop(45 * time.Second); err != nil {
		return err
	}

	reqs := wx.Requests()
	res.Queries = len(reqs)
	if len(reqs) > 1 {
		if span := reqs[len(reqs)-1].At.Sub(reqs[0].At); span > 0 {
			res.QueryRate = float64(len(reqs)) / span.Seconds()
		}
	}
	bad := 0
	for _, r := range reqs {
		if !r.SignatureOK {
			bad++
		}
	}
	if bad > 0 {
		h.problem("%s: %d of %d requests were refused by the fake WeChat (signature)", RowQuery, bad, len(reqs))
	}
	if err := h.queryLatencies(ctx, db, res); err != nil {
		return err
	}
	if res.Settled != n {
		h.problem("%s: %d of %d registrations settled", RowQuery, res.Settled, n)
	}
	if res.Published != n {
		h.problem("%s: %d answers published for %d registrations", RowQuery, res.Published, n)
	}
	h.reconciled(ctx, db, RowQuery)
	h.settledComplete(ctx, db, RowQuery, queryTopic, true)
	res.Facts = append(res.Facts, fmt.Sprintf("querier: consumer query run --interval %s --batch %d --parallel %d, "+
		"PAYCB_QUERY_FIRST_WAIT=%s; registrations spread over %d tenants, a WeChat merchant each (%d budgets of "+
		"5 queries/s, bursts of 10: %d queries/s in all)", qo.Interval, qo.Batch, qo.Parallel, qo.FirstWait,
		qo.Tenants, qo.Tenants, 5*qo.Tenants))
	return nil
}

// startQuerier starts bin/consumer query run against dsn (through the
// statement counter) and the fake WeChat at url, and waits until its
// /readyz answers.
func (h *harness) startQuerier(ctx context.Context, dsn string, qo QueryOptions, files []string, url string) (*proc, error) {
	port, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	admin := "127.0.0.1:" + strconv.Itoa(port)
	env := append([]string{
		"PAYCB_KAFKA_BROKERS=" + strings.Join(h.brokers, ","),
		"PAYCB_KAFKA_TOPIC=" + queryTopic,
		"PAYCB_DB_DSN=" + dsn,
		"PAYCB_ADMIN_ADDR=" + admin,
		"PAYCB_LOG_LEVEL=warn",
		"PAYCB_QUERY_WECHAT_URL=" + url,
		"PAYCB_QUERY_FIRST_WAIT=" + qo.FirstWait.String(),
	}, files...)
	args := []string{
		"query", "run", "--interval", qo.Interval.String(), "--batch", strconv.Itoa(qo.Batch),
		"--parallel", strconv.Itoa(qo.Parallel),
	}
	p, err := startProc(ctx, h.log, "querier", h.work, filepath.Join(h.o.BinDir, "consumer"), args, env, nil)
	if err != nil {
		return nil, err
	}
	p.admin = "http://" + admin
	if err := p.waitReady(ctx, p.readyzURL(), time.Minute); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// produceRegistrations publishes n payment registrations to the querier
// row's topic at qo.Rate a second, in chunks every 10ms, each created and
// received at its publish time and expiring an hour later. It returns the
// rate reached.
func produceRegistrations(ctx context.Context, brokers []string, n int, qo QueryOptions) (float64, error) {
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        queryTopic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    1000,
		BatchTimeout: time.Millisecond,
	}
	defer func() { _ = w.Close() }()
	chunk := max(1, int(qo.Rate/100))
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	batch := make([]kafka.Message, 0, chunk)
	start := time.Now()
	for i := 0; i < n; i += chunk {
		due := start.Add(time.Duration(float64(i) / qo.Rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("publish registrations: %w", ctx.Err())
			case <-timer.C:
			}
		}
		now := time.Now().UTC()
		batch = batch[:0]
		for j := i; j < min(i+chunk, n); j++ {
			t := queryTrade(j, qo.Tenants)
			v, err := channels.RegistrationEnvelope(t.TenantID, channels.WeChat, now, channels.RegistrationMessage{
				Kind: channels.RegistrationPayment, MerchantID: queryMerchant(t.TenantID), MerchantOrderNo: t.MerchantOrderNo,
				Amount: t.Total, Currency: "CNY", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			})
			if err != nil {
				return 0, fmt.Errorf("registration %d: %w", j, err)
			}
			batch = append(batch, kafka.Message{Key: []byte("WECHAT:" + t.MerchantOrderNo), Value: v})
		}
		if err := w.WriteMessages(ctx, batch...); err != nil {
			return 0, fmt.Errorf("publish registrations to %s: %w", queryTopic, err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// waitRegistrations waits until n payment registrations are SUCCEEDED,
// polling every 50ms, for at most the publishing time, the first wait
// and two minutes; it returns the statements its polls sent.
func (h *harness) waitRegistrations(ctx context.Context, db bun.IDB, n int, qo QueryOptions) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, qo.Duration+qo.FirstWait+2*time.Minute)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var polls int64
	lastLog := time.Now()
	for {
		var done int
		polls++
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ss_payment_registration WHERE status = 'SUCCEEDED'").Scan(&done); err != nil {
			return polls, fmt.Errorf("%s: wait for the registrations to settle: %w", RowQuery, err)
		}
		if done >= n {
			return polls, nil
		}
		if time.Since(lastLog) >= progressEvery {
			lastLog = time.Now()
			h.log.Info("settling registrations", "succeeded", done, "of", n)
		}
		select {
		case <-ctx.Done():
			return polls, fmt.Errorf("%s: %d of %d registrations settled: %w", RowQuery, done, n, ctx.Err())
		case <-t.C:
		}
	}
}

// queryLatencies reads, for every registration, when the worker recorded
// it, when the querier asked about it and when the claim of its payment
// settled, into res.
func (h *harness) queryLatencies(ctx context.Context, db bun.IDB, res *QueryResult) error {
	rows, err := db.QueryContext(ctx, "SELECT r.registered_at, c.settled_at, "+
		"(SELECT MIN(l.asked_at) FROM ss_query_log l WHERE l.tenant_id = r.tenant_id AND l.channel_code = r.channel_code "+
		"AND l.merchant_order_no = r.merchant_order_no) "+
		"FROM ss_payment_registration r "+
		"JOIN ss_settled_outbox o ON o.tenant_id = r.tenant_id AND o.channel_code = r.channel_code AND o.channel_trade_no = r.channel_trade_no "+
		"JOIN ss_channel_idempotent c ON c.tenant_id = o.tenant_id AND c.idempotent_key = o.idempotent_key "+
		"WHERE r.status = 'SUCCEEDED' AND c.status = 'SETTLED' AND o.source = 'query'")
	if err != nil {
		return fmt.Errorf("%s: read settle times: %w", RowQuery, err)
	}
	defer func() { _ = rows.Close() }()
	var total, asked, settle []time.Duration
	for rows.Next() {
		var (
			registered, settled time.Time
			askedAt             *time.Time
		)
		if err := rows.Scan(&registered, &settled, &askedAt); err != nil {
			return fmt.Errorf("%s: read settle times: %w", RowQuery, err)
		}
		total = append(total, settled.Sub(registered))
		if askedAt != nil {
			asked = append(asked, askedAt.Sub(registered))
			settle = append(settle, settled.Sub(*askedAt))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: read settle times: %w", RowQuery, err)
	}
	for _, s := range [][]time.Duration{total, asked, settle} {
		slices.Sort(s)
	}
	res.Settled = len(total)
	res.P50, res.P99 = percentile(total, 0.50), percentile(total, 0.99)
	res.Asked50, res.Asked99 = percentile(asked, 0.50), percentile(asked, 0.99)
	res.AskedToSettled50, res.AskedToSettled99 = percentile(settle, 0.50), percentile(settle, 0.99)
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ss_query_log WHERE published = 1").Scan(&res.Published); err != nil {
		return fmt.Errorf("%s: count published answers: %w", RowQuery, err)
	}
	return nil
}

// WriteTable writes the facts, the row, what each figure is, the goal and
// the sanity checks.
func (r QueryResult) WriteTable(w io.Writer) error {
	var b strings.Builder
	tw := tableHead(&b, r.Facts, "row\tregistrations\tregs/s\tqueries\tqueries/s\tp50\tp99\tquerier µs/q\tstmts/q\t"+
		"worker µs/q\tfake+harness µs/q\tdb µs/q\tall stmts/q\t")
	perQ := func(d time.Duration) string { return perUnitText(r.perQuery(d)) }
	allStmts := -1.0
	if r.Statements >= 0 && r.Queries > 0 {
		allStmts = float64(r.Statements) / float64(r.Queries)
	}
	_, _ = fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
		fmt.Sprintf("querier: first wait %s, %d tenants, batched worker", r.Options.FirstWait, r.Options.Tenants),
		r.Registrations, r.Rate, r.Queries, r.QueryRate, latency(r.P50), latency(r.P99),
		perQ(r.QuerierCPU), stmtsText(r.QuerierStatementsPerQuery()), perQ(r.WorkerCPU), perQ(r.HarnessCPU),
		perQ(r.DBCPU), stmtsText(allStmts))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("format table: %w", err)
	}
	b.WriteString("\n")
	fmt.Fprintln(&b, "each registration is a WeChat payment registered through the input topic with no callback; the querier")
	fmt.Fprintln(&b, "(consumer query run, a process of its own) asks the fake WeChat (in the harness: TLS, each request's")
	fmt.Fprintln(&b, "RSA-2048 signature checked, each answer SUCCESS signed RSA-2048) once its first wait is over and publishes")
	fmt.Fprintln(&b, "the answer; the worker (consumer run, batched) records the registration and settles the answer.")
	fmt.Fprintln(&b, "p50/p99: registered_at (the worker recording the registration) -> settled_at (the claim of its payment).")
	fmt.Fprintln(&b, "queries/s: the fake's requests from its first to its last. CPU (/proc utime+stime) from the first")
	fmt.Fprintln(&b, "registration published to the last settled, per query: the querier process's, the worker process's")
	fmt.Fprintln(&b, "(registrations and answers), the harness's (fake WeChat, registration publisher, statement counter), the")
	fmt.Fprintln(&b, "database server's. stmts/q: the querier's own statements (COM_QUERY and COM_STMT_EXECUTE counted on its")
	fmt.Fprintln(&b, "connections, relayed by the harness); all stmts/q: the server's Questions (worker and querier), the")
	fmt.Fprintln(&b, "harness's polls left out.")
	fmt.Fprintf(&b, "  latency split: p50/p99 registered->asked %s/%s, asked->settled %s/%s\n",
		latency(r.Asked50), latency(r.Asked99), latency(r.AskedToSettled50), latency(r.AskedToSettled99))
	fmt.Fprintf(&b, "  RSA-2048, timed in the harness alone just before the row (%d and %d times): a WeChat v3 request "+
		"signature %s CPU, an answer verification %s", signSamples, verifySamples, microText(r.SignCost), microText(r.VerifyCost))
	if q := r.QuerierPerQuery(); q > 0 && r.SignCost > 0 {
		fmt.Fprintf(&b, "; one signature is %.0f%% of the querier's CPU per query (two moments of a shared machine: a ratio, "+
			"not a breakdown)", 100*float64(r.SignCost.Microseconds())/q)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  answers published %d, registrations settled %d of %d, %.2f queries per registration\n",
		r.Published, r.Settled, r.Registrations, float64(r.Queries)/float64(max(1, r.Registrations)))
	if r.Rate < 0.95*r.Options.Rate {
		fmt.Fprintf(&b, "  the publisher reached only %.0f of %.0f registrations/s\n", r.Rate, r.Options.Rate)
	}

	b.WriteString("\ngoals (reported, not asserted):\n")
	want := fmt.Sprintf("<= first wait + %s = %s at %.0f/s", queryLatencySlack, latency(r.Goal()), float64(DefaultQueryRate))
	writeGoal(&b, "p99 registered->settled by query", latency(r.P99),
		r.P99 > 0 && r.P99 <= r.Goal() && r.Options.Rate >= DefaultQueryRate && r.Rate >= 0.95*DefaultQueryRate, want)
	if r.Options.Rate < DefaultQueryRate {
		fmt.Fprintf(&b, "  (the goal is set at %d registrations/s; this row published %.0f/s)\n", DefaultQueryRate, r.Options.Rate)
	}
	goalLine(&b, "querier CPU per query", perUnitText(r.QuerierPerQuery())+" µs", "reported", "")
	goalLine(&b, "querier statements per query", stmtsText(r.QuerierStatementsPerQuery()), "reported", "")
	writeSanity(&b, r.Problems)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// microText is d in µs with one decimal.
func microText(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// WriteBenchfmt writes the row in Go benchmark format, so benchstat can
// compare runs: the iterations are the queries, and the rates, latencies
// and per-query costs are extra units.
func (r QueryResult) WriteBenchfmt(w io.Writer) error {
	if r.Queries == 0 || r.QueryRate == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "BenchmarkE2E/%s %d %.1f ns/op %.0f regs/s %.0f queries/s %.1f p50-ms %.1f p99-ms %.1f querier-us/query",
		RowQuery, r.Queries, 1e9/r.QueryRate, r.Rate, r.QueryRate, ms(r.P50), ms(r.P99), r.QuerierPerQuery())
	if s := r.QuerierStatementsPerQuery(); s >= 0 {
		fmt.Fprintf(&b, " %.3f querier-stmts/query", s)
	}
	fmt.Fprintf(&b, " %.1f worker-us/query %.1f harness-us/query", r.perQuery(r.WorkerCPU), r.perQuery(r.HarnessCPU))
	if d := r.perQuery(r.DBCPU); d >= 0 {
		fmt.Fprintf(&b, " %.1f db-us/query", d)
	}
	fmt.Fprintf(&b, " %.1f sign-us %.1f verify-us\n", float64(r.SignCost)/1e3, float64(r.VerifyCost)/1e3)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write benchmark lines: %w", err)
	}
	return nil
}
