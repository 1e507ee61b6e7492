package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/paycallback/paycallback/config"
)

// MySQLConfig parses a go-sql-driver/mysql DSN and applies the settings the
// worker depends on, whatever the DSN says: parseTime, UTC times, strict SQL
// mode (an over-long value is an error, never truncated), affected-row
// counts that count changed rows, not found ones (clientFoundRows off: the
// claim store's multi-row upsert reads "inserted" from them), and bounded dial,
// read and write timeouts (5s, 60s, 60s) where the DSN sets none.
func MySQLConfig(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, dsnError(dsn, err)
	}
	cfg.Logger = driverLogger{}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = false
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 60 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 60 * time.Second
	}
	return cfg, nil
}

// OpenMySQL opens a pool on a MySQL 8.4 or MariaDB 10.11 server from a bare
// DSN, with 32 open and idle connections recycled after 30 minutes: the
// tests' and tools' way in. The worker opens its configured database with
// Open. Every connection's session runs at READ COMMITTED (see
// session), and keeps the server's innodb_lock_wait_timeout. It does not
// connect; call Ping to find out whether the server answers.
func OpenMySQL(dsn string) (*bun.DB, error) {
	cfg, err := MySQLConfig(dsn)
	if err != nil {
		return nil, err
	}
	return openMySQL(cfg, 32, 32, 30*time.Minute, 0)
}

// LockWaitTimeout is the innodb_lock_wait_timeout, in whole seconds, that
// Open gives every session for a statement timeout: half of it, at least
// 1, so that a statement waiting for a row lock ends with the server's
// lock-wait error (1205, an ordinary failure the caller retries) before
// the caller's deadline cuts the connection.
func LockWaitTimeout(statement time.Duration) int {
	return max(int(statement/2/time.Second), 1)
}

// Open opens the pool c describes: the DSN as MySQLConfig reads it, TLS as
// c.TLS says (see applyTLS), c's pool sizes and connection lifetime (each
// left at OpenMySQL's value when zero), and every session's
// innodb_lock_wait_timeout at LockWaitTimeout(c.StatementTimeout) (the
// server's own when c.StatementTimeout is zero). It does not connect; call
// Ping to find out whether the server answers. Its errors name the setting
// at fault and never quote the DSN's password.
func Open(c config.DB) (*bun.DB, error) {
	cfg, err := MySQLConfig(c.DSN.Reveal())
	if err != nil {
		return nil, err
	}
	if err := applyTLS(cfg, c.TLS); err != nil {
		return nil, err
	}
	maxOpen, maxIdle, lifetime := 32, 32, 30*time.Minute
	if c.MaxOpenConns > 0 {
		maxOpen = c.MaxOpenConns
	}
	if c.MaxIdleConns > 0 {
		maxIdle = c.MaxIdleConns
	}
	if c.ConnMaxLifetime > 0 {
		lifetime = c.ConnMaxLifetime
	}
	lockWait := 0
	if c.StatementTimeout > 0 {
		lockWait = LockWaitTimeout(c.StatementTimeout)
	}
	return openMySQL(cfg, maxOpen, maxIdle, lifetime, lockWait)
}

// openMySQL opens a pool on cfg with the given limits, without connecting.
// lockWait is each session's innodb_lock_wait_timeout in seconds (0: the
// server's).
func openMySQL(cfg *mysql.Config, maxOpen, maxIdle int, lifetime time.Duration, lockWait int) (*bun.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	sqldb := sql.OpenDB(session{Connector: conn, lockWait: lockWait})
	sqldb.SetMaxOpenConns(maxOpen)
	sqldb.SetMaxIdleConns(maxIdle)
	sqldb.SetConnMaxLifetime(lifetime)
	return bun.NewDB(sqldb, mysqlDialect{mysqldialect.New()}), nil
}

// session sets every new connection's session variables. Its isolation is
// READ COMMITTED, the isolation the settlement's transactions run at:
// every read sees the latest commit, and InnoDB takes no gap locks on
// searches. Set once per connection, it spares each transaction the SET
// TRANSACTION statement (a round trip) that database/sql's per-transaction
// isolation costs. The statement is the one form MySQL, MariaDB and TiDB
// all accept, where the variable's name differs (transaction_isolation,
// tx_isolation). With lockWait above zero, innodb_lock_wait_timeout is
// lockWait seconds, so that a statement behind a held row lock fails in
// seconds rather than the server's default 50.
type session struct {
	driver.Connector
	lockWait int
}

// Connect implements driver.Connector.
func (c session) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, tlsError(err)
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("mysql connection cannot execute statements")
	}
	if _, err := ex.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("set session isolation: %w", err)
	}
	if c.lockWait > 0 {
		stmt := "SET SESSION innodb_lock_wait_timeout = " + strconv.Itoa(c.lockWait)
		if _, err := ex.ExecContext(ctx, stmt, nil); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("set session lock wait timeout: %w", err)
		}
	}
	return conn, nil
}

// OpenSQLite opens the embedded database file at path (created when absent)
// in WAL mode. Every transaction starts with BEGIN IMMEDIATE, taking the
// write lock up front: SQLite has no SELECT … FOR UPDATE, and a deferred
// transaction that reads then writes could decide on a stale read.
func OpenSQLite(path string) (*bun.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(30000)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	sqldb, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// One writer at a time is all SQLite allows; a small pool avoids lock
	// churn while still letting reads overlap.
	sqldb.SetMaxOpenConns(4)
	return bun.NewDB(sqldb, sqlitedialect.New()), nil
}

// Ping checks that the database answers within timeout.
func Ping(ctx context.Context, db *bun.DB, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// IsSQLite reports whether db is the embedded SQLite database.
func IsSQLite(db bun.IDB) bool { return db.Dialect().Name() == dialect.SQLite }
