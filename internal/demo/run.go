package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/schema"
)

// Options configure a demo run.
type Options struct {
	Seed   uint64
	Trades int
	// Barcode is how many WeChat barcode payments (付款码, MICROPAY) are
	// registered and never called back, for the querier to recover;
	// default Trades/25, at least 1.
	Barcode int
	// DBPath is the SQLite file; default a file in a temporary directory
	// that is removed afterwards.
	DBPath string
	// AdminAddr serves /metrics while the demo runs (default 127.0.0.1:0).
	AdminAddr string
	// Keep keeps the worker and /metrics running after the summary until ctx
	// ends.
	Keep bool
	// Out receives progress and the summary.
	Out io.Writer
	// Logger receives the worker's logs (default: warnings to stderr).
	Logger *slog.Logger
}

// Summary is what the demo found after the stream was consumed.
type Summary struct {
	Messages    int
	Events      int
	Outcomes    map[string]int // paycb_events_total by outcome
	Claims      map[string]int // claims by status/outcome
	Orders      map[string]int // orders by status
	DeadLetters map[string]int // dead letters by x-error-kind
	Ledger      settlement.LedgerTotals
	Reconcile   settlement.ReconcileReport // consumer reconcile's checks on the demo's database
	Barcode     BarcodeReport              // the barcode payments the querier recovered
	Elapsed     time.Duration
	Problems    []string
}

// OK reports whether every invariant held.
func (s Summary) OK() bool { return len(s.Problems) == 0 }

const (
	topic = "channel-events"
	group = "settlement-consumer"
)

// Run generates a stream, starts an in-process Kafka and the embedded
// database, runs the worker through app.Main exactly as `consumer run` does,
// waits until every message is committed, and checks the invariants. An
// error means the demo could not run; failed invariants are in
// Summary.Problems.
func Run(ctx context.Context, o Options) (Summary, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:0"
	}
	if o.Barcode <= 0 {
		o.Barcode = max(o.Trades/25, 1)
	}
	start := time.Now()
	stream := Generate(StreamOptions{Seed: o.Seed, Trades: o.Trades, ReceivedAt: start})
	barcode := generateBarcode(o.Seed, stream.Trades, o.Barcode)
	registrations, err := barcode.registrations(start)
	if err != nil {
		return Summary{}, err
	}

	// The fake WeChat the querier asks about the barcode payments, and the
	// files of the demo's deployment.
	wx, err := fakechannel.NewWeChat(fakechannel.Options{})
	if err != nil {
		return Summary{}, fmt.Errorf("fake WeChat: %w", err)
	}
	defer wx.Close()
	for i, t := range barcode.trades {
		wx.Script(t, barcode.steps[i]...)
	}
	filesDir, err := os.MkdirTemp("", "paycb-demo-files-")
	if err != nil {
		return Summary{}, fmt.Errorf("demo files directory: %w", err)
	}
	defer os.RemoveAll(filesDir)
	files, err := writeFiles(filesDir, wx.Keys())
	if err != nil {
		return Summary{}, err
	}

	cluster, brokers, err := inprocess.Start(map[string]int32{topic: 12, topic + ".dlq": 1, topic + ".settled": 1})
	if err != nil {
		return Summary{}, err
	}
	defer cluster.Close()

	dbPath := o.DBPath
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "paycb-demo-")
		if err != nil {
			return Summary{}, fmt.Errorf("demo database directory: %w", err)
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "demo.db")
	}
	db, err := sqldb.OpenSQLite(dbPath)
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()
	if _, err := schema.Migrate(ctx, db); err != nil {
		return Summary{}, err
	}

	// The barcode payments are registered first, as the till's service
	// does before it asks WeChat; no callback follows them.
	msgs := make([]kafkaops.Message, 0, len(registrations)+len(stream.Messages))
	msgs = append(msgs, registrations...)
	for _, m := range stream.Messages {
		msgs = append(msgs, kafkaops.Message{Key: m.Key, Value: m.Value})
	}
	fmt.Fprintf(o.Out, "demo: %d trades, %d messages (%d distinct money events, retries, concurrent duplicates,\n"+
		"      refunds before payments, %d conflicting and %d malformed) on 12 partitions\n",
		stream.Trades, len(stream.Messages), stream.Events, stream.Conflicts, stream.Malformed)
	fmt.Fprintf(o.Out, "demo: %d WeChat barcode payments (付款码, MICROPAY) registered and never called back;\n"+
		"      an in-process querier asks a fake WeChat after %s (%d not paid yet at first)\n",
		len(barcode.trades), barcodeFirstWait, barcode.pending)
	if err := kafkaops.Produce(ctx, brokers, topic, msgs); err != nil {
		return Summary{}, err
	}

	cfg := config.Default()
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.Topic = topic
	cfg.Kafka.Group = group
	cfg.Kafka.SessionTimeout = 6 * time.Second
	cfg.Kafka.HeartbeatInterval = 500 * time.Millisecond
	cfg.Admin.Addr = o.AdminAddr
	cfg.WeChat.APIv3Key = config.Secret(sample.APIv3Key) // the demo's fake key
	// The worker authenticates the querier's answers twice: the statement
	// key signs the message, the fake WeChat's platform key the answer.
	// The querier's credentials are not the worker's to read.
	cfg.Statement.KeyFile = files.statementKeys
	cfg.Worker.ChannelPublicKeysFile = files.channelKeys
	cfg.Worker.SweepInterval = time.Second
	cfg.Finalize()
	if err := cfg.Validate(app.FileChecks()); err != nil {
		return Summary{}, err
	}
	reg := metrics.NewRegistry()
	m := &app.Main{Config: cfg, DB: db, Logger: o.Logger, Registry: reg}
	if err := m.Start(ctx); err != nil {
		return Summary{}, fmt.Errorf("worker stopped at start: %w", err)
	}
	defer func() { _ = m.Close() }() // on the early returns; the end checks Close's result
	if a := m.Admin(); a != nil && a.Addr() != nil {
		fmt.Fprintf(o.Out, "demo: metrics on http://%s/metrics\n", a.Addr())
	}
	q, err := startQuerier(ctx, querierConfig(files, wx.URL()), dbPath, wx.Certificate(), brokers, o.Logger)
	if err != nil {
		return Summary{}, err
	}
	defer func() { _ = q.stop() }() // on the early returns; stopped below before the summary

	waitCtx, cancelWait := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelWait()
	last, printed := time.Time{}, int64(-1)
	progress := func(committed int64) {
		fmt.Fprintf(o.Out, "demo: %5d of %d messages committed\n", committed, len(msgs))
		last, printed = time.Now(), committed
	}
	err = kafkaops.WaitConsumed(waitCtx, brokers, group, topic, 200*time.Millisecond, func(ps []kafkaops.PartitionProgress) {
		if time.Since(last) < time.Second {
			return
		}
		progress(int64(len(msgs)) - kafkaops.TotalLag(ps))
	})
	if err != nil {
		return Summary{}, err
	}
	if printed != int64(len(msgs)) {
		// A run shorter than the progress interval printed only its start:
		// the last line says where it ended.
		progress(int64(len(msgs)))
	}

	// The barcode payments settle once the querier's answers are
	// consumed; then the querier stops, and what it published last is
	// consumed too.
	svc, err := settlement.New(db, idempotent.NewStore(db), nil, nil)
	if err != nil {
		return Summary{}, err
	}
	barcodeCtx, cancelBarcode := context.WithTimeout(ctx, barcodeDeadline)
	err = waitBarcodeSettled(barcodeCtx, svc, barcode)
	cancelBarcode()
	if err != nil && ctx.Err() != nil {
		return Summary{}, err
	}
	settledErr := err
	if err := q.stop(); err != nil {
		return Summary{}, err
	}
	published := int(q.published.Load())
	if err := kafkaops.WaitConsumed(waitCtx, brokers, group, topic, 100*time.Millisecond, func([]kafkaops.PartitionProgress) {}); err != nil {
		return Summary{}, err
	}
	if settledErr != nil {
		fmt.Fprintf(o.Out, "demo: %v (waited %s)\n", settledErr, barcodeDeadline) // the checks say which
	} else {
		fmt.Fprintf(o.Out, "demo: %d barcode payments settled from %d query answers the querier published\n", len(barcode.trades), published)
	}
	elapsed := time.Since(start)

	sum, err := summarise(ctx, db, reg, brokers, stream, barcode, len(registrations)+published)
	if err != nil {
		return Summary{}, err
	}
	sum.Elapsed = elapsed
	sum.Barcode.Published = published
	for _, r := range wx.Requests() {
		sum.Barcode.Queries++
		if r.Step.Answer == fakechannel.Pending {
			sum.Barcode.NotYet++
		}
	}
	printSummary(o.Out, sum)

	if o.Keep {
		fmt.Fprintln(o.Out, "demo: --keep: the worker keeps serving /metrics; interrupt to stop")
		<-ctx.Done()
	}
	if err := m.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return sum, fmt.Errorf("worker: %w", err)
	}
	return sum, nil
}

// summarise reads what the run left and checks the invariants: the
// stream's, and the barcode payments' (extra is the messages besides the
// stream's: their registrations and the querier's answers).
func summarise(ctx context.Context, db *bun.DB, reg prometheus.Gatherer, brokers []string, stream Stream, barcode barcodePayments, extra int) (Summary, error) {
	s := Summary{
		Messages: len(stream.Messages) + extra, Events: stream.Events + len(barcode.trades),
		Outcomes: map[string]int{}, Claims: map[string]int{}, Orders: map[string]int{}, DeadLetters: map[string]int{},
	}
	mfs, err := reg.Gather()
	if err != nil {
		return s, fmt.Errorf("gather metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if v := int(mt.GetCounter().GetValue()); v > 0 {
				s.Outcomes[label(mt, "outcome")] += v
			}
		}
	}
	if err := countBy(ctx, db, "ss_channel_idempotent", "status || '/' || COALESCE(settle_outcome, '-')", s.Claims); err != nil {
		return s, err
	}
	if err := countBy(ctx, db, "ss_channel_order", "status", s.Orders); err != nil {
		return s, err
	}
	dl, err := kafkaops.ReadAll(ctx, brokers, topic+".dlq")
	if err != nil {
		return s, err
	}
	for _, m := range dl {
		for _, h := range m.Headers {
			if h.Key == deadletters.HeaderErrorKind {
				s.DeadLetters[string(h.Value)]++
			}
		}
	}
	if s.Ledger, err = settlement.Totals(ctx, db); err != nil {
		return s, err
	}
	if s.Reconcile, err = settlement.Reconcile(ctx, db, settlement.ReconcileOptions{}); err != nil {
		return s, err
	}

	// The invariants.
	for _, d := range s.Reconcile.Discrepancies {
		s.Problems = append(s.Problems, d.String())
	}
	claims := 0
	for k, n := range s.Claims {
		claims += n
		if strings.HasPrefix(k, "ACQUIRED") {
			s.Problems = append(s.Problems, fmt.Sprintf("%d claims left ACQUIRED", n))
		}
	}
	if claims != s.Events {
		s.Problems = append(s.Problems, fmt.Sprintf("%d claims for %d distinct events", claims, s.Events))
	}
	counted := 0
	for _, n := range s.Outcomes {
		counted += n
	}
	if counted != s.Messages {
		s.Problems = append(s.Problems, fmt.Sprintf("%d messages counted in paycb_events_total, %d consumed", counted, s.Messages))
	}
	if s.DeadLetters["conflict"] < stream.Conflicts || s.DeadLetters["malformed"] < stream.Malformed {
		s.Problems = append(s.Problems, fmt.Sprintf("dead letters %v, want %d conflict and %d malformed", s.DeadLetters, stream.Conflicts, stream.Malformed))
	}
	paidBy := maps.Clone(stream.Paid)
	paidBy[barcodeTenant] += barcode.total()
	for tenant, paid := range paidBy {
		want := paid - stream.Refunded[tenant]
		if got := s.Ledger.Tenants[tenant].MerchantPayableNet; got != want {
			s.Problems = append(s.Problems, fmt.Sprintf("tenant %d: merchant_payable net credit %d fen, channels reported %d", tenant, got, want))
		}
	}
	var problems []string
	if s.Barcode, problems, err = checkBarcode(ctx, db, barcode); err != nil {
		return s, err
	}
	s.Problems = append(s.Problems, problems...)
	return s, nil
}

func countBy(ctx context.Context, db bun.IDB, table, expr string, into map[string]int) error {
	var rows []struct {
		K string `bun:"k"`
		N int    `bun:"n"`
	}
	if err := db.NewSelect().Table(table).ColumnExpr(expr+" AS k").ColumnExpr("COUNT(*) AS n").
		GroupExpr(expr).Scan(ctx, &rows); err != nil {
		return fmt.Errorf("count %s: %w", table, err)
	}
	for _, r := range rows {
		into[r.K] = r.N
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func printSummary(w io.Writer, s Summary) {
	fmt.Fprintf(w, "\n== summary (%s) ==\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "messages consumed: %d   distinct money events: %d\n", s.Messages, s.Events)
	printMap(w, "events by outcome", s.Outcomes)
	printMap(w, "claims by status/outcome", s.Claims)
	printMap(w, "orders by status", s.Orders)
	printMap(w, "dead letters by kind", s.DeadLetters)
	fmt.Fprintf(w, "recovered by query: %d of %d barcode payments registered without a callback (%d queries, %d answered not yet paid)\n",
		s.Barcode.Recovered, s.Barcode.Registered, s.Barcode.Queries, s.Barcode.NotYet)
	fmt.Fprintf(w, "ledger: %d rows, debits %s, credits %s\n", s.Ledger.Entries, yuan(s.Ledger.Debits), yuan(s.Ledger.Credits))
	fmt.Fprintf(w, "reconcile: %d checks, %d discrepancies\n", len(s.Reconcile.Checks), len(s.Reconcile.Discrepancies))
	tenants := make([]int64, 0, len(s.Ledger.Tenants))
	for t := range s.Ledger.Tenants {
		tenants = append(tenants, t)
	}
	sort.Slice(tenants, func(i, j int) bool { return tenants[i] < tenants[j] })
	for _, t := range tenants {
		tt := s.Ledger.Tenants[t]
		balanced := "balances"
		if tt.MerchantPayableNet != tt.Paid-tt.Refunded {
			balanced = "DOES NOT BALANCE"
		}
		fmt.Fprintf(w, "  tenant %d: %d orders, paid %s, refunded %s, merchant_payable net %s: %s\n",
			t, tt.Orders, yuan(tt.Paid), yuan(tt.Refunded), yuan(tt.MerchantPayableNet), balanced)
	}
	if s.OK() {
		fmt.Fprintln(w, "invariants: all hold (every event posted exactly once, every posting balanced)")
		return
	}
	fmt.Fprintln(w, "invariants FAILED:")
	for _, p := range s.Problems {
		fmt.Fprintln(w, "  -", p)
	}
}

func printMap(w io.Writer, title string, m map[string]int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	fmt.Fprintf(w, "%s: %s\n", title, strings.Join(parts, " "))
}

func yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s¥%d.%02d", sign, fen/100, fen%100)
}
