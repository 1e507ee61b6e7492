package sqldbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/schema"
)

// DefaultDSN is the server the tests use when TEST_MYSQL_DSN is unset.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/"

// ServerDSN returns TEST_MYSQL_DSN, or DefaultDSN. Its database part is
// ignored: every test gets a database of its own.
func ServerDSN() string {
	if v := os.Getenv("TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return DefaultDSN
}

// NewDatabase creates an empty database with a random name on the test server
// and returns a DSN for it; cleanup drops it. When TEST_MYSQL_NODES lists a
// cluster's nodes, the database is created through the server of
// TEST_MYSQL_DSN (one of them: DDL replicates), and the DSN returned dials
// every new connection to the next node (see NodesNet), each session with
// wsrep_sync_wait=1 (TEST_WSREP_SYNC_WAIT sets another value, or none with
// "off"), so that a read on one node sees what another node committed
// before it.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(ServerDSN())
	require.NoError(tb, err, "parse TEST_MYSQL_DSN")
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "paycb_t_" + hex.EncodeToString(b[:])

	adminDSN := cfg.FormatDSN()
	admin, err := sqldb.OpenMySQL(adminDSN)
	require.NoError(tb, err)
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4")
	require.NoError(tb, err, "create test database on %s (is MariaDB running? .ci/run starts it)", cfg.Addr)
	tb.Cleanup(func() {
		drop, err := sqldb.OpenMySQL(adminDSN)
		if err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer drop.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := drop.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	if len(Nodes()) > 0 {
		waitForDatabase(tb, name)
		spread(cfg)
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		// TEST_WSREP_SYNC_WAIT=off sets nothing: an engine without Galera's
		// variables (TiDB refuses it, error 1193) reached through the nodes.
		switch wait := os.Getenv("TEST_WSREP_SYNC_WAIT"); wait {
		case "off":
		case "":
			cfg.Params["wsrep_sync_wait"] = "1"
		default:
			cfg.Params["wsrep_sync_wait"] = wait
		}
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// waitForDatabase waits until every node of TEST_MYSQL_NODES has the
// database name: a node applies replicated DDL in its own time, and a
// connection naming a database the node lacks yet is refused.
func waitForDatabase(tb testing.TB, name string) {
	tb.Helper()
	for i := range Nodes() {
		dsn, err := NodeDSN(ServerDSN(), i)
		require.NoError(tb, err)
		db, err := sqldb.OpenMySQL(dsn)
		require.NoError(tb, err)
		require.Eventually(tb, func() bool {
			var n int
			err := db.QueryRowContext(context.Background(),
				"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n)
			return err == nil && n == 1
		}, 30*time.Second, 20*time.Millisecond, "database %s not on node %d", name, i)
		_ = db.Close()
	}
}

// MustMySQL returns a pool on a new, migrated database of its own.
func MustMySQL(tb testing.TB) *bun.DB {
	tb.Helper()
	db, err := sqldb.OpenMySQL(NewDatabase(tb))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(tb, err, "migrate test database")
	return db
}

// MustSQLite returns a pool on a new, migrated SQLite file in a temporary
// directory.
func MustSQLite(tb testing.TB) *bun.DB {
	tb.Helper()
	db, err := sqldb.OpenSQLite(filepath.Join(tb.TempDir(), "paycb.db"))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(tb, err, "migrate test database")
	return db
}

// Dialects runs fn as a subtest once on MariaDB/MySQL and once on SQLite, so
// one behaviour suite covers every implementation.
func Dialects(t *testing.T, fn func(t *testing.T, db *bun.DB)) {
	t.Helper()
	t.Run("mysql", func(t *testing.T) { fn(t, MustMySQL(t)) })
	t.Run("sqlite", func(t *testing.T) { fn(t, MustSQLite(t)) })
}
