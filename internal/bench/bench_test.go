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
		ServerDSN:     sqldbtest.ServerDSN(),
		BinDir:        t.TempDir(),
		PacedRate:     200,
		PacedDuration: 500 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	assert.Empty(t, res.Problems, "sanity checks")

	pipelines := map[string]bool{
		bench.RowPerMessage: true, bench.RowBatched: true, bench.RowReplay: true,
		bench.RowPacedBatched: true, bench.RowPacedPerMesage: true,
	}
	paced := map[string]bool{bench.RowPacedBatched: true, bench.RowPacedPerMesage: true}
	keys := []string{
		bench.RowTransport, bench.RowStorage, bench.RowPerMessage, bench.RowBatched, bench.RowReplay,
		bench.RowPacedBatched, bench.RowPacedPerMesage,
	}
	require.Len(t, res.Rows, len(keys))
	for i, key := range keys {
		row := res.Rows[i]
		assert.Equal(t, key, row.Key, "row %d", i)
		assert.Positive(t, row.Count, "%s count", key)
		assert.Positive(t, row.Elapsed, "%s elapsed", key)
		assert.Positive(t, row.Rate, "%s rate", key)
		if pipelines[key] {
			assert.Positive(t, row.PeakRSS, "%s peak RSS", key)
			assert.Positive(t, row.Startup, "%s startup", key)
		}
		if paced[key] {
			assert.Positive(t, row.P50, "%s p50", key)
			assert.GreaterOrEqual(t, row.P99, row.P50, "%s p99", key)
		}
	}

	var table, lines bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.NoError(t, res.WriteBenchfmt(&lines))
	for _, row := range res.Rows {
		assert.Contains(t, table.String(), row.Name)
		assert.Contains(t, lines.String(), "BenchmarkE2E/"+row.Key+" ")
	}
	assert.Contains(t, table.String(), "sanity (settlement.Check, claims, totals per tenant): ok")
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
	assert.GreaterOrEqual(t, row.Count, backlog, "messages")
	assert.Less(t, row.Count, backlog*11/10, "messages")
	assert.Positive(t, row.Elapsed, "elapsed")
	assert.Positive(t, row.Startup, "startup")
	assert.Less(t, row.Startup, row.Elapsed, "startup is part of elapsed")
	assert.InDelta(t, float64(row.Count)/row.Elapsed.Seconds(), row.Rate, row.Rate/1000, "events/s")
	assert.Positive(t, row.PeakRSS, "worker peak RSS")
	assert.Positive(t, res.BrokerPeakRSS, "broker peak RSS")

	var table, lines bytes.Buffer
	require.NoError(t, res.WriteTable(&table))
	require.NoError(t, res.WriteBenchfmt(&lines))
	assert.Contains(t, table.String(), row.Name)
	assert.Contains(t, table.String(), "worker peak RSS")
	assert.Contains(t, table.String(), "sanity (settlement.Check, claims, totals per tenant): ok")
	assert.Regexp(t, `^BenchmarkE2E/backlog=2000 \d+ [\d.]+ ns/op \d+ events/s [\d.]+ peak-RSS-MiB [\d.]+ broker-peak-RSS-MiB\n$`, lines.String())
	t.Log("\n" + table.String() + "\n" + lines.String())
}
