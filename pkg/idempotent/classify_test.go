package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"

	"github.com/paycallback/paycallback/pkg/idempotent"
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
			got := idempotent.ClassifyDuplicate(tc.err)
			assert.Equal(t, tc.dup, errors.Is(got, idempotent.ErrDuplicateKey))
			if !tc.dup {
				assert.Equal(t, tc.err, got, "a non-duplicate error is returned unchanged")
			} else {
				assert.ErrorIs(t, got, tc.err, "the driver error stays reachable")
			}
		})
	}
}

func TestIsDeadlock(t *testing.T) {
	assert.True(t, idempotent.IsDeadlock(&mysql.MySQLError{Number: 1213}))
	assert.True(t, idempotent.IsDeadlock(fmt.Errorf("settle: %w", &mysql.MySQLError{Number: 1213})))
	assert.False(t, idempotent.IsDeadlock(&mysql.MySQLError{Number: 1205}), "a lock wait timeout rolls back one statement only")
	assert.False(t, idempotent.IsDeadlock(&mysql.MySQLError{Number: 1062}))
	assert.False(t, idempotent.IsDeadlock(errors.New("Error 1213: Deadlock found")), "messages are never read")
	assert.False(t, idempotent.IsDeadlock(nil))
}

func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
