package demo

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/internal/querybudget"
	"github.com/paycallback/paycallback/internal/queryclient"
	"github.com/paycallback/paycallback/internal/querycreds"
	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/internal/querywork"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/internal/watchfile"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// The demo's barcode payments (付款码, trade_type MICROPAY): WeChat never
// notifies them, so the demo registers each one, sends no callback, and
// the querier, run in-process exactly as `consumer query run` wires it,
// asks a fake WeChat (TLS, answers signed with a test platform key) until
// the answer proves the payment; the worker verifies that answer with the
// channel's public key and settles it through the claim, with source
// query.

// barcodeTenant is the tenant of the demo's barcode payments: one shop's
// POS, the fake WeChat's one test merchant.
const barcodeTenant = 1001

// Demo timings. The first wait and the later asks are seconds rather than
// the production schedule's minutes (docs/querier.md), so that the demo
// settles its barcode payments within seconds.
const (
	barcodeFirstWait = 500 * time.Millisecond
	queryInterval    = 200 * time.Millisecond
	// barcodeDeadline bounds the wait for every barcode payment to settle;
	// one that has not by then is reported in Summary.Problems.
	barcodeDeadline = 60 * time.Second
)

// barcodePolicy is the querier's schedule in the demo: the default
// schedule with the first wait and the later asks of a payment in seconds.
func barcodePolicy() queryplan.Policy {
	p := queryplan.DefaultPolicy()
	p.FirstWait = barcodeFirstWait
	p.PaymentOffsets = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	p.PaymentRepeat = 5 * time.Second
	p.RetryMin, p.RetryMax = 200*time.Millisecond, 2*time.Second
	return p
}

// barcodePayments are the demo's barcode payments and what the fake
// WeChat answers about each.
type barcodePayments struct {
	trades []sample.Trade
	steps  [][]fakechannel.Step
	// pending is how many first answers are "not yet paid".
	pending int
}

// total is what the barcode payments pay, in fen.
func (b barcodePayments) total() int64 {
	var sum int64
	for _, t := range b.trades {
		sum += t.Total
	}
	return sum
}

// generateBarcode builds n barcode payments of barcodeTenant numbered
// after the stream's trades (and its conflicting one), so that no number
// is shared. About two in three are not paid when first asked: the
// customer is still entering the password (USERPAYING) or the order is
// not paid yet (NOTPAY); the next answer is SUCCESS, a MICROPAY trade.
func generateBarcode(seed uint64, trades, n int) barcodePayments {
	rng := mrand.New(mrand.NewPCG(seed^0xba4c0de, seed))
	var b barcodePayments
	micropay := fakechannel.Step{TradeType: "MICROPAY"}
	for j := range n {
		t := sample.NewTrade(channels.WeChat, int(seed%1000)*100000+trades+2+j)
		t.TenantID = barcodeTenant
		t.Total = 100 + rng.Int64N(29900) // 1.00 to 299.99 yuan at a till
		var steps []fakechannel.Step
		switch j % 3 {
		case 1:
			steps = append(steps, fakechannel.Step{Answer: fakechannel.Pending, State: "USERPAYING"})
			b.pending++
		case 2:
			steps = append(steps, fakechannel.Step{Answer: fakechannel.Pending})
			b.pending++
		}
		b.trades = append(b.trades, t)
		b.steps = append(b.steps, append(steps, micropay))
	}
	return b
}

// registrations are the payment registrations of b, created at createdAt,
// as the till's service publishes them before it asks WeChat for the
// payment (content type channels.ContentTypeRegistration), keyed like
// consumer payment register's order: CHANNEL:merchant order number.
func (b barcodePayments) registrations(createdAt time.Time) ([]kafkaops.Message, error) {
	msgs := make([]kafkaops.Message, 0, len(b.trades))
	for _, t := range b.trades {
		v, err := channels.RegistrationEnvelope(t.TenantID, t.Channel, createdAt, channels.RegistrationMessage{
			Kind: channels.RegistrationPayment, MerchantID: fakechannel.WeChatMerchantID, MerchantOrderNo: t.MerchantOrderNo,
			Amount: t.Total, Currency: channels.CurrencyCNY, CreatedAt: createdAt, ExpiresAt: createdAt.Add(5 * time.Minute),
		})
		if err != nil {
			return nil, fmt.Errorf("barcode payment %s: registration: %w", t.MerchantOrderNo, err)
		}
		msgs = append(msgs, kafkaops.Message{Key: []byte(string(t.Channel) + ":" + t.MerchantOrderNo), Value: v})
	}
	return msgs, nil
}

// demoFiles are the files of the demo's deployment: the worker's (the
// statement key, the channels' public keys) and, in a directory of its
// own, the querier's credentials, which the worker's configuration never
// names.
type demoFiles struct {
	statementKeys  string
	channelKeys    string
	queryCreds     string
	workerDir, qry string
}

// writeFiles writes dir's files for the fake WeChat's keys: a fresh
// statement key, the platform public key, the merchant's API key.
func writeFiles(dir string, keys *fakechannel.Keys) (demoFiles, error) {
	f := demoFiles{workerDir: filepath.Join(dir, "worker"), qry: filepath.Join(dir, "querier")}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return f, fmt.Errorf("demo statement key: %w", err)
	}
	files := []struct{ dir, name, content string }{
		{f.workerDir, "statement_keys", "demo=" + hex.EncodeToString(secret) + "\n"},
		{f.workerDir, "wechatpay_pub.pem", string(fakechannel.PublicKeyPEM(&keys.Platform.PublicKey))},
		{f.workerDir, "channel_keys.yaml", fmt.Sprintf("- {channel: WECHAT, merchant_id: %q, key_id: %q, public_key_file: wechatpay_pub.pem}\n",
			fakechannel.WeChatMerchantID, fakechannel.WeChatPlatformKeyID)},
		{f.qry, "wechat_apiclient_key.pem", string(fakechannel.PrivateKeyPEM(keys.Merchant))},
		{f.qry, "credentials.yaml", fmt.Sprintf("- {tenant_id: %d, channel: WECHAT, merchant_id: %q, serial_no: %q, private_key_file: wechat_apiclient_key.pem}\n",
			barcodeTenant, fakechannel.WeChatMerchantID, fakechannel.WeChatSerialNo)},
	}
	for _, d := range []string{f.workerDir, f.qry} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return f, fmt.Errorf("demo files: %w", err)
		}
	}
	for _, w := range files {
		if err := os.WriteFile(filepath.Join(w.dir, w.name), []byte(w.content), 0o600); err != nil {
			return f, fmt.Errorf("demo files: %w", err)
		}
	}
	f.statementKeys = filepath.Join(f.workerDir, "statement_keys")
	f.channelKeys = filepath.Join(f.workerDir, "channel_keys.yaml")
	f.queryCreds = filepath.Join(f.qry, "credentials.yaml")
	return f, nil
}

// querierConfig is the querier's own configuration, apart from the
// worker's: its credentials file, the fake WeChat's URL, the statement
// key and public keys files it shares with the worker, the demo's first
// wait.
func querierConfig(files demoFiles, wechatURL string) config.Config {
	cfg := config.Default()
	cfg.Query.CredentialsFile = files.queryCreds
	cfg.Query.WeChatURL = wechatURL
	cfg.Query.FirstWait = barcodeFirstWait
	cfg.Statement.KeyFile = files.statementKeys
	cfg.Worker.ChannelPublicKeysFile = files.channelKeys
	return cfg
}

// runningQuerier is the in-process querier.
type runningQuerier struct {
	db        *bun.DB
	published atomic.Int64
	cancel    context.CancelFunc
	done      sync.WaitGroup
	stopOnce  sync.Once
	stopErr   error
}

// startQuerier wires a querier from cfg as `consumer query run` does —
// its credentials (querycreds), the statement key that signs what it
// publishes, the channels' public keys it reads answers with, the query
// client trusting the fake's certificate, the work store and the budget
// on a database handle of its own — and runs a round every
// queryInterval until stop. Each published answer is counted.
func startQuerier(ctx context.Context, cfg config.Config, dbPath string, caCert *x509.Certificate, brokers []string, log *slog.Logger) (*runningQuerier, error) {
	creds, err := querycreds.Open(cfg.Query.CredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("demo querier: credentials: %w", err)
	}
	stmtKeys, err := watchfile.Load(cfg.Statement.KeyFile, statementauth.Parse)
	if err != nil {
		return nil, fmt.Errorf("demo querier: statement keys: %w", err)
	}
	pubKeys, err := channelkeys.Load(cfg.Worker.ChannelPublicKeysFile)
	if err != nil {
		return nil, fmt.Errorf("demo querier: channel public keys: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	client, err := queryclient.New(queryclient.Config{BaseURLs: cfg.Query.BaseURLs(), RootCAs: roots}, creds)
	if err != nil {
		return nil, fmt.Errorf("demo querier: %w", err)
	}
	policy := barcodePolicy()
	policy.FirstWait = cfg.Query.FirstWait

	db, err := sqldb.OpenSQLite(dbPath)
	if err != nil {
		return nil, fmt.Errorf("demo querier: %w", err)
	}
	r := &runningQuerier{db: db}
	fail := func(err error) (*runningQuerier, error) {
		_ = db.Close()
		return nil, fmt.Errorf("demo querier: %w", err)
	}
	qm, err := metrics.NewQueryMetrics(prometheus.NewRegistry())
	if err != nil {
		return fail(err)
	}
	budget, err := querybudget.New(db, queryplan.DefaultBudget())
	if err != nil {
		return fail(err)
	}
	backstop, err := settlement.New(db, idempotent.NewStore(db), log, nil)
	if err != nil {
		return fail(err)
	}
	pub := querier.TopicPublisher{
		Produce: func(ctx context.Context, msgs []kafkaops.Message) error {
			if err := kafkaops.Produce(ctx, brokers, topic, msgs); err != nil {
				return err
			}
			r.published.Add(int64(len(msgs)))
			return nil
		},
		Keys:    stmtKeys.Current,
		Headers: querier.SpecHeaders,
	}
	q, err := querier.New(querier.Config{Owner: "demo-querier", Policy: policy, Lease: time.Minute, Batch: 100, Parallel: 8},
		querywork.New(db, policy, backstop), client, querier.SpecReader{Keys: pubKeys.Current}, pub, budget, qm, log)
	if err != nil {
		return fail(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.done.Go(func() {
		t := time.NewTicker(queryInterval)
		defer t.Stop()
		for {
			if _, err := q.Round(runCtx); err != nil && runCtx.Err() == nil {
				log.Warn("demo query round failed; the next round tries again", "error", err)
			}
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	})
	return r, nil
}

// stop ends the rounds, waits for the one in flight and closes the
// querier's database handle.
// Only the first call acts; later ones return its result.
func (r *runningQuerier) stop() error {
	r.stopOnce.Do(func() {
		r.cancel()
		r.done.Wait()
		if err := r.db.Close(); err != nil {
			r.stopErr = fmt.Errorf("demo querier: close database: %w", err)
		}
	})
	return r.stopErr
}

// waitBarcodeSettled waits until every barcode payment's registration is
// SUCCEEDED, or ctx ends (its error is then returned: what is missing is
// for the checks to report).
func waitBarcodeSettled(ctx context.Context, svc *settlement.Service, b barcodePayments) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		open := 0
		for _, tr := range b.trades {
			reg, err := svc.GetPaymentRegistration(ctx, tr.TenantID, tr.Channel, tr.MerchantOrderNo)
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("barcode payments not all settled: %w", ctx.Err())
			}
			if err != nil && !errors.Is(err, settlement.ErrPaymentRegistrationNotFound) {
				return err
			}
			if err != nil || reg.Status != settlement.RegistrationSucceeded {
				open++
			}
		}
		if open == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d barcode payments not settled: %w", open, len(b.trades), ctx.Err())
		case <-t.C:
		}
	}
}

// BarcodeReport is what became of the demo's barcode payments.
type BarcodeReport struct {
	// Registered is how many barcode payments were registered without a
	// callback.
	Registered int
	// Recovered is how many of them the worker settled from the querier's
	// answer (settled event source query), posted once, their registration
	// SUCCEEDED.
	Recovered int
	// Queries is how many queries the fake WeChat received, NotYet how
	// many of them it answered "not paid yet" (NOTPAY, USERPAYING).
	Queries, NotYet int
	// Published is how many answers the querier published for the worker.
	Published int
}

// checkBarcode reports what became of b and the problems found: a
// payment not settled, posted more than once, settled from another source
// than the query, or whose registration is not SUCCEEDED.
func checkBarcode(ctx context.Context, db *bun.DB, b barcodePayments) (BarcodeReport, []string, error) {
	rep := BarcodeReport{Registered: len(b.trades)}
	svc, err := settlement.New(db, idempotent.NewStore(db), nil, nil)
	if err != nil {
		return rep, nil, fmt.Errorf("barcode checks: %w", err)
	}
	var problems []string
	for _, t := range b.trades {
		what := fmt.Sprintf("barcode payment %s (trade %s)", t.MerchantOrderNo, t.TradeNo)
		ok := true
		reg, err := svc.GetPaymentRegistration(ctx, t.TenantID, t.Channel, t.MerchantOrderNo)
		switch {
		case errors.Is(err, settlement.ErrPaymentRegistrationNotFound):
			problems = append(problems, what+": not registered")
			ok = false
		case err != nil:
			return rep, nil, fmt.Errorf("barcode checks: %w", err)
		case reg.Status != settlement.RegistrationSucceeded:
			problems = append(problems, fmt.Sprintf("%s: registration %s, not SUCCEEDED", what, reg.Status))
			ok = false
		}
		entries, err := db.NewSelect().Table("ss_ledger_entry").Where("tenant_id = ?", t.TenantID).
			Where("channel_trade_no = ?", t.TradeNo).Count(ctx)
		if err != nil {
			return rep, nil, fmt.Errorf("barcode checks: count ledger rows of %s: %w", t.TradeNo, err)
		}
		switch {
		case entries == 0:
			problems = append(problems, what+": not settled (no ledger rows)")
			ok = false
		case entries != 2:
			problems = append(problems, fmt.Sprintf("%s: %d ledger rows, want 2 (one debit, one credit: posted once)", what, entries))
			ok = false
		}
		var sources []string
		if err := db.NewSelect().Table("ss_settled_outbox").Column("source").Where("tenant_id = ?", t.TenantID).
			Where("channel_trade_no = ?", t.TradeNo).Scan(ctx, &sources); err != nil {
			return rep, nil, fmt.Errorf("barcode checks: settled events of %s: %w", t.TradeNo, err)
		}
		if entries > 0 && (len(sources) != 1 || sources[0] != string(settled.SourceQuery)) {
			problems = append(problems, fmt.Sprintf("%s: settled events from %v, want one from the query", what, sources))
			ok = false
		}
		if ok {
			rep.Recovered++
		}
	}
	return rep, problems, nil
}
