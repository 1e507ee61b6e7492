package bench_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/bench"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// TestRunTiny runs the whole harness at a tiny size: real builds, a kfake
// broker process, MariaDB, every row. It checks that the table has every row
// with positive figures and that the ledger checks held, not how fast
// anything was.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and runs subprocesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, bench.Options{
		Trades:        30,
		OutboxPairs:   2,
		ServerDSN:     sqldbtest.ServerDSN(),
		BinDir:        t.TempDir(),
		PacedRate:     200,
		PacedDuration: 500 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	assert.Empty(t, res.Problems, "sanity checks")

	pipelines := map[string]bool{
		bench.RowPerMessage: true, bench.RowBatched: true, bench.RowBatchedOff: true, bench.RowReplay: true,
		bench.RowPacedBatched: true, bench.RowPacedBatched2: true, bench.RowPacedPerMessage: true,
	}
	paced := map[string]bool{bench.RowPacedBatched: true, bench.RowPacedBatched2: true, bench.RowPacedPerMessage: true}
	storage := map[string]bool{bench.RowRaw: true, bench.RowFloor: true, bench.RowEventFloor: true}
	keys := []string{
		bench.RowTransport, bench.RowRaw, bench.RowFloor, bench.RowEventFloor, bench.RowPerMessage, bench.RowBatched,
		bench.RowBatchedOff, bench.RowReplay,
		bench.RowPacedRead, bench.RowPacedBatched, bench.RowPacedBatched2, bench.RowPacedPerMessage,
	}
	require.Len(t, res.Rows, len(keys))
	events := res.Rows[0].Events
	for i, key := range keys {
		row := res.Rows[i]
		assert.Equal(t, key, row.Key, "row %d", i)
		assert.Positive(t, row.Events, "%s events", key)
		assert.Positive(t, row.Elapsed, "%s elapsed", key)
		assert.Positive(t, row.EventRate, "%s events/s", key)
		assert.InDelta(t, float64(row.Events)/row.Elapsed.Seconds(), row.EventRate, row.EventRate/1000, "%s events/s", key)
		// CPU is read in 10ms ticks: a tiny row's may round to zero, a
		// pipeline's (a process started and run) never does.
		assert.GreaterOrEqual(t, row.WorkerCPU, time.Duration(0), "%s worker CPU", key)
		if storage[key] {
			assert.Zero(t, row.Messages, "%s reads no messages", key)
			assert.Equal(t, events, row.Events, "%s writes every distinct event", key)
		} else {
			assert.Greater(t, row.Messages, row.Events, "%s: more messages than distinct events", key)
			assert.Positive(t, row.Rate, "%s msgs/s", key)
		}
		if key == bench.RowTransport || key == bench.RowPacedRead {
			assert.Negative(t, row.Statements, "%s: no statements measured", key)
			assert.Negative(t, row.DBCPU, "%s: no database CPU measured", key)
			if key == bench.RowPacedRead {
				// A process of its own, started and run: never under a tick.
				assert.Positive(t, row.WorkerCPU, "%s worker CPU", key)
			}
			continue
		}
		// The database's figures: statements always (the server's own
		// counter); its CPU where the server runs on this machine.
		assert.Positive(t, row.StatementsPerEvent(), "%s statements/event", key)
		if res.DBProcess > 0 {
			assert.GreaterOrEqual(t, row.DBCPU, time.Duration(0), "%s database CPU", key)
		} else {
			assert.Negative(t, row.DBCPU, "%s database CPU, server not on this machine", key)
		}
		if pipelines[key] {
			assert.Positive(t, row.WorkerCPU, "%s worker CPU", key)
			assert.Positive(t, row.PeakRSS, "%s peak RSS", key)
			assert.Positive(t, row.Startup, "%s startup", key)
		}
		if paced[key] {
			assert.Positive(t, row.P50, "%s p50", key)
			assert.GreaterOrEqual(t, row.P99, row.P50, "%s p99", key)
			// Each settled event is acknowledged after its settlement,
			// which is after its publish.
			assert.Positive(t, row.AckP50, "%s settlement->acked p50", key)
			assert.GreaterOrEqual(t, row.AckP99, row.AckP50, "%s settlement->acked p99", key)
			assert.Greater(t, row.SettledP50, row.AckP50, "%s publish->settled event p50", key)
			assert.GreaterOrEqual(t, row.SettledP99, row.SettledP50, "%s publish->settled event p99", key)
		} else {
			assert.Zero(t, row.SettledP99, "%s: settled-event latency only on paced rows", key)
		}
	}
	// Statements are the server's global counter: other clients of a
	// shared test server count too, so their figures are only checked
	// for being there.
	bat, _ := res.Row(bench.RowBatched)
	per, _ := res.Row(bench.RowPerMessage)
	assert.Equal(t, events, bat.Events, "the batched row counts the stream's distinct events")
	off, _ := res.Row(bench.RowBatchedOff)
	assert.Equal(t, bat.Events, off.Events, "settled events on and off over the same backlog")
	require.Len(t, res.Outbox, 2, "the batched rows and one more on/off pair")
	for i, p := range res.Outbox {
		assert.Positive(t, p.Rate, "pair %d events/s on/off", i)
		assert.Positive(t, p.WorkerCPU, "pair %d worker CPU on/off", i)
		assert.Positive(t, p.Statements, "pair %d statements on/off", i)
	}
	// The per-event floor writes the same rows as the rule floor, one
	// event per claim insert and per transaction: more statements per
	// event than 500 at a time, at least its claim insert, the
	// transaction's three statements and its two commits.
	floor, _ := res.Row(bench.RowFloor)
	one, _ := res.Row(bench.RowEventFloor)
	assert.Greater(t, one.StatementsPerEvent(), floor.StatementsPerEvent(), "per-event floor: statements/event over the rule floor's")
	assert.GreaterOrEqual(t, one.StatementsPerEvent(), 4.0, "per-event floor: statements/event")
	// Two processes paced over the same stream as one: both owned
	// partitions from before the first publish to the end.
	paced1, _ := res.Row(bench.RowPacedBatched)
	paced2, _ := res.Row(bench.RowPacedBatched2)
	read, _ := res.Row(bench.RowPacedRead)
	assert.Equal(t, paced1.Events, paced2.Events, "the two paced batched rows publish the same stream")
	assert.Equal(t, paced1.Messages, read.Messages, "the paced read floor reads the paced batched rows' stream")
	assert.Regexp(t, `partitions owned at publish [1-9]\d*\+[1-9]\d*, at the end [1-9]\d*\+[1-9]\d*`, paced2.Note)
	assert.NotContains(t, paced2.Note, "NO PARTITION")
	assert.NotContains(t, paced2.Note, "NOT SETTLED")
	if res.DBProcess > 0 {
		// Over a second of one statement per message: never under a tick.
		assert.Positive(t, per.DBCPU, "per-message database CPU")
	}

	var table, lines bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.NoError(t, res.WriteBenchfmt(&lines))
	for _, row := range res.Rows {
		assert.Contains(t, table.String(), row.Name)
		assert.Contains(t, lines.String(), "BenchmarkE2E/"+row.Key+" ")
	}
	for _, goal := range []string{
		"batched events/s, ×rule floor", "batched distinct events/s", "database CPU per new event", "worker CPU per new event",
		"replay messages/s", "replay worker CPU per message", "replay msgs/s, ×transport ceiling", "p99 publish->settled",
		"steady worker CPU/event, 1 proc", "steady database CPU/event, 1 proc",
		"outbox: database CPU/event, on/off", "outbox: events/s, on/off", "outbox: statements/event, on/off",
		"outbox: worker CPU/event, on/off", "p99 publish->settled event at", "p99 settled event at",
		"p99 at", "steady worker CPU/event, 2 procs", "steady database CPU/event, 2 procs", "steady read floor CPU/event",
	} {
		assert.Contains(t, table.String(), "  "+goal+" ", "goal line")
	}
	// Paced at 200 events/s, the steady-load goals (set at 1,000) are
	// never met, whatever the figures.
	assert.Regexp(t, `  steady worker CPU/event, 2 procs +[\d.]+ µs +goal <= 100 µs at 1000 events/s +NOT met\n`, table.String())
	assert.Contains(t, table.String(), "(the steady-load goals are set at 1000 events/s")
	for _, key := range []string{bench.RowEventFloor, bench.RowPacedBatched2} {
		assert.Regexp(t, `BenchmarkE2E/`+key+` \d+ [\d.]+ ns/op( \d+ msgs/s)? \d+ events/s [\d.]+ worker-us/event `+
			`([\d.]+ db-us/event )?[\d.]+ stmts/event`, lines.String())
	}
	assert.Regexp(t, `BenchmarkE2E/paced-batched \d+ .* [\d.]+ settled-p50-ms [\d.]+ settled-p99-ms [\d.]+ ack-p99-ms`, lines.String())
	assert.Regexp(t, `BenchmarkE2E/batched \d+ [\d.]+ ns/op \d+ msgs/s \d+ events/s [\d.]+ worker-us/event `, lines.String())
	assert.Contains(t, table.String(), "sanity (reconcile, claims, totals per tenant): ok")
	t.Log("\n" + table.String())
}

// TestBacklogTiny runs the backlog measurement at a tiny size: real builds,
// a kfake broker process, MariaDB, one batched consumer. It checks that the
// row has positive figures, both peak RSS figures, at least the requested
// messages and a ledger that held, not how fast or how big anything was.
func TestBacklogTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and runs subprocesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const backlog = 2000
	res, err := bench.RunBacklog(ctx, bench.Options{
		ServerDSN: sqldbtest.ServerDSN(),
		BinDir:    t.TempDir(),
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, backlog)
	require.NoError(t, err)
	assert.Empty(t, res.Problems, "sanity checks")

	row := res.Row
	assert.Equal(t, bench.RowBacklog, row.Key)
	assert.Equal(t, backlog, res.Requested)
	assert.GreaterOrEqual(t, row.Messages, backlog, "messages")
	assert.Less(t, row.Messages, backlog*11/10, "messages")
	assert.Positive(t, row.Events, "distinct events")
	assert.Less(t, row.Events, row.Messages, "distinct events")
	assert.Positive(t, row.Elapsed, "elapsed")
	assert.Positive(t, row.Startup, "startup")
	assert.Less(t, row.Startup, row.Elapsed, "startup is part of elapsed")
	assert.InDelta(t, float64(row.Messages)/row.Elapsed.Seconds(), row.Rate, row.Rate/1000, "msgs/s")
	assert.InDelta(t, float64(row.Events)/row.Elapsed.Seconds(), row.EventRate, row.EventRate/1000, "events/s")
	assert.Positive(t, row.WorkerCPU, "worker CPU")
	assert.GreaterOrEqual(t, row.DBCPU, time.Duration(0), "database CPU")
	assert.Positive(t, row.StatementsPerEvent(), "statements/event")
	assert.Positive(t, row.PeakRSS, "worker peak RSS")
	assert.Positive(t, res.BrokerPeakRSS, "broker peak RSS")

	var table, lines bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.NoError(t, res.WriteBenchfmt(&lines))
	assert.Contains(t, table.String(), row.Name)
	assert.Contains(t, table.String(), "worker peak RSS")
	assert.Contains(t, table.String(), "sanity (reconcile, claims, totals per tenant): ok")
	assert.Regexp(t, `^BenchmarkE2E/backlog=2000 \d+ [\d.]+ ns/op \d+ msgs/s \d+ events/s [\d.]+ worker-us/event `+
		`([\d.]+ db-us/event )?[\d.]+ stmts/event [\d.]+ peak-RSS-MiB [\d.]+ broker-peak-RSS-MiB\n$`, lines.String())
	t.Log("\n" + table.String() + "\n" + lines.String())
}

// TestQueryTiny runs the querier's row at a tiny size: real builds, a
// kfake broker process, MariaDB, a worker and a querier process, the fake
// WeChat. It checks that every registration was asked once, published and
// settled, that each figure is there, and that the table and the benchmark
// line carry them, not how fast anything was.
func TestQueryTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and runs subprocesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench.RunQuery(ctx, bench.Options{
		ServerDSN: sqldbtest.ServerDSN(),
		BinDir:    t.TempDir(),
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, bench.QueryOptions{Rate: 40, Duration: time.Second, FirstWait: time.Second, Tenants: 8})
	require.NoError(t, err)
	assert.Empty(t, res.Problems, "sanity checks")

	assert.Equal(t, 40, res.Registrations)
	assert.Equal(t, res.Registrations, res.Settled, "every registration settled by its answer")
	assert.Equal(t, res.Registrations, res.Published, "one answer published per registration")
	assert.GreaterOrEqual(t, res.Queries, res.Registrations, "asked at least once each")
	assert.Positive(t, res.QueryRate, "queries/s")
	// Nothing is asked before the first wait: settlement comes after it.
	assert.Greater(t, res.P50, res.Options.FirstWait, "p50 registered->settled")
	assert.GreaterOrEqual(t, res.P99, res.P50, "p99")
	assert.GreaterOrEqual(t, res.Asked50, res.Options.FirstWait, "p50 registered->asked")
	assert.Positive(t, res.AskedToSettled50, "p50 asked->settled")
	assert.Positive(t, res.QuerierCPU, "querier CPU")
	assert.Positive(t, res.WorkerCPU, "worker CPU")
	assert.Positive(t, res.QuerierStatements, "the querier's statements, counted on its connections")
	assert.Positive(t, res.SignCost, "RSA-2048 request signature")
	assert.Positive(t, res.VerifyCost, "answer verification")
	if res.Statements >= 0 {
		assert.GreaterOrEqual(t, res.Statements, res.QuerierStatements, "the server's statements include the querier's")
	}

	var table, lines bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.NoError(t, res.WriteBenchfmt(&lines))
	assert.Contains(t, table.String(), "querier: first wait 1s, 8 tenants")
	// At 40 registrations/s the goal (set at 1,000/s) is never met.
	assert.Regexp(t, `  p99 registered->settled by query +[\d.]+ms +goal <= first wait \+ 1s = 2000.0ms at 1000/s NOT met\n`, table.String())
	assert.Contains(t, table.String(), "(the goal is set at 1000 registrations/s; this row published 40/s)")
	assert.Contains(t, table.String(), "  querier CPU per query ")
	assert.Contains(t, table.String(), "  querier statements per query ")
	assert.Contains(t, table.String(), "sanity (reconcile, claims, totals per tenant): ok")
	assert.Regexp(t, `^BenchmarkE2E/query \d+ [\d.]+ ns/op \d+ regs/s \d+ queries/s [\d.]+ p50-ms [\d.]+ p99-ms [\d.]+ querier-us/query `+
		`[\d.]+ querier-stmts/query [\d.]+ worker-us/query [\d.]+ harness-us/query ([\d.]+ db-us/query )?[\d.]+ sign-us [\d.]+ verify-us\n$`,
		lines.String())
	t.Log("\n" + table.String() + "\n" + lines.String())
}
