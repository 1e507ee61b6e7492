package dberr

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrDuplicateKey marks an error that is a unique-index violation. Callers
// test for it with errors.Is after ClassifyDuplicate.
var ErrDuplicateKey = errors.New("duplicate key")

// mysqlDuplicateEntry is ER_DUP_ENTRY, the same number on MySQL and MariaDB.
const mysqlDuplicateEntry = 1062

// ClassifyDuplicate is the one place that decides whether a database error is
// a unique-key violation: MySQL/MariaDB error 1062 or SQLite's
// SQLITE_CONSTRAINT_UNIQUE, found with errors.As on the drivers' error types,
// never by matching message text. A violation is returned wrapping both
// ErrDuplicateKey and the driver error; any other error (nil included) is
// returned unchanged.
//
// Which index was violated is the caller's knowledge: call it only on a
// statement whose table has a single unique key besides an auto-increment
// primary key, so a violation can only mean that key.
func ClassifyDuplicate(err error) error {
	if err == nil {
		return nil
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) && my.Number == mysqlDuplicateEntry {
		return fmt.Errorf("%w: %w", ErrDuplicateKey, err)
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) && lite.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return fmt.Errorf("%w: %w", ErrDuplicateKey, err)
	}
	return err
}

// mysqlDeadlock is ER_LOCK_DEADLOCK, the same number on MySQL and MariaDB.
const mysqlDeadlock = 1213

// IsDeadlock reports whether err is MySQL/MariaDB's deadlock error: the
// server chose the transaction as the victim and rolled all of it back, so
// running the whole transaction again is safe and usually succeeds.
func IsDeadlock(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == mysqlDeadlock
}

// TiDB's errors for a transaction that lost to a concurrent one and was
// rolled back whole. An optimistic transaction finds out at COMMIT: its
// SELECT … FOR UPDATE took no lock, and another transaction committed a
// write to a row it read or wrote since it began.
const (
	tidbForUpdateCantRetry = 8002 // a locking read conflicted; not retried by the server
	tidbWriteConflictStale = 8005 // write conflict, the transaction's start is stale
	tidbTxnRetryable       = 8022 // a storage error that is safe to retry
	tidbWriteConflict      = 9007 // "Write conflict": another transaction committed first
)

// IsRetryableConflict reports whether err says the server rolled the whole
// transaction back because a concurrent transaction won: MySQL, MariaDB
// and TiDB's deadlock (1213), Galera's certification failure (the same
// 1213, at COMMIT), and TiDB's write conflicts (9007, 8005, 8002, 8022).
// Running the whole transaction again is safe, and its reads then see what
// the winner committed. None of them says a key is taken: where the
// conflict was a concurrent insert of the same unique key, the retry meets
// the unique index and only its duplicate-key error (ClassifyDuplicate)
// says "already handled".
func IsRetryableConflict(err error) bool {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		return false
	}
	switch my.Number {
	case mysqlDeadlock, tidbWriteConflict, tidbWriteConflictStale, tidbForUpdateCantRetry, tidbTxnRetryable:
		return true
	}
	return false
}

// permanentErrors are the server's answers to a connection or a first
// statement that waiting will not change: the credentials, the database
// name or the grants are wrong, and only an operator can fix them.
var permanentErrors = map[uint16]string{
	1044: "access to the database denied",          // ER_DBACCESS_DENIED_ERROR
	1045: "access denied: wrong user or password",  // ER_ACCESS_DENIED_ERROR
	1049: "unknown database",                       // ER_BAD_DB_ERROR
	1130: "this host may not connect as this user", // ER_HOST_NOT_PRIVILEGED
	1142: "a table privilege is missing",           // ER_TABLEACCESS_DENIED_ERROR
	1143: "a column privilege is missing",          // ER_COLUMNACCESS_DENIED_ERROR
	// ER_ACCESS_DENIED_NO_PASSWORD_ERROR: the server authenticates the
	// user another way (Debian's root@localhost: by unix socket).
	1698: "access denied: the server authenticates this user another way (for example by unix socket)",
}

// Permanent returns a readable reason and true when err carries a server
// error that waiting will not heal (access denied, unknown database, a
// missing privilege: MySQL error numbers 1044, 1045, 1049, 1130, 1142, 1143
// and 1698). Network errors, too many connections (1040), lock wait
// timeouts (1205) and every other error are false: they may pass.
func Permanent(err error) (string, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return "", false
	}
	reason, ok := permanentErrors[me.Number]
	return reason, ok
}
