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
