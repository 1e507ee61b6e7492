package app_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/metrics"
)

// TestStartReportsAWorkerThatStopsAtStart: Start returns Run's error when
// the worker stops before it is ready, Close then returns the same error,
// a second Start is refused, and Close on a Main never started is nil.
func TestStartReportsAWorkerThatStopsAtStart(t *testing.T) {
	require.NoError(t, (&app.Main{}).Close(), "nothing started, nothing to stop")

	cfg := config.Default()
	cfg.Kafka.Brokers = []string{"127.0.0.1:1"}
	cfg.Kafka.TLS = config.TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "absent.pem")}
	m := &app.Main{Config: cfg, Logger: testLogger(), Registry: metrics.NewRegistry()}
	err := m.Start(context.Background())
	require.Error(t, err)
	require.ErrorIs(t, err, config.ErrInvalid)
	assert.Equal(t, err, m.Close())
	assert.Equal(t, err, m.Close(), "Close again: the same result")
	assert.Error(t, m.Start(context.Background()), "a Main starts once")
}
