package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
)

// logger is the logger SetLogger installed; nil means slog.Default().
var logger atomic.Pointer[slog.Logger]

// SetLogger sends the database libraries' own log lines through l, at WARN
// with the attribute component=mysql (go-sql-driver/mysql: a connection
// found broken, an unexpected packet) or component=bun (bun's warnings, and
// a failure to discover the server's version when a pool opens). Before
// SetLogger, and after SetLogger(nil), they go to slog.Default(). It may be
// called at any time, also after pools are open; it affects the whole
// process.
func SetLogger(l *slog.Logger) {
	logger.Store(l)
	// Pools opened here carry driverLogger already (see MySQLConfig); this
	// catches configurations made elsewhere. The error is only for nil.
	_ = mysql.SetLogger(driverLogger{})
	bun.SetLogger(bunLogger{})
}

// current returns the logger the library lines go to.
func current() *slog.Logger {
	if l := logger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// driverLogger is go-sql-driver/mysql's Logger, writing through current().
type driverLogger struct{}

// Print implements mysql.Logger. The driver passes its source position
// ("packets.go:58 ") then the error.
func (driverLogger) Print(v ...any) {
	current().Warn(strings.TrimSpace(fmt.Sprint(v...)), slog.String("component", "mysql"))
}

// bunLogger is bun's logger, writing through current().
type bunLogger struct{}

// Printf implements bun's internal Logging. bun prefixes its lines with
// "WARN: bun: " or "DEPRECATED: bun: "; the level and component say that.
func (bunLogger) Printf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	for _, p := range []string{"WARN: bun: ", "DEPRECATED: bun: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	current().Warn(msg, slog.String("component", "bun"))
}

// mysqlDialect is bun's MySQL dialect with a version discovery that logs
// through current(): bun's own prints with the standard library's log
// package when the server does not answer as the pool opens.
type mysqlDialect struct{ *mysqldialect.Dialect }

// Init asks the server its version, as bun's dialect does, and hands the
// answer to bun's dialect (which turns on MariaDB's RETURNING and the like).
// When the server does not answer, the dialect keeps the features every
// supported server has, as bun's would.
func (d mysqlDialect) Init(db *sql.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var version string
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&version); err != nil {
		current().Warn("cannot discover the database server's version; MariaDB-only SQL stays off in this pool",
			slog.String("component", "bun"), slog.String("error", err.Error()))
		return
	}
	vdb := sql.OpenDB(versionConnector{version})
	defer func() { _ = vdb.Close() }()
	d.Dialect.Init(vdb)
}

// versionConnector is a database whose only answer, to any query, is one
// row holding version: it replays the version discovered on the real server
// to bun's dialect without asking the server again.
type versionConnector struct{ version string }

func (c versionConnector) Connect(context.Context) (driver.Conn, error) { return versionConn(c), nil }
func (c versionConnector) Driver() driver.Driver                        { return versionDriver(c) }

type versionDriver versionConnector

func (d versionDriver) Open(string) (driver.Conn, error) { return versionConn(d), nil }

type versionConn versionConnector

var errVersionOnly = errors.New("this connection only answers the server version")

func (versionConn) Prepare(string) (driver.Stmt, error) { return nil, errVersionOnly }
func (versionConn) Close() error                        { return nil }
func (versionConn) Begin() (driver.Tx, error)           { return nil, errVersionOnly }

func (c versionConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return &versionRows{version: c.version}, nil
}

type versionRows struct {
	version string
	done    bool
}

func (*versionRows) Columns() []string { return []string{"version()"} }
func (*versionRows) Close() error      { return nil }

func (r *versionRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = r.version
	return nil
}
