package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/dbengine"
)

// TestMeterCountsStatementsTheEngineWay: the meter reads TiDB's statement
// summary and the Questions counter elsewhere, choosing by what the server
// is (dbengine.Detect), not by its VERSION(): tidb.sh runs it on a TiDB
// whose VERSION() looks like MySQL's too.
func TestMeterCountsStatementsTheEngineWay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := newMeter(ctx, sqldbtest.ServerDSN())
	require.NoError(t, err)
	defer m.close()
	assert.Equal(t, sqldbtest.ExpectedEngine() == dbengine.TiDB, m.tidb)
	n, err := m.questions(ctx)
	require.NoError(t, err)
	assert.Positive(t, n)
}

// TestUsageLess: a part of a row's usage taken out of it leaves the rest,
// unknown where either is unknown, never below zero.
func TestUsageLess(t *testing.T) {
	whole := usage{self: 50 * time.Millisecond, server: 80 * time.Millisecond, statements: 900}
	assert.Equal(t, usage{self: 40 * time.Millisecond, server: 50 * time.Millisecond, statements: 600},
		whole.less(usage{self: 10 * time.Millisecond, server: 30 * time.Millisecond, statements: 300}))
	assert.Equal(t, whole, whole.less(usage{}), "nothing taken out")
	assert.Equal(t, usage{self: 0, server: -1, statements: -1},
		whole.less(usage{self: time.Second, server: -1, statements: -1}), "unknown parts and a part bigger than the whole")
	assert.Equal(t, usage{self: -1, server: 80 * time.Millisecond, statements: 900},
		usage{self: -1, server: 80 * time.Millisecond, statements: 900}.less(usage{}), "unknown stays unknown")
}
