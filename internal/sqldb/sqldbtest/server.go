package sqldbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
)

// Server is a private MariaDB instance of a test's own, in a temporary
// directory on a port of its own, that the test may stop and restart (a
// database restart under a running worker). It needs MariaDB's server
// binaries (mariadb-install-db, mariadbd), which `.ci/run` installs.
type Server struct {
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer initialises and starts a private instance, with mariadbd's
// options args besides the defaults (e.g. "--max-allowed-packet=16384");
// cleanup stops it.
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	dir := tb.TempDir()
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--user=root", "--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	require.NoError(tb, err, "mariadb-install-db: %s", out)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(tb, l.Close())
	s := &Server{dir: dir, port: port, args: args}
	s.Start(tb)
	tb.Cleanup(func() { s.Stop(tb) })
	return s
}

// DSN returns a DSN for database name on the instance (root, no password).
func (s *Server) DSN(name string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", s.port, name)
}

// Addr returns the instance's TCP address, 127.0.0.1:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// SocketDSN returns a DSN for database name on the instance through its
// Unix socket (root, no password): the way in that needs no TLS even when
// the server requires it of TCP clients.
func (s *Server) SocketDSN(name string) string {
	return fmt.Sprintf("root@unix(%s)/%s", filepath.Join(s.dir, "sock"), name)
}

// Start starts the server (again) and waits until it answers.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	args := append([]string{
		"--no-defaults", "--datadir=" + filepath.Join(s.dir, "data"),
		fmt.Sprintf("--port=%d", s.port), "--bind-address=127.0.0.1", "--socket=" + filepath.Join(s.dir, "sock"),
		"--user=root", "--pid-file=" + filepath.Join(s.dir, "pid"), "--skip-log-bin",
		"--innodb-flush-log-at-trx-commit=1",
	}, s.args...)
	s.cmd = exec.Command("mariadbd", args...)
	log, err := os.Create(filepath.Join(s.dir, "server.log"))
	require.NoError(tb, err)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	require.NoError(tb, s.cmd.Start())
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); _ = log.Close(); close(done) }(s.cmd, s.done)
	db, err := sqldb.OpenMySQL(s.SocketDSN(""))
	require.NoError(tb, err)
	defer db.Close()
	require.Eventually(tb, func() bool {
		return sqldb.Ping(context.Background(), db, time.Second) == nil
	}, time.Minute, 50*time.Millisecond, "private MariaDB did not start; see %s", filepath.Join(s.dir, "server.log"))
}

// Stop shuts the server down (SIGTERM, a clean InnoDB shutdown) and waits
// for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Restart stops and starts the server.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop(tb)
	s.Start(tb)
}

// CreateDatabase creates a database on the instance and returns its DSN.
func (s *Server) CreateDatabase(tb testing.TB, name string) string {
	tb.Helper()
	db, err := sqldb.OpenMySQL(s.SocketDSN(""))
	require.NoError(tb, err)
	defer db.Close()
	_, err = db.ExecContext(context.Background(), "CREATE DATABASE "+name+" CHARACTER SET utf8mb4")
	require.NoError(tb, err)
	return s.DSN(name)
}
