package sqldbtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/dbengine"
)

// ExpectedEngine is the engine of the test server: TEST_MYSQL_ENGINE
// (mysql, mariadb or tidb), or mariadb, the engine of DefaultDSN's server,
// when it is unset. scripts/engines/tidb.sh sets it to tidb.
func ExpectedEngine() dbengine.Engine {
	if v := os.Getenv("TEST_MYSQL_ENGINE"); v != "" {
		return dbengine.Engine(v)
	}
	return dbengine.MariaDB
}

// Engine detects the engine behind db with dbengine.Detect and fails tb
// unless it is ExpectedEngine: a test whose expectations depend on the
// engine never takes the wrong branch on a detector's mistake.
func Engine(tb testing.TB, db dbengine.Querier) dbengine.Info {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := dbengine.Detect(ctx, db)
	require.NoError(tb, err)
	require.Equal(tb, ExpectedEngine(), info.Engine, "the engine of the test server (TEST_MYSQL_ENGINE); detected %s", info)
	return info
}
