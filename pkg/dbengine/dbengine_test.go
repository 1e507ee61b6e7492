package dbengine_test

import (
	"context"
	"database/sql"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/dbengine"
)

// TestDetectTellsTheEngineByWhatTheServerIs: on the test server (MariaDB
// unless TEST_MYSQL_ENGINE says otherwise) Detect names its engine and the
// engine's own version: VERSION() on MariaDB and MySQL; on TiDB the release
// TIDB_VERSION() states, whatever its server-version setting makes
// VERSION() say. tidb.sh runs it on a TiDB whose VERSION() is set to look like MySQL's
// (TEST_TIDB_SERVER_VERSION), where it must still say tidb.
func TestDetectTellsTheEngineByWhatTheServerIs(t *testing.T) {
	db, err := sqldb.OpenMySQL(sqldbtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()

	info := sqldbtest.Engine(t, db) // fails unless it is the expected engine
	var version string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version))
	switch info.Engine {
	case dbengine.TiDB:
		var tidb string
		require.NoError(t, db.QueryRowContext(ctx, "SELECT TIDB_VERSION()").Scan(&tidb))
		first, _, _ := strings.Cut(tidb, "\n")
		assert.Equal(t, "Release Version: "+info.Version, strings.TrimSpace(first))
		if configured := os.Getenv("TEST_TIDB_SERVER_VERSION"); configured != "" {
			require.Equal(t, configured, version, "VERSION() is the server-version setting: the setting took")
			assert.NotContains(t, version, "TiDB")
		}
	default:
		assert.Equal(t, version, info.Version, "the version is VERSION()")
	}
	if info.Engine == dbengine.MariaDB {
		assert.Contains(t, info.String(), "engine=mariadb version=10.")
	}

	// Asked on one connection or inside a transaction, the answer is the
	// same.
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	onConn, err := dbengine.Detect(ctx, conn)
	require.NoError(t, err)
	assert.Equal(t, info, onConn)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	inTx, err := dbengine.Detect(ctx, tx)
	require.NoError(t, err)
	assert.Equal(t, info, inTx)
}

// split sends the engine questions (system variables) to one pool and
// every other statement (VERSION(), TIDB_VERSION()) to another.
type split struct{ questions, rest *sql.DB }

func (s split) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if strings.Contains(query, "@@") {
		return s.questions.QueryRowContext(ctx, query, args...)
	}
	return s.rest.QueryRowContext(ctx, query, args...)
}

// TestDetectFailsRatherThanGuesses: a question the server did not answer
// says nothing about the engine. A connection that fails, a server that
// cannot be reached, a context that ended: each is an error, never an
// engine, even when VERSION() would still answer.
func TestDetectFailsRatherThanGuesses(t *testing.T) {
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	proxy, viaProxy := sqldbtest.NewProxy(t, dsn)
	cut, err := sqldb.OpenMySQL(viaProxy)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cut.Close() })
	require.NoError(t, cut.PingContext(context.Background()), "the proxy reaches the server")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.Addr = l.Addr().String()
	require.NoError(t, l.Close())
	cfg.Timeout = 2 * time.Second
	nowhere, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = nowhere.Close() })

	closed, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	require.NoError(t, closed.Close())

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	// The positive case: the same split, both halves up, detects.
	ok, err := dbengine.Detect(context.Background(), split{questions: cut.DB, rest: db.DB})
	require.NoError(t, err)
	assert.Equal(t, sqldbtest.ExpectedEngine(), ok.Engine)

	proxy.Down()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		db   dbengine.Querier
	}{
		{"the questions' connection is cut while VERSION() answers", context.Background(), split{questions: cut.DB, rest: db.DB}},
		{"no server at the address", context.Background(), nowhere},
		{"a closed pool", context.Background(), closed},
		{"an ended context", cancelled, db},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := dbengine.Detect(tc.ctx, tc.db)
			require.Error(t, err, "detected %s", info)
			assert.Zero(t, info)
			assert.Contains(t, err.Error(), "detect the database engine")
		})
	}
}
