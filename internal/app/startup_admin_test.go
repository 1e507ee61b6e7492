package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/metrics"
)

// TestAdminAnswersWhileTheStartUpChecksWait: while run retries a database
// that refuses connections, the admin address already answers: /healthz
// is 200 (a liveness probe must not kill an instance that only waits) and
// /readyz is 503 saying what the checks wait for. A signal still stops the
// wait at once.
func TestAdminAnswersWhileTheStartUpChecksWait(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	dsn, err := mysql.ParseDSN(h.dsn)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dsn.Addr = l.Addr().String() // refuses connections once closed
	require.NoError(t, l.Close())
	cfg.DB.DSN = config.DSN(dsn.FormatDSN())
	cfg.Worker.StartupTimeout = time.Minute

	m := &app.Main{Config: cfg, Logger: testLogger(), Registry: metrics.NewRegistry()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	var base string
	require.Eventually(t, func() bool {
		if a := m.Admin(); a != nil && a.Addr() != nil {
			base = "http://" + a.Addr().String()
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the admin server listens during the start-up checks")
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	require.Eventually(t, func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "waiting for the database (PAYCB_DB_DSN)")
	}, 10*time.Second, 20*time.Millisecond, "/readyz says what start-up waits for")
	code, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, body := get("/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "\npaycb_group_joined 0\n", "not a member during start-up, from the first scrape")
	select {
	case err := <-done:
		t.Fatalf("run returned while the database was still being retried: %v", err)
	default:
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a signal during the checks is a normal stop")
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop at the signal")
	}
	_, err = http.Get(base + "/healthz")
	require.Error(t, err, "the admin server is closed with the run")
}
