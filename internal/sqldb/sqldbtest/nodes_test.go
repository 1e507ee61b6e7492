package sqldbtest_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// TestNewDatabaseSpreadsConnectionsOverTheNodes: with TEST_MYSQL_NODES,
// successive connections of a test database's pool land on successive
// nodes, every one of them with the database and wsrep_sync_wait=1 (or
// TEST_WSREP_SYNC_WAIT);
// without it, every connection goes to the one test server.
func TestNewDatabaseSpreadsConnectionsOverTheNodes(t *testing.T) {
	ctx := context.Background()
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	nodes := sqldbtest.Nodes()
	want := map[string]bool{}
	for _, n := range nodes {
		want[n[strings.LastIndexByte(n, ':')+1:]] = true
	}
	if len(nodes) == 0 {
		cfg, err := mysql.ParseDSN(sqldbtest.ServerDSN())
		require.NoError(t, err)
		want[cfg.Addr[strings.LastIndexByte(cfg.Addr, ':')+1:]] = true
	}
	got := map[string]bool{}
	conns := make([]bun.Conn, 2*max(len(nodes), 1))
	for i := range conns {
		conns[i], err = db.Conn(ctx)
		require.NoError(t, err)
		defer conns[i].Close() //nolint:errcheck // held open so each is a new connection
		var port int
		var schema string
		require.NoError(t, conns[i].QueryRowContext(ctx, "SELECT @@port, DATABASE()").Scan(&port, &schema))
		assert.Contains(t, dsn, "/"+schema)
		got[strconv.Itoa(port)] = true
		if len(nodes) > 0 && os.Getenv("TEST_WSREP_SYNC_WAIT") != "off" {
			var wait int
			require.NoError(t, conns[i].QueryRowContext(ctx, "SELECT @@SESSION.wsrep_sync_wait").Scan(&wait))
			want := 1
			if v := os.Getenv("TEST_WSREP_SYNC_WAIT"); v != "" {
				want, err = strconv.Atoi(v)
				require.NoError(t, err)
			}
			assert.Equal(t, want, wait)
		}
	}
	assert.Equal(t, want, got, "the ports the connections reached")
}
