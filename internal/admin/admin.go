package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paycallback/paycallback/pkg/textcut"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Defaults of the Options.
const (
	// DefaultShutdownTimeout bounds the graceful shutdown of the server.
	DefaultShutdownTimeout = 5 * time.Second
	// DefaultCheckTimeout bounds each readiness check.
	DefaultCheckTimeout = 2 * time.Second
	// MaxMessageLen is the most bytes of a failing check's message that
	// /readyz shows.
	MaxMessageLen = 256
)

// CheckFunc reports whether one dependency is ready: nil when it is, else an
// error whose message explains why not. It must honour ctx, which carries
// the check timeout. Its message is shown on /readyz, so it must not contain
// secrets; /readyz additionally masks user:password@ credentials.
type CheckFunc func(ctx context.Context) error

// Check is one named readiness check, such as "database", "group" or
// "partitions". Name appears verbatim on /readyz.
type Check struct {
	Name  string
	Check CheckFunc
}

// Option adjusts a Server built by New.
type Option func(*Server)

// WithShutdownTimeout bounds how long Run waits for in-flight requests when
// its context ends (default DefaultShutdownTimeout); after it, connections
// are closed.
func WithShutdownTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.shutdownTimeout = d
		}
	}
}

// WithCheckTimeout bounds each readiness check (default
// DefaultCheckTimeout). A check still running at the bound is reported as
// failed.
func WithCheckTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.checkTimeout = d
		}
	}
}

// WithPprof serves net/http/pprof under /debug/pprof/ when on: the index,
// profile (CPU), symbol, trace and every named profile (heap, goroutine,
// allocs, block, mutex, threadcreate). The cmdline handler is never served:
// /debug/pprof/cmdline is 404. When off (the default), everything under
// /debug/pprof/ is 404. With pprof on, the server's write timeout is
// PprofWriteTimeout, so that a CPU profile or a trace may run for up to just
// under that long (?seconds=N).
func WithPprof(on bool) Option {
	return func(s *Server) { s.pprof = on }
}

// WithJSON serves GET path (e.g. "/partitions") as report's value encoded
// as JSON, with status 200; a report that cannot be encoded is a 500. It is
// for state that tools read, such as what a worker holds up and why;
// report must be safe for concurrent use and must not return secrets.
func WithJSON(path string, report func() any) Option {
	return func(s *Server) { s.reports = append(s.reports, jsonReport{path: path, report: report}) }
}

// jsonReport is one WithJSON endpoint.
type jsonReport struct {
	path   string
	report func() any
}

// PprofWriteTimeout is the server's write timeout when pprof is served; a
// CPU profile or trace must be shorter.
const PprofWriteTimeout = 2 * time.Minute

// defaultWriteTimeout bounds writing one response.
const defaultWriteTimeout = 30 * time.Second

// Server is the admin HTTP server. Build it with New; it is safe for
// concurrent use.
type Server struct {
	addr            string
	gatherer        prometheus.Gatherer
	checks          []Check
	logger          *slog.Logger
	shutdownTimeout time.Duration
	checkTimeout    time.Duration
	pprof           bool
	reports         []jsonReport
	handler         http.Handler

	mu       sync.Mutex
	listener net.Addr
	ready    atomic.Int32 // last /readyz result: 0 unknown, 1 ready, 2 not ready
}

// New returns a server that will listen on addr (e.g. ":9464") and serve
// gatherer on /metrics and checks on /readyz, in the given order. A nil
// gatherer serves an empty registry (never the global one); a nil logger
// discards. New does not listen: call Run or Serve.
func New(addr string, gatherer prometheus.Gatherer, checks []Check, logger *slog.Logger, opts ...Option) *Server {
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		addr:            addr,
		gatherer:        gatherer,
		checks:          append([]Check(nil), checks...),
		logger:          logger,
		shutdownTimeout: DefaultShutdownTimeout,
		checkTimeout:    DefaultCheckTimeout,
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	for _, r := range s.reports {
		mux.HandleFunc("GET "+r.path, func(w http.ResponseWriter, _ *http.Request) {
			body, err := json.Marshal(r.report())
			w.Header().Set("Cache-Control", "no-store")
			if err != nil {
				s.logger.Warn("admin report not encoded", "path", r.path, "error", err.Error())
				http.Error(w, "report not encoded", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(append(body, '\n'))
		})
	}
	if s.pprof {
		// pprof.Index also serves the named profiles (/debug/pprof/heap,
		// …) through runtime/pprof.Lookup; cmdline is not one of them, and
		// is refused explicitly besides.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", http.NotFound)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.handler = mux
	return s
}

// Handler returns the server's routes, for tests and for mounting elsewhere.
// Methods other than GET and HEAD get 405; unknown paths 404.
func (s *Server) Handler() http.Handler { return s.handler }

// Addr returns the address the server listens on, or nil before Run or
// Serve has started listening. With addr ":0" it reports the chosen port.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listener
}

// Listen binds addr (e.g. ":9464") for a Server and returns the listener,
// without serving: pass it to Serve. Its error (an address in use, a host
// that is not this machine's, a port not allowed) comes at once, so a caller
// can bind before it starts anything else and refuse to start without its
// endpoints. The caller closes the listener when it never calls Serve.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w", addr, err)
	}
	return ln, nil
}

// Run listens on the configured address and serves until ctx ends, then
// shuts down gracefully within the shutdown timeout. It returns nil after a
// clean shutdown, and an error when it cannot listen, when serving fails, or
// when in-flight requests outlast the shutdown timeout (the connections are
// then closed). Listen then Serve does the same in two steps.
func (s *Server) Run(ctx context.Context) error {
	ln, err := Listen(ctx, s.addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on an existing listener, which it closes.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	s.listener = ln.Addr()
	s.mu.Unlock()

	writeTimeout := defaultWriteTimeout
	if s.pprof {
		writeTimeout = PprofWriteTimeout
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	unused := &unusedConns{conns: map[net.Conn]struct{}{}}
	srv.ConnState = unused.track
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.logger.Info("admin server listening", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("admin serve: %w", err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout)
	defer cancel()
	unused.closeAll()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		_ = srv.Close()
		err = fmt.Errorf("admin shutdown: %w", err)
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("admin serve: %w", serveErr))
	}
	return err
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// CheckResult is one check's entry in /readyz's JSON body.
type CheckResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Readiness is /readyz's JSON body, served when the request accepts
// application/json or has ?format=json.
type Readiness struct {
	Ready  bool          `json:"ready"`
	Checks []CheckResult `json:"checks"`
}

// readyz runs every check concurrently and answers 200 when all pass, else
// 503. The plain-text body has one line per check: "name ok" or
// "name failed: message".
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	res := s.runChecks(r.Context())
	s.noteTransition(res)

	status := http.StatusOK
	if !res.Ready {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(res)
		return
	}
	var b strings.Builder
	for _, c := range res.Checks {
		if c.OK {
			fmt.Fprintf(&b, "%s ok\n", c.Name)
		} else {
			fmt.Fprintf(&b, "%s failed: %s\n", c.Name, c.Error)
		}
	}
	if len(res.Checks) == 0 {
		b.WriteString("ok\n")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// runChecks runs the checks concurrently, each bounded by the check timeout.
// A check that ignores its context is reported failed at the bound and left
// to finish on its own.
func (s *Server) runChecks(ctx context.Context) Readiness {
	results := make([]CheckResult, len(s.checks))
	var wg sync.WaitGroup
	for i, c := range s.checks {
		wg.Go(func() {
			results[i] = CheckResult{Name: c.Name, OK: true}
			if err := s.runCheck(ctx, c); err != nil {
				results[i] = CheckResult{Name: c.Name, Error: sanitize(err.Error())}
			}
		})
	}
	wg.Wait()
	ready := true
	for _, r := range results {
		ready = ready && r.OK
	}
	return Readiness{Ready: ready, Checks: results}
}

func (s *Server) runCheck(ctx context.Context, c Check) error {
	if c.Check == nil {
		return errors.New("no check function")
	}
	ctx, cancel := context.WithTimeout(ctx, s.checkTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- errors.New("check panicked")
			}
		}()
		done <- c.Check(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("timed out after %s", s.checkTimeout)
	}
}

// noteTransition logs when readiness changes, not on every probe.
func (s *Server) noteTransition(res Readiness) {
	state := int32(1)
	if !res.Ready {
		state = 2
	}
	if s.ready.Swap(state) == state {
		return
	}
	if res.Ready {
		s.logger.Info("ready")
		return
	}
	var failing []string
	for _, c := range res.Checks {
		if !c.OK {
			failing = append(failing, c.Name)
		}
	}
	s.logger.Warn("not ready", "failing", failing)
}

// credentials matches "user:password@" as in a MySQL DSN or a URL.
var credentials = regexp.MustCompile(`([^\s:@/"'=]+):\S*@`)

// sanitize makes a check's message safe to serve: one line, credentials
// masked, at most MaxMessageLen bytes.
func sanitize(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	msg = credentials.ReplaceAllString(msg, "$1:***@")
	return cmp.Or(textcut.Ellipsis(msg, MaxMessageLen), "failed")
}

// unusedConns tracks the connections that have not sent a request yet
// (http.StateNew), so that shutting down closes them at once. http.Server
// counts such a connection as in flight for its first 5 seconds: a client
// that opened one and never used it (an HTTP client's spare dial beside
// its pooled connection, a probe's bare TCP check) would otherwise hold
// Shutdown to the end of its timeout and turn a clean stop into an error.
// A connection with a request in flight is never closed here.
type unusedConns struct {
	mu      sync.Mutex
	closing bool
	conns   map[net.Conn]struct{}
}

// track is the server's ConnState hook.
func (u *unusedConns) track(c net.Conn, state http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case state == http.StateNew && u.closing:
		_ = c.Close() // accepted while shutting down: nothing asked yet
	case state == http.StateNew:
		u.conns[c] = struct{}{}
	default:
		delete(u.conns, c)
	}
}

// closeAll closes every connection that has not sent a request yet, and
// any accepted from now on before its first request.
func (u *unusedConns) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closing = true
	for c := range u.conns {
		_ = c.Close()
		delete(u.conns, c)
	}
}
