// Package dberr says what a database error means, in one place: a
// duplicate key ("already handled"), a transaction the server rolled back
// for a concurrent one (run it again), or an answer waiting will not heal
// (fix the configuration). The claim store (pkg/idempotent), the settler
// (pkg/settlement), the migration lock (schema) and the connection checks
// (internal/sqldb) all ask it, so that no two of them can disagree.
//
// It reads errors only: it opens no connection and runs no statement.
//
// The rules this package keeps, and must never break:
//
//   - Errors are classified with errors.As on the drivers' error types
//     (*mysql.MySQLError, *sqlite.Error) and their numbers, never by
//     matching message text.
//   - Only ClassifyDuplicate says "duplicate key": MySQL/MariaDB 1062 or
//     SQLite's SQLITE_CONSTRAINT_UNIQUE. A conflict (IsRetryableConflict)
//     is never a duplicate; its retry meets the unique index, and only the
//     index's answer says "already handled".
package dberr
