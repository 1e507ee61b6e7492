package dbengine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Engine names a MySQL-compatible server.
type Engine string

// The engines Detect tells apart.
const (
	// MySQL is Oracle's MySQL, and any server that answers neither
	// question TiDB and MariaDB answer.
	MySQL Engine = "mysql"
	// MariaDB is MariaDB, Galera clusters of it included.
	MariaDB Engine = "mariadb"
	// TiDB is PingCAP's TiDB.
	TiDB Engine = "tidb"
)

// Info is what Detect found: the engine and its own version.
type Info struct {
	// Engine is the server's kind.
	Engine Engine
	// Version is the engine's version: VERSION() on MySQL and MariaDB
	// (e.g. "10.11.6-MariaDB-0+deb12u1"), and on TiDB the release version
	// that TIDB_VERSION() states (e.g. "v8.5.0"), since TiDB's VERSION()
	// is its server-version setting.
	Version string
}

// String is the form the commands print at start-up:
// "engine=mariadb version=10.11.6-MariaDB-0+deb12u1".
func (i Info) String() string {
	return "engine=" + string(i.Engine) + " version=" + i.Version
}

// Querier runs a query that returns one row: a *sql.DB, *sql.Conn or
// *sql.Tx, or a bun.IDB.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// errUnknownSystemVariable is the server's error for a system variable it
// does not have (ER_UNKNOWN_SYSTEM_VARIABLE, the same number on MySQL,
// MariaDB and TiDB).
const errUnknownSystemVariable = 1193

// Detect asks db's server what it is: a server that has the system
// variable @@tidb_txn_mode (TiDB's transaction mode; TiDB has no
// @@tidb_version variable, only the TIDB_VERSION() function) is TiDB; one
// that has @@aria_block_size (the Aria storage engine, part of every
// MariaDB) is MariaDB; one that has neither is MySQL. Only the server's
// own "unknown system variable" error (1193) means "not this engine": any
// other failure (the connection, a timeout, a cancelled ctx) is returned,
// wrapped, with no guess. It does not work on SQLite.
func Detect(ctx context.Context, db Querier) (Info, error) {
	_, ok, err := variable(ctx, db, "tidb_txn_mode")
	if err != nil {
		return Info{}, err
	}
	if ok {
		var tidb string
		if err := db.QueryRowContext(ctx, "SELECT TIDB_VERSION()").Scan(&tidb); err != nil {
			return Info{}, fmt.Errorf("detect the database engine: read the tidb version: %w", err)
		}
		return Info{Engine: TiDB, Version: tidbRelease(tidb)}, nil
	}
	_, ok, err = variable(ctx, db, "aria_block_size")
	if err != nil {
		return Info{}, err
	}
	engine := MySQL
	if ok {
		engine = MariaDB
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return Info{}, fmt.Errorf("detect the database engine: read the %s version: %w", engine, err)
	}
	return Info{Engine: engine, Version: version}, nil
}

// variable reads the system variable name; ok is false when the
// server has no such variable.
func variable(ctx context.Context, db Querier, name string) (value string, ok bool, err error) {
	var v sql.NullString
	err = db.QueryRowContext(ctx, "SELECT @@"+name).Scan(&v)
	switch {
	case err == nil:
		return v.String, true, nil
	case unknownVariable(err):
		return "", false, nil
	default:
		return "", false, fmt.Errorf("detect the database engine: read @@%s: %w", name, err)
	}
}

// unknownVariable reports whether err is the server's error for a system
// variable it does not have.
func unknownVariable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errUnknownSystemVariable
}

// tidbRelease returns the release version that TIDB_VERSION()'s first
// line states ("Release Version: v8.5.0"), or the whole first line when it
// has no such label.
func tidbRelease(tidbVersion string) string {
	first, _, _ := strings.Cut(tidbVersion, "\n")
	first = strings.TrimSpace(first)
	if v, ok := strings.CutPrefix(first, "Release Version:"); ok {
		return strings.TrimSpace(v)
	}
	return first
}
