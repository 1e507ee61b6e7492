package sim

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/schema"
)

// NewEnv builds a fresh world for one run: an in-process kfake cluster with
// Topic (partitions partitions) and DLQ, and a new migrated database on the
// test server (TEST_MYSQL_DSN) behind a proxy. Cleanup tears it all down.
// Workers log at debug level to stderr when PAYCB_TEST_LOG is set.
func NewEnv(tb testing.TB, partitions int) Env {
	tb.Helper()
	cluster, brokers, err := inprocess.Start(map[string]int32{Topic: int32(partitions), DLQ: 1, Topic + ".settled": 1})
	require.NoError(tb, err)
	tb.Cleanup(cluster.Close)
	dsn := sqldbtest.NewDatabase(tb)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(tb, err, "migrate")
	proxy, proxied := sqldbtest.NewProxy(tb, dsn)
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("PAYCB_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return Env{Cluster: cluster, Brokers: brokers, DB: db, Proxy: proxy, ProxiedDSN: proxied, Logger: logger}
}
