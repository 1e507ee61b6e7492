package logging_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/logging"
)

// settings is a LogValuer with durations inside groups, as the
// configuration logged at start is.
type settings struct{}

func (settings) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Group("kafka", slog.Duration("session_timeout", 30*time.Second), slog.Duration("max_wait", 500*time.Millisecond)),
		slog.Duration("shutdown_timeout", 90*time.Second),
	)
}

func TestJSONWritesDurationsAsGoStringsAtAnyDepth(t *testing.T) {
	var buf bytes.Buffer
	logger := logging.New(&buf, slog.LevelInfo, "json")
	logger.With("component", "test").WithGroup("g").Info("start", "wait", 1500*time.Millisecond, "config", settings{}, "n", 3)

	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	g, ok := line["g"].(map[string]any)
	require.True(t, ok, buf.String())
	assert.Equal(t, "1.5s", g["wait"])
	assert.InDelta(t, 3.0, g["n"], 0, "other numbers stay numbers")
	cfg, ok := g["config"].(map[string]any)
	require.True(t, ok, buf.String())
	assert.Equal(t, "1m30s", cfg["shutdown_timeout"])
	kafka, ok := cfg["kafka"].(map[string]any)
	require.True(t, ok, buf.String())
	assert.Equal(t, "30s", kafka["session_timeout"])
	assert.Equal(t, "500ms", kafka["max_wait"])
	assert.Equal(t, "test", line["component"])
}

func TestTextWritesDurationsAsGoStrings(t *testing.T) {
	var buf bytes.Buffer
	logger := logging.New(&buf, slog.LevelInfo, "text")
	logger.Info("start", "wait", 1500*time.Millisecond, "config", settings{})
	out := buf.String()
	assert.Contains(t, out, "wait=1.5s")
	assert.Contains(t, out, "config.kafka.session_timeout=30s")
	assert.Contains(t, out, "config.kafka.max_wait=500ms")
	assert.Contains(t, out, "config.shutdown_timeout=1m30s")
	assert.NotContains(t, out, "{", "text, not JSON")
}

func TestLevelDropsLowerRecords(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			logger := logging.New(&buf, slog.LevelWarn, format)
			logger.Info("not shown")
			assert.Empty(t, buf.String())
			logger.Warn("shown")
			assert.Contains(t, buf.String(), "shown")
		})
	}
}
