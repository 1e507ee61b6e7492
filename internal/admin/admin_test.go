package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ok(context.Context) error { return nil }

func fail(msg string) CheckFunc {
	return func(context.Context) error { return errors.New(msg) }
}

func get(t *testing.T, h http.Handler, target string, header ...string) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Header()
}

func TestHealthz(t *testing.T) {
	s := New(":0", nil, []Check{{Name: "database", Check: fail("down")}}, nil)
	code, body, _ := get(t, s.Handler(), "/healthz")
	assert.Equal(t, http.StatusOK, code, "liveness does not depend on readiness")
	assert.Equal(t, "ok\n", body)
}

func TestReadyz(t *testing.T) {
	for _, tc := range []struct {
		name     string
		checks   []Check
		wantCode int
		want     []string
		notWant  []string
	}{
		{
			name:     "no checks",
			wantCode: http.StatusOK,
			want:     []string{"ok"},
		},
		{
			name:     "all pass",
			checks:   []Check{{"database", ok}, {"group", ok}, {"partitions", ok}},
			wantCode: http.StatusOK,
			want:     []string{"database ok\ngroup ok\npartitions ok\n"},
		},
		{
			name:     "one fails",
			checks:   []Check{{"database", ok}, {"group", fail("not joined")}, {"partitions", ok}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"database ok\ngroup failed: not joined\npartitions ok\n"},
		},
		{
			name:     "credentials are masked",
			checks:   []Check{{"database", fail("ping root:hunter2@tcp(db:3306)/paycb: connection refused")}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"database failed: ping root:***@tcp(db:3306)/paycb: connection refused"},
			notWant:  []string{"hunter2"},
		},
		{
			name:     "password with @ is masked whole",
			checks:   []Check{{"database", fail("dsn u:p@ss@tcp(db)/x")}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"u:***@tcp(db)/x"},
			notWant:  []string{"p@ss"},
		},
		{
			name:     "multi-line message becomes one line",
			checks:   []Check{{"partitions", fail("partition 3 stalled\n\tfor 2m")}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"partitions failed: partition 3 stalled for 2m\n"},
		},
		{
			name:     "long message is truncated",
			checks:   []Check{{"group", fail(strings.Repeat("x", 1000))}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"group failed: " + strings.Repeat("x", MaxMessageLen) + "…\n"},
		},
		{
			name:     "panicking check fails",
			checks:   []Check{{"group", func(context.Context) error { panic("boom") }}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"group failed: check panicked"},
			notWant:  []string{"boom"},
		},
		{
			name:     "missing function fails",
			checks:   []Check{{"group", nil}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"group failed: no check function"},
		},
		{
			name:     "empty message",
			checks:   []Check{{"group", fail("")}},
			wantCode: http.StatusServiceUnavailable,
			want:     []string{"group failed: failed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(":0", nil, tc.checks, nil)
			code, body, header := get(t, s.Handler(), "/readyz")
			assert.Equal(t, tc.wantCode, code)
			assert.Equal(t, "text/plain; charset=utf-8", header.Get("Content-Type"))
			for _, w := range tc.want {
				assert.Contains(t, body, w)
			}
			for _, w := range tc.notWant {
				assert.NotContains(t, body, w)
			}
		})
	}
}

func TestReadyzJSON(t *testing.T) {
	s := New(":0", nil, []Check{{"database", ok}, {"group", fail("dial a:secret@b: refused")}}, nil)
	for _, tc := range []struct {
		name   string
		target string
		header []string
	}{
		{"accept header", "/readyz", []string{"Accept", "application/json"}},
		{"query", "/readyz?format=json", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, header := get(t, s.Handler(), tc.target, tc.header...)
			assert.Equal(t, http.StatusServiceUnavailable, code)
			assert.Equal(t, "application/json", header.Get("Content-Type"))
			var got Readiness
			require.NoError(t, json.Unmarshal([]byte(body), &got))
			assert.Equal(t, Readiness{Ready: false, Checks: []CheckResult{
				{Name: "database", OK: true},
				{Name: "group", Error: "dial a:***@b: refused"},
			}}, got)
		})
	}
}

func TestReadyzCheckTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stuck := func(context.Context) error { <-release; return nil } // ignores its context
	honest := func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("ping: %w", ctx.Err()) }
	s := New(":0", nil, []Check{{"stuck", stuck}, {"honest", honest}, {"database", ok}}, nil, WithCheckTimeout(50*time.Millisecond))

	start := time.Now()
	code, body, _ := get(t, s.Handler(), "/readyz")
	assert.Less(t, time.Since(start), 2*time.Second, "checks run concurrently and are bounded")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "stuck failed: timed out after 50ms")
	assert.Contains(t, body, "honest failed: ")
	assert.Contains(t, body, "database ok")
}

func TestMetricsUsesInjectedGatherer(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "paycb_test_total", Help: "Test counter."})
	reg.MustRegister(c)
	c.Add(3)

	s := New(":0", reg, nil, nil)
	code, body, _ := get(t, s.Handler(), "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "paycb_test_total 3")
	assert.NotContains(t, body, "go_goroutines", "the global registry is never served")

	code, body, _ = get(t, New(":0", nil, nil, nil).Handler(), "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Empty(t, strings.TrimSpace(body))
}

func TestRoutes(t *testing.T) {
	s := New(":0", nil, nil, nil)
	for _, tc := range []struct {
		method, target string
		want           int
	}{
		{http.MethodHead, "/healthz", http.StatusOK},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/metrics", http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/debug/pprof/", http.StatusNotFound},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
			assert.Equal(t, tc.want, rec.Code)
		})
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestServeRealListener(t *testing.T) {
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "paycb_test_value", Help: "Test gauge."}))
	s := New("unused", reg, []Check{{"database", ok}}, nil)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	code, body := httpGet(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	code, body = httpGet(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "database ok\n", body)
	code, body = httpGet(t, base+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "paycb_test_value 0")
	assert.Equal(t, ln.Addr().String(), s.Addr().String())

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a clean shutdown is not an error")
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	assert.Error(t, err, "the listener is closed")
}

func TestRun(t *testing.T) {
	t.Run("serves until cancelled", func(t *testing.T) {
		s := New("127.0.0.1:0", nil, nil, nil)
		assert.Nil(t, s.Addr())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		require.Eventually(t, func() bool { return s.Addr() != nil }, 5*time.Second, 5*time.Millisecond)
		code, _ := httpGet(t, "http://"+s.Addr().String()+"/healthz")
		assert.Equal(t, http.StatusOK, code)
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	})
	t.Run("listen error", func(t *testing.T) {
		err := New("127.0.0.1:-1", nil, nil, nil).Run(t.Context())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "admin listen 127.0.0.1:-1")
	})
	t.Run("shutdown is bounded", func(t *testing.T) {
		entered := make(chan struct{})
		slow := func(ctx context.Context) error {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		}
		s := New("127.0.0.1:0", nil, []Check{{"slow", slow}}, nil,
			WithCheckTimeout(time.Minute), WithShutdownTimeout(100*time.Millisecond))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		require.Eventually(t, func() bool { return s.Addr() != nil }, 5*time.Second, 5*time.Millisecond)

		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.Addr().String()+"/readyz", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
		<-entered
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), 3*time.Second)
		case <-time.After(5 * time.Second):
			t.Fatal("shutdown was not bounded")
		}
	})
}

// TestShutdownDoesNotWaitForAConnectionThatAskedNothing: a client that
// opened a connection and never sent a request (an HTTP client's spare
// dial, a bare TCP probe) does not hold shutdown: http.Server counts such
// a connection as in flight for 5 s, longer than this shutdown timeout,
// so without closing it Run would end in context.DeadlineExceeded.
func TestShutdownDoesNotWaitForAConnectionThatAskedNothing(t *testing.T) {
	s := New("127.0.0.1:0", nil, nil, nil, WithShutdownTimeout(time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	require.Eventually(t, func() bool { return s.Addr() != nil }, 5*time.Second, 5*time.Millisecond)

	var d net.Dialer
	idle, err := d.DialContext(t.Context(), "tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = idle.Close() })
	code, _ := httpGet(t, "http://"+s.Addr().String()+"/healthz") // the server has accepted the bare one too by now
	require.Equal(t, http.StatusOK, code)

	cancel()
	require.NoError(t, <-done, "a connection that asked nothing is closed, not waited for")
	require.NoError(t, idle.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = idle.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the server closed the unused connection")
}

func TestPprof(t *testing.T) {
	t.Run("off by default: everything under /debug/pprof/ is 404", func(t *testing.T) {
		s := New(":0", nil, nil, nil)
		for _, target := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile", "/debug/pprof/symbol", "/debug/pprof/trace", "/debug/pprof/cmdline"} {
			code, _, _ := get(t, s.Handler(), target)
			assert.Equal(t, http.StatusNotFound, code, target)
		}
	})
	t.Run("on: the profiles, never cmdline", func(t *testing.T) {
		s := New("unused", nil, nil, nil, WithPprof(true))
		ln, err := Listen(t.Context(), "127.0.0.1:0")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		base := "http://" + ln.Addr().String()

		code, body := httpGet(t, base+"/debug/pprof/")
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "goroutine")
		for _, name := range []string{"heap", "goroutine", "allocs", "block", "mutex", "threadcreate"} {
			code, body := httpGet(t, base+"/debug/pprof/"+name+"?debug=1")
			assert.Equal(t, http.StatusOK, code, name)
			assert.NotEmpty(t, body, name)
		}
		code, body = httpGet(t, base+"/debug/pprof/symbol")
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "num_symbols")
		// One second each: the server's write timeout must not refuse them.
		code, body = httpGet(t, base+"/debug/pprof/profile?seconds=1")
		assert.Equal(t, http.StatusOK, code, body)
		assert.NotEmpty(t, body)
		code, body = httpGet(t, base+"/debug/pprof/trace?seconds=1")
		assert.Equal(t, http.StatusOK, code, body)
		assert.NotEmpty(t, body)

		code, body = httpGet(t, base+"/debug/pprof/cmdline")
		assert.Equal(t, http.StatusNotFound, code)
		assert.NotContains(t, body, os.Args[0], "the command line is never served")

		cancel()
		require.NoError(t, <-done)
	})
}

func TestListenReportsAnAddressInUseAtOnce(t *testing.T) {
	var lc net.ListenConfig
	taken, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = taken.Close() }()
	_, err = Listen(t.Context(), taken.Addr().String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "admin listen "+taken.Addr().String())
	assert.Contains(t, err.Error(), "address already in use")
}

// TestJSONReport: WithJSON serves the report's current value as JSON on
// GET; another path stays 404 and a report that cannot be encoded is a
// 500.
func TestJSONReport(t *testing.T) {
	n := 0
	s := New(":0", nil, nil, nil,
		WithJSON("/partitions", func() any { n++; return map[string]int{"looks": n} }),
		WithJSON("/broken", func() any { return func() {} }))
	code, body, h := get(t, s.Handler(), "/partitions")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	assert.JSONEq(t, `{"looks":1}`, body)
	_, body, _ = get(t, s.Handler(), "/partitions")
	assert.JSONEq(t, `{"looks":2}`, body, "read at each request")
	code, _, _ = get(t, s.Handler(), "/broken")
	assert.Equal(t, http.StatusInternalServerError, code)
	code, _, _ = get(t, New(":0", nil, nil, nil).Handler(), "/partitions")
	assert.Equal(t, http.StatusNotFound, code, "only when asked for")
}
