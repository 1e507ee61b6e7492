package settlement_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func TestNewMetrics(t *testing.T) {
	db := sqldbtest.MustSQLite(t)
	claims := idempotent.NewStore(db)
	reg := prometheus.NewRegistry()
	_, err := settlement.New(db, claims, nil, reg)
	require.NoError(t, err)

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 6, n, "three counters and the three reasons of the mismatch counter, all at zero")

	_, err = settlement.New(db, claims, nil, reg)
	require.Error(t, err, "a second service on one registry is refused")
	_, err = settlement.New(db, claims, nil, nil)
	require.NoError(t, err, "a nil registerer keeps the metrics unexported")
	_, err = settlement.New(nil, claims, nil, nil)
	require.Error(t, err)
}
