package audit

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Entry is one operator action, one row of ss_operator_audit.
type Entry struct {
	// At is when the action ended; Write stores it in UTC, to the microsecond.
	At time.Time
	// OSUser and Host say who ran the action and where (see Who).
	OSUser, Host string
	// Command is the command's path, e.g. "dlq redrive" (at most 64 bytes).
	Command string
	// Arguments is the command line after the command's path, secrets
	// masked (see Arguments).
	Arguments string
	// Result is "ok", or "failed (exit N)" (see Result).
	Result string
	// Detail says what the action did, or the error; empty is NULL.
	Detail string
}

// Who returns the operating-system user running the process and the host
// name; "unknown" for either that cannot be found.
func Who() (osUser, host string) {
	osUser, host = "unknown", "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		osUser = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		host = h
	}
	return osUser, host
}

// Result is the result column for an action that ended with exit status
// code: "ok" for 0; "found" for 3, which is a finding (orphans settled,
// statement discrepancies listed or published), not a failure; "failed
// (exit N)" otherwise.
func Result(code int) string {
	switch code {
	case 0:
		return "ok"
	case 3:
		return "found"
	}
	return "failed (exit " + strconv.Itoa(code) + ")"
}

// Masked replaces a secret flag's value in Arguments.
const Masked = "***"

// SecretFlag reports whether the flag called name (without dashes)
// carries a secret: the database DSN, and any password, key or token.
func SecretFlag(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"dsn", "password", "secret", "token", "key"} {
		if name == s || strings.HasSuffix(name, "-"+s) {
			return true
		}
	}
	return false
}

// Arguments joins args, a command line's arguments, into one string with
// the value of every secret flag (SecretFlag) replaced by Masked, whether
// given as "--db-dsn=V" or "--db-dsn V". An argument holding a space or a
// quote is quoted as a Go string.
func Arguments(args []string) string {
	out := make([]string, 0, len(args))
	maskNext := false
	for _, a := range args {
		if maskNext {
			out = append(out, Masked)
			maskNext = false
			continue
		}
		if name, ok := flagName(a); ok {
			if n, _, hasValue := strings.Cut(name, "="); SecretFlag(n) {
				if hasValue {
					out = append(out, a[:strings.Index(a, "=")+1]+Masked)
				} else {
					out = append(out, a)
					maskNext = true
				}
				continue
			}
		}
		out = append(out, quote(a))
	}
	return strings.Join(out, " ")
}

// flagName returns a's text after its one or two leading dashes when a is a
// flag ("--x", "-x", "--x=v"); "-" and "--" are not.
func flagName(a string) (string, bool) {
	if len(a) < 2 || a[0] != '-' || a == "--" {
		return "", false
	}
	a = a[1:]
	if a[0] == '-' {
		a = a[1:]
	}
	return a, a != ""
}

func quote(a string) string {
	if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
		return strconv.Quote(a)
	}
	return a
}

// Write inserts e as one ss_operator_audit row. The error is the
// database's, wrapped.
func Write(ctx context.Context, db bun.IDB, e Entry) error {
	var detail any
	if e.Detail != "" {
		detail = e.Detail
	}
	_, err := db.NewRaw(`INSERT INTO ss_operator_audit (at, os_user, host, command, arguments, result, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		e.At.UTC().Truncate(time.Microsecond), e.OSUser, e.Host, e.Command, e.Arguments, e.Result, detail).Exec(ctx)
	if err != nil {
		return fmt.Errorf("write audit row for %s: %w", e.Command, err)
	}
	return nil
}

// Recent returns the n most recent rows, newest first.
func Recent(ctx context.Context, db bun.IDB, n int) ([]Entry, error) {
	rows, err := db.QueryContext(ctx, `SELECT at, os_user, host, command, arguments, result, COALESCE(detail, '')
		FROM ss_operator_audit ORDER BY at DESC, id DESC LIMIT ?`, n)
	if err != nil {
		return nil, fmt.Errorf("read audit rows: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []Entry
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.At, &e.OSUser, &e.Host, &e.Command, &e.Arguments, &e.Result, &e.Detail); err != nil {
			return nil, fmt.Errorf("read audit rows: %w", err)
		}
		e.At = e.At.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit rows: %w", err)
	}
	return out, nil
}
