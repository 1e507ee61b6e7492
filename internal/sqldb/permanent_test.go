package sqldb_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// TestPermanentTellsWhatWaitingWillNotHeal: the server's own answers, from
// a real server, for a wrong password and an unknown database are
// permanent; a server that is not listening, and the errors a busy server
// gives, are not.
func TestPermanentTellsWhatWaitingWillNotHeal(t *testing.T) {
	base, err := mysql.ParseDSN(sqldbtest.NewDatabase(t))
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())

	cases := []struct {
		name      string
		change    func(c *mysql.Config)
		permanent bool
		// numbers: the server's possible answers; a root that may also log
		// in by unix socket answers a wrong password with 1698, not 1045.
		numbers []uint16
	}{
		{"wrong password", func(c *mysql.Config) { c.Passwd = "not-the-password" }, true, []uint16{1045, 1698}},
		{"unknown database", func(c *mysql.Config) { c.DBName = "paycb_no_such_database" }, true, []uint16{1049}},
		{"nothing listening", func(c *mysql.Config) { c.Addr = closed }, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base.Clone()
			tc.change(c)
			db, err := sqldb.OpenMySQL(c.FormatDSN())
			require.NoError(t, err)
			defer db.Close()
			err = sqldb.Ping(context.Background(), db, 5*time.Second)
			require.Error(t, err)
			_, permanent := sqldb.Permanent(err)
			assert.Equal(t, tc.permanent, permanent, "%v", err)
			wrapped := sqldb.PermanentError(config.DSN(c.FormatDSN()), err)
			require.ErrorIs(t, wrapped, err, "the driver's error stays inspectable")
			if !tc.permanent {
				assert.Equal(t, err, wrapped, "a passing error comes back unchanged")
				return
			}
			var me *mysql.MySQLError
			require.ErrorAs(t, err, &me)
			assert.Contains(t, tc.numbers, me.Number)
			assert.Contains(t, wrapped.Error(), "fix PAYCB_DB_DSN")
			assert.NotContains(t, wrapped.Error(), "not-the-password", "never the password")
		})
	}

	for _, number := range []uint16{1040, 1205, 1213, 1062} {
		_, permanent := sqldb.Permanent(fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: number}))
		assert.False(t, permanent, "error %d may pass", number)
	}
	for _, number := range []uint16{1044, 1045, 1049, 1142, 1698} {
		reason, permanent := sqldb.Permanent(fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: number}))
		assert.True(t, permanent, "error %d", number)
		assert.NotEmpty(t, reason)
	}
}
