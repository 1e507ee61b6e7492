package app_test

import (
	"testing"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

func sqldbtestProxy(t *testing.T, h *harness) (*sqldbtest.Proxy, config.DSN) {
	t.Helper()
	p, dsn := sqldbtest.NewProxy(t, h.dsn)
	return p, config.DSN(dsn)
}
