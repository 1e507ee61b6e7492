package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/paycallback/paycallback/internal/bench"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels" // the channels this binary understands
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "paycb-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	fs := flag.NewFlagSet("paycb-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	fs.IntVar(&o.Trades, "trades", bench.DefaultTrades, "trades in the main stream (about 4 messages each)")
	seed := fs.Uint64("seed", 1, "stream seed")
	fs.IntVar(&o.BatchMax, "batch-max", bench.DefaultBatchMax, "PAYCB_BATCH_MAX of the batched rows")
	fs.IntVar(&o.StorageBatch, "storage-batch", bench.DefaultStorageBatch, "events per transaction of the raw rows and the rule floor")
	fs.IntVar(&o.EventFloorEvents, "event-floor", bench.DefaultEventFloorEvents,
		"events, from the stream's start, the per-event floor writes one at a time (the whole stream when it has fewer)")
	fs.IntVar(&o.OutboxPairs, "outbox-pairs", bench.DefaultOutboxPairs,
		"how many times the batched backlog runs with settled events on and off; the outbox's cost is the median of their ratios")
	fs.BoolVar(&o.OutboxOnly, "outbox-only", false,
		"run only the outbox's rows: the batched backlog on/off pairs and the paced batched row of one process")
	fs.Float64Var(&o.PacedRate, "rate", bench.DefaultPacedRate, "publish rate of the latency rows, distinct events/s")
	fs.DurationVar(&o.PacedDuration, "paced", bench.DefaultPacedDuration, "how long each latency row publishes")
	fs.StringVar(&o.ProfileDir, "profile", "", "directory that receives the worker's CPU profile of each paced row (ROW.pprof)")
	fs.StringVar(&o.RepoDir, "repo", "", "module root the consumer and the broker are built from (default: this repository); "+
		"another checkout measures its worker with this harness, for a before/after comparison")
	fs.StringVar(&o.BinDir, "bin", "", "where to build consumer and kfake-broker (default <repo>/bin)")
	backlog := fs.Int("backlog", 0, "measure only the worker over a backlog of this many messages "+
		"(at least; e.g. 1000000), with --batch-max, instead of the full benchmark")
	out := fs.String("out", "bench/results/e2e.txt", "file the table is written to (empty: none; "+
		"bench/results/backlog.txt by default with --backlog)")
	fs.Func("consumer-env", "KEY=VALUE given to every consumer process after the harness's settings (repeatable; "+
		"e.g. GOMAXPROCS=1 or PAYCB_MERGE_WAIT=5ms): a tuning measured, named in the table's facts", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		o.ConsumerEnv = append(o.ConsumerEnv, v)
		return nil
	})
	query := fs.Bool("query", false, "measure only the active query's row: payments registered with no callback, "+
		"asked by a querier process of a fake WeChat and settled by the worker (bench/results/query.txt by default)")
	var qo bench.QueryOptions
	fs.Float64Var(&qo.Rate, "query-rate", bench.DefaultQueryRate, "with --query: registrations published per second")
	fs.DurationVar(&qo.Duration, "query-duration", bench.DefaultQueryDuration, "with --query: how long registrations are published")
	fs.DurationVar(&qo.FirstWait, "query-first-wait", bench.DefaultQueryFirstWait, "with --query: the querier's PAYCB_QUERY_FIRST_WAIT")
	fs.IntVar(&qo.Tenants, "query-tenants", bench.DefaultQueryTenants,
		"with --query: tenants the registrations are spread over, each a query budget of its own (5/s, bursts of 10)")
	fs.DurationVar(&qo.Interval, "query-interval", bench.DefaultQueryInterval, "with --query: the querier's --interval")
	fs.IntVar(&qo.Batch, "query-batch", bench.DefaultQueryBatch, "with --query: the querier's --batch")
	fs.IntVar(&qo.Parallel, "query-parallel", bench.DefaultQueryParallel, "with --query: the querier's --parallel")
	verbose := fs.Bool("v", false, "log progress")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *backlog < 0 {
		return fmt.Errorf("--backlog: want a positive number of messages, got %d", *backlog)
	}
	outSet := false
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if *backlog > 0 && *query {
		return errors.New("--backlog and --query each measure one thing alone: give one of them")
	}
	switch {
	case outSet:
	case *backlog > 0:
		*out = "bench/results/backlog.txt"
	case *query:
		*out = "bench/results/query.txt"
	}
	o.Seed = *seed
	o.ServerDSN = bench.DefaultServerDSN
	for _, name := range []string{"PAYCB_BENCH_DSN", "TEST_MYSQL_DSN"} {
		if v, ok := lookup(name); ok && v != "" {
			o.ServerDSN = v
			break
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var (
		res      report
		problems int
	)
	switch {
	case *backlog > 0:
		r, err := bench.RunBacklog(ctx, o, *backlog)
		if err != nil {
			return err
		}
		res, problems = r, len(r.Problems)
	case *query:
		r, err := bench.RunQuery(ctx, o, qo)
		if err != nil {
			return err
		}
		res, problems = r, len(r.Problems)
	default:
		r, err := bench.Run(ctx, o)
		if err != nil {
			return err
		}
		res, problems = r, len(r.Problems)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		return err
	}
	if _, err := stdout.Write(table.Bytes()); err != nil {
		return fmt.Errorf("print table: %w", err)
	}
	if *out != "" {
		table.WriteString("\n")
		if err := res.WriteBenchfmt(&table); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*out), 0o750); err != nil {
			return fmt.Errorf("results directory: %w", err)
		}
		if err := os.WriteFile(*out, table.Bytes(), 0o644); err != nil { //nolint:gosec // results are for everyone to read
			return fmt.Errorf("write results: %w", err)
		}
	}
	if problems > 0 {
		return fmt.Errorf("%d sanity checks failed", problems)
	}
	return nil
}

// report is what any measurement returns: bench.Result,
// bench.BacklogResult or bench.QueryResult.
type report interface {
	WriteTable(io.Writer) error
	WriteBenchfmt(io.Writer) error
}
