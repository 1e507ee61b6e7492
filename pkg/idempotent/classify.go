package idempotent

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
