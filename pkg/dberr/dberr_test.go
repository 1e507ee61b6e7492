package dberr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"

	"github.com/paycallback/paycallback/pkg/dberr"
)

func TestClassifyDuplicate(t *testing.T) {
	cases := []struct {
		name string
		err  error
		dup  bool
	}{
		{"nil", nil, false},
		{"mysql duplicate entry", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, true},
		{"wrapped mysql duplicate entry", fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1062}), true},
		{"deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, false},
		// Galera reports a concurrent insert of the same key on another
		// node as a deadlock at COMMIT, TiDB's optimistic transactions as
		// a write conflict: the retry meets the unique index, and only its
		// 1062 says "already handled".
		{"galera certification failure", &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}, false},
		{"tidb write conflict", &mysql.MySQLError{
			Number: 9007, SQLState: [5]byte{'H', 'Y', '0', '0', '0'},
			Message: "Write conflict, txnStartTS=1, conflictStartTS=2, conflictCommitTS=3, key={tableID=1, indexID=1, " +
				"indexValues={1001, CH:T:PAYMENT_RECEIVED, }}, reason=Optimistic [try again later]",
		}, false},
		{"wrapped tidb write conflict at commit", fmt.Errorf("settle: commit: %w", &mysql.MySQLError{Number: 9007, Message: "Write conflict"}), false},
		{"tidb stale write conflict", &mysql.MySQLError{Number: 8005}, false},
		{"lock wait timeout", &mysql.MySQLError{Number: 1205}, false},
		{"data too long", &mysql.MySQLError{Number: 1406}, false},
		{"connection was killed", &mysql.MySQLError{Number: 1927}, false},
		{"invalid connection", mysql.ErrInvalidConn, false},
		{"cancelled context", context.Canceled, false},
		{"statement deadline", context.DeadlineExceeded, false},
		{"wrapped lock wait timeout", fmt.Errorf("settle: commit: %w", &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}), false},
		// The message says "Duplicate entry", but the classifier never reads messages.
		{"duplicate-looking text", errors.New("Error 1062: Duplicate entry 'x' for key 'uk_idem'"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := dberr.ClassifyDuplicate(tc.err)
			assert.Equal(t, tc.dup, errors.Is(got, dberr.ErrDuplicateKey))
			if !tc.dup {
				assert.Equal(t, tc.err, got, "a non-duplicate error is returned unchanged")
			} else {
				assert.ErrorIs(t, got, tc.err, "the driver error stays reachable")
			}
		})
	}
}

func TestIsDeadlock(t *testing.T) {
	assert.True(t, dberr.IsDeadlock(&mysql.MySQLError{Number: 1213}))
	assert.True(t, dberr.IsDeadlock(fmt.Errorf("settle: %w", &mysql.MySQLError{Number: 1213})))
	assert.False(t, dberr.IsDeadlock(&mysql.MySQLError{Number: 1205}), "a lock wait timeout rolls back one statement only")
	assert.False(t, dberr.IsDeadlock(&mysql.MySQLError{Number: 1062}))
	assert.False(t, dberr.IsDeadlock(errors.New("Error 1213: Deadlock found")), "messages are never read")
	assert.False(t, dberr.IsDeadlock(nil))
}

func TestIsRetryableConflict(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		retry bool
	}{
		{"nil", nil, false},
		{"deadlock", &mysql.MySQLError{Number: 1213}, true},
		{"wrapped deadlock at commit", fmt.Errorf("settle: commit: %w", &mysql.MySQLError{Number: 1213}), true},
		{"tidb write conflict", &mysql.MySQLError{Number: 9007, Message: "Write conflict"}, true},
		{"wrapped tidb write conflict", fmt.Errorf("settle batch: %w", &mysql.MySQLError{Number: 9007}), true},
		{"tidb stale write conflict", &mysql.MySQLError{Number: 8005}, true},
		{"tidb locking read conflict", &mysql.MySQLError{Number: 8002}, true},
		{"tidb retryable storage error", &mysql.MySQLError{Number: 8022}, true},
		// A duplicate is a decision, never a conflict to run again blindly.
		{"duplicate entry", &mysql.MySQLError{Number: 1062}, false},
		// A lock wait timeout rolls back the statement only, not the
		// transaction: running the transaction again from the start is the
		// caller's choice, not this one's.
		{"lock wait timeout", &mysql.MySQLError{Number: 1205}, false},
		{"invalid connection", mysql.ErrInvalidConn, false},
		{"message text alone", errors.New("Error 9007: Write conflict"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.retry, dberr.IsRetryableConflict(tc.err))
			if tc.retry {
				assert.NotErrorIs(t, dberr.ClassifyDuplicate(tc.err), dberr.ErrDuplicateKey,
					"a conflict is never a duplicate")
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	for _, number := range []uint16{1040, 1205, 1213, 1062, 9007} {
		_, permanent := dberr.Permanent(fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: number}))
		assert.False(t, permanent, "error %d may pass", number)
	}
	for _, number := range []uint16{1044, 1045, 1049, 1130, 1142, 1143, 1698} {
		reason, permanent := dberr.Permanent(fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: number}))
		assert.True(t, permanent, "error %d", number)
		assert.NotEmpty(t, reason)
	}
	_, permanent := dberr.Permanent(errors.New("Error 1045: Access denied"))
	assert.False(t, permanent, "messages are never read")
	_, permanent = dberr.Permanent(nil)
	assert.False(t, permanent)
}
