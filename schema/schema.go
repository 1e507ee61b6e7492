package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

//go:embed mysql/*.sql sqlite/*.sql
var files embed.FS

// Migration is one versioned SQL file of one dialect.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the migrations of a dialect ("mysql" or "sqlite"),
// ordered by version. File names are NNNN_name.sql.
func Migrations(dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations %s: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s/%s: name must start with a positive version and '_'", dir, name)
		}
		body, err := files.ReadFile(path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s/%s: %w", dir, name, err)
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s: version %d appears twice", dir, out[i].Version)
		}
	}
	return out, nil
}

// Migrate brings db's schema to the newest version and returns the versions
// it applied (none when the schema was current). It is safe to run from
// several processes at once, on one server or on several nodes of a
// cluster: on MySQL, MariaDB, Galera and TiDB a lock row serialises them
// (see lockMigrations; GET_LOCK would be local to one Galera node), on
// SQLite the write lock does. Each migration is written so that re-running
// it after a crash halfway is harmless (MySQL DDL commits implicitly).
func Migrate(ctx context.Context, db *bun.DB) (done []int, err error) {
	dir, err := dialectDir(db)
	if err != nil {
		return nil, err
	}
	migs, err := Migrations(dir)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: get connection: %w", err)
	}
	defer func() { _ = conn.Close() }()

	if dir == "mysql" {
		lctx, lock, lerr := lockMigrations(ctx, db, conn)
		if lerr != nil {
			return nil, lerr
		}
		ctx = lctx
		defer func() {
			err = errors.Join(err, lock.release(ctx))
		}()
	}

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ss_schema_migration (
  version    INTEGER      NOT NULL PRIMARY KEY,
  name       VARCHAR(255) NOT NULL,
  applied_at VARCHAR(40)  NOT NULL
)`); err != nil {
		return nil, fmt.Errorf("migrate: create version table: %w", err)
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return nil, err
	}

	for _, m := range migs {
		if applied[m.Version] {
			continue
		}
		if err := apply(ctx, conn, dir == "sqlite", m); err != nil {
			return done, err
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// appliedVersions reads the versions already applied.
func appliedVersions(ctx context.Context, conn bun.Conn) (map[int]bool, error) {
	rows, err := conn.QueryContext(ctx, "SELECT version FROM ss_schema_migration")
	if err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("migrate: read versions: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	return applied, nil
}

// apply runs one migration and records its version. On SQLite, whose DDL
// is transactional, both happen in one transaction; MySQL commits each DDL
// statement implicitly, so its migrations are written to be re-runnable.
func apply(ctx context.Context, conn bun.Conn, transactional bool, m Migration) error {
	exec := conn.ExecContext
	var tx *bun.Tx
	if transactional {
		t, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate %s: begin: %w", m.Name, err)
		}
		defer t.Rollback() //nolint:errcheck // after Commit it is a no-op
		tx, exec = &t, t.ExecContext
	}
	for _, stmt := range Statements(m.SQL) {
		if _, err := exec(ctx, stmt); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	if _, err := exec(ctx,
		"INSERT INTO ss_schema_migration (version, name, applied_at) VALUES (?, ?, ?)",
		m.Version, m.Name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("migrate %s: record version: %w", m.Name, err)
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate %s: commit: %w", m.Name, err)
		}
	}
	return nil
}

// Statements splits a migration into statements: each ends with ';' at the
// end of a line. Comment-only lines are dropped. Migrations keep ';' out of
// string literals.
func Statements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

func dialectDir(db *bun.DB) (string, error) {
	switch db.Dialect().Name() {
	case dialect.MySQL:
		return "mysql", nil
	case dialect.SQLite:
		return "sqlite", nil
	default:
		return "", fmt.Errorf("migrate: unsupported dialect %s", db.Dialect().Name())
	}
}

// ErrNotMigrated is wrapped by Check's error when the database has no
// schema, and ErrOutdated when it lacks migrations this binary has: in both
// cases `consumer migrate` must run before the worker.
var (
	ErrNotMigrated = errors.New("schema not migrated")
	ErrOutdated    = errors.New("schema older than this binary")
)

// Status is what Check found: the versions applied to the database and the
// newest version this binary embeds.
type Status struct {
	// Applied are the versions recorded in the database, ascending.
	Applied []int
	// Embedded is the newest version embedded in this binary.
	Embedded int
	// Missing are embedded versions the database has not applied.
	Missing []int
	// Newer are applied versions this binary does not know: a newer binary
	// migrated the database (a rolling deploy). The schema is compatible by
	// the migrations' rule (they only add), so this is not an error.
	Newer []int
}

// Check compares db's applied migrations with those embedded in the
// binary, reading only. It returns an error wrapping ErrNotMigrated when the
// version table is absent or empty, one wrapping ErrOutdated when an
// embedded version is missing, and other errors when the database cannot be
// read. A database with versions newer than the binary's is reported in
// Status.Newer, without error.
func Check(ctx context.Context, db *bun.DB) (Status, error) {
	dir, err := dialectDir(db)
	if err != nil {
		return Status{}, err
	}
	migs, err := Migrations(dir)
	if err != nil {
		return Status{}, err
	}
	st := Status{}
	if len(migs) > 0 {
		st.Embedded = migs[len(migs)-1].Version
	}
	exists := "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'ss_schema_migration'"
	if dir == "sqlite" {
		exists = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'ss_schema_migration'"
	}
	var n int
	if err := db.QueryRowContext(ctx, exists).Scan(&n); err != nil {
		return st, fmt.Errorf("check schema: look for the version table: %w", err)
	}
	if n == 0 {
		return st, fmt.Errorf("%w: no version table ss_schema_migration", ErrNotMigrated)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return st, fmt.Errorf("check schema: get connection: %w", err)
	}
	defer func() { _ = conn.Close() }()
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return st, fmt.Errorf("check schema: %w", err)
	}
	if len(applied) == 0 {
		return st, fmt.Errorf("%w: no migration applied", ErrNotMigrated)
	}
	known := make(map[int]bool, len(migs))
	for _, m := range migs {
		known[m.Version] = true
		if !applied[m.Version] {
			st.Missing = append(st.Missing, m.Version)
		}
	}
	for v := range applied {
		st.Applied = append(st.Applied, v)
		if !known[v] {
			st.Newer = append(st.Newer, v)
		}
	}
	sort.Ints(st.Applied)
	sort.Ints(st.Newer)
	if len(st.Missing) > 0 {
		return st, fmt.Errorf("%w: version %d expected, migrations %v not applied", ErrOutdated, st.Embedded, st.Missing)
	}
	return st, nil
}
