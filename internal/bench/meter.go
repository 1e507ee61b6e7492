package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/dbengine"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for what it reports to user space.
const userHZ = 100

// procCPU returns the user plus system CPU time pid has used, from
// /proc/<pid>/stat (utime + stime, its threads included, in 10ms ticks).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("read cpu time of %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("read cpu time of %d: no ')' in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("read cpu time of %d: %d fields after the command name", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read cpu time of %d: parse %q: %w", pid, s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// serverProcess finds the process id of the database server db is
// connected to, when it runs on this machine: the pid in its @@pid_file,
// else the one process named mariadbd or mysqld in /proc. It returns 0
// when the server's address is not a loopback or local one, or when no
// such process is found (a server in a container of its own, another
// machine): the table then shows "-" for the database's CPU.
func serverProcess(ctx context.Context, conn *sql.Conn, addr string) int {
	if !localAddr(addr) {
		return 0
	}
	var pidFile string
	if err := conn.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err == nil && pidFile != "" {
		if b, err := os.ReadFile(pidFile); err == nil { //nolint:gosec // the server's own pid file
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && isServer(pid) {
				return pid
			}
		}
	}
	return onlyProcess(isServer)
}

// tidbProcess finds the one process named tidb-server in /proc when addr
// is on this machine; 0 when there is none or several.
func tidbProcess(addr string) int {
	if !localAddr(addr) {
		return 0
	}
	return onlyProcess(func(pid int) bool { return processName(pid) == "tidb-server" })
}

// onlyProcess returns the one process in /proc for which is reports
// true; 0 when there is none or several (which one is ours is then
// unknown).
func onlyProcess(is func(pid int) bool) int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	found := 0
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || !is(pid) {
			continue
		}
		if found != 0 {
			return 0
		}
		found = pid
	}
	return found
}

// processName is pid's command name (/proc/PID/comm), "" when unreadable.
func processName(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// isServer reports whether pid is a process named mariadbd or mysqld.
func isServer(pid int) bool {
	switch processName(pid) {
	case "mariadbd", "mysqld":
		return true
	}
	return false
}

// localAddr reports whether a DSN's address (host:port, or a unix socket
// path) is on this machine.
func localAddr(addr string) bool {
	if strings.HasPrefix(addr, "/") {
		return true // a unix socket
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range ifAddrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// meter reads what a row costs: the CPU time of the harness process and
// of the database server process, and the server's global Questions
// counter (statements received from clients), on a connection of its own
// kept open for the whole run so that no reconnect adds statements.
type meter struct {
	conn *sql.Conn
	db   *sql.DB
	// serverPID is the database server's process id, 0 when not local.
	serverPID int
	// perRead is what one read of Questions adds to it (the SHOW itself).
	perRead int64
	// tidb: the server is TiDB, which has no Questions counter; its
	// statement summary's execution counts stand in for it.
	tidb bool
}

// reading is one snapshot of the counters. A field below zero is unknown.
type reading struct {
	self, server time.Duration
	questions    int64
}

// usage is what a row cost: the deltas of two readings. A field below
// zero is unknown.
type usage struct {
	self, server time.Duration
	statements   int64
}

// less is u without v, a part of it: each field stays unknown where
// either is, and never goes below zero.
func (u usage) less(v usage) usage {
	sub := func(a, b time.Duration) time.Duration {
		if a < 0 || b < 0 {
			return -1
		}
		return max(0, a-b)
	}
	out := usage{self: sub(u.self, v.self), server: sub(u.server, v.server), statements: -1}
	if u.statements >= 0 && v.statements >= 0 {
		out.statements = max(0, u.statements-v.statements)
	}
	return out
}

// newMeter opens the meter's connection to the server of serverDSN and
// finds the server's process.
func newMeter(ctx context.Context, serverDSN string) (*meter, error) {
	cfg, err := sqldb.MySQLConfig(serverDSN)
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	db, err := sqldb.OpenMySQL(cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("meter connection to %s: %w", cfg.Addr, err)
	}
	m := &meter{conn: conn, db: db.DB}
	info, err := dbengine.Detect(ctx, conn)
	if err != nil {
		m.close()
		return nil, fmt.Errorf("meter connection to %s: %w", cfg.Addr, err)
	}
	if info.Engine == dbengine.TiDB {
		m.tidb, m.serverPID = true, tidbProcess(cfg.Addr)
	} else {
		m.serverPID = serverProcess(ctx, conn, cfg.Addr)
	}
	a, err := m.questions(ctx)
	if err != nil {
		m.close()
		return nil, err
	}
	b, err := m.questions(ctx)
	if err != nil {
		m.close()
		return nil, err
	}
	m.perRead = max(0, b-a)
	return m, nil
}

func (m *meter) close() {
	_ = m.conn.Close()
	_ = m.db.Close()
}

func (m *meter) questions(ctx context.Context) (int64, error) {
	var name string
	var n int64
	if m.tidb {
		// Every window of the statement summary, the current one
		// included: a total that only grows (for its 24 windows' time).
		if err := m.conn.QueryRowContext(ctx,
			"SELECT CAST(COALESCE(SUM(exec_count), 0) AS SIGNED) FROM information_schema.statements_summary_history").Scan(&n); err != nil {
			return 0, fmt.Errorf("read the server's statement summary: %w", err)
		}
		return n, nil
	}
	if err := m.conn.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
		return 0, fmt.Errorf("read the server's Questions: %w", err)
	}
	return n, nil
}

// read takes a snapshot; what cannot be read is left unknown (below zero)
// rather than failing the row.
func (m *meter) read(ctx context.Context) reading {
	r := reading{self: -1, server: -1, questions: -1}
	if t, err := procCPU(os.Getpid()); err == nil {
		r.self = t
	}
	if m.serverPID > 0 {
		if t, err := procCPU(m.serverPID); err == nil {
			r.server = t
		}
	}
	if q, err := m.questions(ctx); err == nil {
		r.questions = q
	}
	return r
}

// Waiting for the server to go quiet: it is quiet when its CPU over one
// quietWindow is below busyCPU; quietMax bounds the wait.
const (
	quietWindow = 250 * time.Millisecond
	quietMax    = 20 * time.Second
)

// waitQuiet waits until the database server's process has gone quiet
// (InnoDB's background flushing and purge after the previous row's writes,
// and the drop of its database, cost CPU for seconds after the row ended,
// which the next row's figures would otherwise carry), at most quietMax. It
// reports whether the server went quiet; a server whose CPU cannot be read
// (not on this machine) is not waited for.
func (m *meter) waitQuiet(ctx context.Context) bool {
	if m.serverPID <= 0 {
		return true
	}
	deadline := time.Now().Add(quietMax)
	t := time.NewTimer(quietWindow)
	defer t.Stop()
	for {
		a, err := procCPU(m.serverPID)
		if err != nil {
			return true
		}
		t.Reset(quietWindow)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		b, err := procCPU(m.serverPID)
		if err != nil {
			return true
		}
		if (b-a).Seconds()/quietWindow.Seconds() < busyCPU {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// since is the usage from start to end; the meter's own reads of
// Questions are left out.
func (m *meter) since(start, end reading) usage {
	u := usage{self: -1, server: -1, statements: -1}
	if start.self >= 0 && end.self >= 0 {
		u.self = end.self - start.self
	}
	if start.server >= 0 && end.server >= 0 {
		u.server = end.server - start.server
	}
	if start.questions >= 0 && end.questions >= 0 {
		u.statements = max(0, end.questions-start.questions-m.perRead)
	}
	return u
}
