package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSecretsNeverReachLogsMetricsOrHealth(t *testing.T) {
	h := newHarness(t, 2)
	ctx := context.Background()

	// A database user with a password, so the DSN carries a secret.
	const password = "Pw-7f3a9c-never-printed"
	cfg, err := mysql.ParseDSN(h.dsn)
	require.NoError(t, err)
	user := "u_" + strings.TrimPrefix(cfg.DBName, "paycb_t_")
	_, err = h.db.ExecContext(ctx, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = h.db.ExecContext(context.Background(), fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	_, err = h.db.ExecContext(ctx, fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", cfg.DBName, user))
	require.NoError(t, err)
	cfg.User, cfg.Passwd = user, password
	const apiKey = channelstest.APIv3Key

	s := demo.Generate(demo.StreamOptions{Seed: 41, Trades: 10})
	h.produce(s.Messages)
	logs := &syncBuffer{}
	w := h.start(func(m *app.Main) {
		m.Config.DB.DSN = config.DSN(cfg.FormatDSN())
		m.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	h.waitConsumed(time.Minute)
	h.checkStream(s)

	base := "http://" + w.main.Admin().Addr().String()
	var bodies []string
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/readyz?format=json"} {
		resp, err := http.Get(base + path) //nolint:noctx // test
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		bodies = append(bodies, string(body))
	}
	assert.Contains(t, bodies[0], "paycb_events_total")
	assert.Contains(t, bodies[0], `paycb_kafka_reader_messages_total{partition="0"}`, "the readers' statistics")
	assert.Contains(t, bodies[0], "go_goroutines", "the Go collector")
	// The worker is stopped while the logs are still captured, so shutdown
	// logs are scanned too.
	w.shutdown(t)

	everything := logs.String() + strings.Join(bodies, "\n")
	assert.Contains(t, logs.String(), "starting worker", "the configuration was logged")
	assert.Contains(t, logs.String(), user+":***@", "the DSN is logged, masked")
	assert.NotContains(t, everything, password)
	assert.NotContains(t, everything, apiKey)
}
