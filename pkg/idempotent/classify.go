package idempotent

import "github.com/paycallback/paycallback/pkg/dberr"

// The claim store's error classification is pkg/dberr's, the one place
// that reads the drivers' error numbers; the names below keep the store's
// callers writing idempotent.ClassifyDuplicate.

// ErrDuplicateKey is dberr.ErrDuplicateKey: an error that is a unique-index
// violation. Callers test for it with errors.Is after ClassifyDuplicate.
var ErrDuplicateKey = dberr.ErrDuplicateKey

// ClassifyDuplicate is dberr.ClassifyDuplicate: a MySQL/MariaDB 1062 or
// SQLite unique violation comes back wrapping ErrDuplicateKey and the
// driver's error; any other error (nil included) unchanged.
func ClassifyDuplicate(err error) error { return dberr.ClassifyDuplicate(err) }

// IsDeadlock is dberr.IsDeadlock: MySQL/MariaDB's deadlock error (1213).
func IsDeadlock(err error) bool { return dberr.IsDeadlock(err) }

// IsRetryableConflict is dberr.IsRetryableConflict: the server rolled the
// whole transaction back because a concurrent one won, so running it again
// is safe.
func IsRetryableConflict(err error) bool { return dberr.IsRetryableConflict(err) }
