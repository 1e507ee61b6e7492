package dbengine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
)

// TestOnlyTheServersUnknownVariableErrorMeansNotThisEngine: the server's
// error 1193, however wrapped, says the server lacks the variable; its
// text alone, another server error or a connection error says nothing.
func TestOnlyTheServersUnknownVariableErrorMeansNotThisEngine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		unknown bool
	}{
		{"unknown system variable", &mysql.MySQLError{Number: 1193, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Unknown system variable 'tidb_txn_mode'"}, true},
		{"wrapped", fmt.Errorf("read: %w", &mysql.MySQLError{Number: 1193}), true},
		{"another server error", &mysql.MySQLError{Number: 1064, Message: "You have an error in your SQL syntax"}, false},
		{"access denied", &mysql.MySQLError{Number: 1045, Message: "Access denied"}, false},
		{"the message without the server's error", errors.New("Error 1193 (HY000): Unknown system variable 'tidb_txn_mode'"), false},
		{"a broken connection", mysql.ErrInvalidConn, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.unknown, unknownVariable(tc.err))
		})
	}
}

func TestTiDBReleaseIsTheFirstLinesVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Release Version: v8.5.0\nEdition: Community\nGit Commit Hash: 4d4fa6d\nStore: tikv", "v8.5.0"},
		{"Release Version: v8.4.0-this-is-a-placeholder\r\nEdition: Community", "v8.4.0-this-is-a-placeholder"},
		{"Release Version: None", "None"},
		{"v7.5.1", "v7.5.1"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tidbRelease(tc.in))
		})
	}
}

func TestInfoString(t *testing.T) {
	assert.Equal(t, "engine=mariadb version=10.11.6-MariaDB-0+deb12u1",
		Info{Engine: MariaDB, Version: "10.11.6-MariaDB-0+deb12u1"}.String())
}
