package sqldb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// lockedBuffer is a bytes.Buffer that the driver's goroutines may write
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// jsonLines decodes every line of out as a JSON object; it fails the test
// on a line that is not one.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON line: %q", line)
		lines = append(lines, m)
	}
	return lines
}

// TestLibraryLogLinesGoThroughSlog: the MySQL driver's complaint about a
// connection the server killed, and bun's about a server it cannot ask for
// its version, come out of the process's slog handler as JSON, at WARN,
// with the library named in component.
func TestLibraryLogLinesGoThroughSlog(t *testing.T) {
	out := &lockedBuffer{}
	sqldb.SetLogger(slog.New(slog.NewJSONHandler(out, nil)))
	t.Cleanup(func() { sqldb.SetLogger(nil) })
	ctx := context.Background()

	t.Run("mysql", func(t *testing.T) {
		dsn := sqldbtest.NewDatabase(t)
		db, err := sqldb.OpenMySQL(dsn)
		require.NoError(t, err)
		defer db.Close()
		admin, err := sqldb.OpenMySQL(dsn)
		require.NoError(t, err)
		defer admin.Close()
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		var id int64
		require.NoError(t, conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
		_, err = admin.ExecContext(ctx, "KILL ?", id)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			var n int
			err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n)
			return err == nil && n == 0
		}, 10*time.Second, 10*time.Millisecond, "connection %d still listed after KILL", id)

		err = conn.QueryRowContext(ctx, "SELECT 1").Scan(new(int))
		require.Error(t, err, "a query on a killed connection")

		lines := jsonLines(t, out.String())
		require.NotEmpty(t, lines)
		for _, l := range lines {
			assert.Equal(t, "mysql", l["component"], "%v", l)
			assert.Equal(t, "WARN", l["level"], "%v", l)
		}
		assert.Contains(t, lines[0]["msg"], ".go:", "the driver's line names its source position")
	})

	t.Run("bun warning", func(t *testing.T) {
		start := len(out.String())
		_ = bun.SafeQuery("SELECT 1", 1) // arguments but no placeholder
		lines := jsonLines(t, out.String()[start:])
		require.Len(t, lines, 1)
		assert.Equal(t, "bun", lines[0]["component"])
		assert.Equal(t, "WARN", lines[0]["level"])
		assert.Equal(t, `query "SELECT 1" has [1] args, but no placeholders`, lines[0]["msg"])
	})

	t.Run("bun", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close()) // nothing listens there now
		start := len(out.String())
		db, err := sqldb.OpenMySQL("root@tcp(" + addr + ")/")
		require.NoError(t, err)
		defer db.Close()
		lines := jsonLines(t, out.String()[start:])
		require.Len(t, lines, 1)
		assert.Equal(t, "bun", lines[0]["component"])
		assert.Equal(t, "WARN", lines[0]["level"])
		assert.Contains(t, lines[0]["msg"], "cannot discover the database server's version")
		assert.Contains(t, lines[0]["error"], "connection refused")
	})
}
