package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/schema"
)

// Options configure a demo run.
type Options struct {
	Seed   uint64
	Trades int
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
	start := time.Now()
	stream := Generate(StreamOptions{Seed: o.Seed, Trades: o.Trades, ReceivedAt: start})

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

	msgs := make([]kafkaops.Message, len(stream.Messages))
	for i, m := range stream.Messages {
		msgs[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
	}
	fmt.Fprintf(o.Out, "demo: %d trades, %d messages (%d distinct money events, retries, concurrent duplicates,\n"+
		"      refunds before payments, %d conflicting and %d malformed) on 12 partitions\n",
		stream.Trades, len(msgs), stream.Events, stream.Conflicts, stream.Malformed)
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
	elapsed := time.Since(start)

	sum, err := summarise(ctx, db, reg, brokers, stream)
	if err != nil {
		return Summary{}, err
	}
	sum.Elapsed = elapsed
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

func summarise(ctx context.Context, db *bun.DB, reg prometheus.Gatherer, brokers []string, stream Stream) (Summary, error) {
	s := Summary{
		Messages: len(stream.Messages), Events: stream.Events,
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
	if claims != stream.Events {
		s.Problems = append(s.Problems, fmt.Sprintf("%d claims for %d distinct events", claims, stream.Events))
	}
	counted := 0
	for _, n := range s.Outcomes {
		counted += n
	}
	if counted != len(stream.Messages) {
		s.Problems = append(s.Problems, fmt.Sprintf("%d messages counted in paycb_events_total, %d consumed", counted, len(stream.Messages)))
	}
	if s.DeadLetters["conflict"] < stream.Conflicts || s.DeadLetters["malformed"] < stream.Malformed {
		s.Problems = append(s.Problems, fmt.Sprintf("dead letters %v, want %d conflict and %d malformed", s.DeadLetters, stream.Conflicts, stream.Malformed))
	}
	for tenant, paid := range stream.Paid {
		want := paid - stream.Refunded[tenant]
		if got := s.Ledger.Tenants[tenant].MerchantPayableNet; got != want {
			s.Problems = append(s.Problems, fmt.Sprintf("tenant %d: merchant_payable net credit %d fen, channels reported %d", tenant, got, want))
		}
	}
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
