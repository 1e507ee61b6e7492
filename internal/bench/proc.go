package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one subprocess the harness started: the broker or a consumer.
// kill is safe to call on every exit path, any number of times.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
	err  error // Wait's result, set before done is closed
	// admin is a consumer's admin base URL (http://host:port), "" for
	// other processes.
	admin string
}

// startProc starts path with args and env (added to a copy of the
// harness's environment with every PAYCB_ variable removed, so a developer's
// shell cannot change what is measured) in dir. Output goes to a bounded
// buffer that failures quote; stdout, when set, receives stdout instead.
// When ctx ends the subprocess gets SIGTERM, and SIGKILL 10s later.
func startProc(ctx context.Context, logger *slog.Logger, name, dir, path string, args, env []string, stdout io.Writer) (*proc, error) {
	cmd := exec.CommandContext(ctx, path, args...) //nolint:gosec // path is a binary this harness just built
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	p := &proc{name: name, cmd: cmd, out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stderr = p.out
	cmd.Stdout = p.out
	if stdout != nil {
		cmd.Stdout = stdout
	}
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	logger.Debug("subprocess started", "name", name, "pid", cmd.Process.Pid)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYCB_") {
			out = append(out, kv)
		}
	}
	return out
}

// pid is the subprocess's process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the subprocess has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// failure describes how the subprocess ended, with the tail of its output.
func (p *proc) failure() error {
	if p.err == nil {
		return fmt.Errorf("%s exited early with status 0; last output:\n%s", p.name, p.out.String())
	}
	return fmt.Errorf("%s exited: %w; last output:\n%s", p.name, p.err, p.out.String())
}

// stop sends SIGTERM and waits up to grace for the subprocess to end, then
// kills it. It returns an error when the subprocess did not stop by itself
// or ended with a non-zero status.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		if p.err != nil {
			return p.failure()
		}
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.kill()
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		if p.err != nil {
			return p.failure()
		}
		return nil
	case <-t.C:
		p.kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, grace)
	}
}

// kill ends the subprocess at once (when it still runs) and waits for it.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// peakRSS returns the subprocess's peak resident set size (VmHWM) in bytes.
func (p *proc) peakRSS() (int64, error) {
	return peakRSS(p.pid())
}

// usage returns the subprocess's CPU time so far (utime+stime) and its
// peak RSS (VmHWM) in bytes.
func (p *proc) usage() (time.Duration, int64, error) {
	cpu, err := procCPU(p.pid())
	if err != nil {
		return 0, 0, err
	}
	rss, err := p.peakRSS()
	if err != nil {
		return 0, 0, err
	}
	return cpu, rss, nil
}

// peakRSS reads VmHWM of pid from /proc.
func peakRSS(pid int) (int64, error) {
	return statusBytes(pid, "VmHWM")
}

// rss returns the subprocess's resident set size now (VmRSS) in bytes.
func (p *proc) rss() (int64, error) {
	return statusBytes(p.pid(), "VmRSS")
}

// statusBytes reads the kB figure field of /proc/pid/status, in bytes.
func statusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("read %s of %d: %w", field, pid, err)
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read %s of %d: parse %q: %w", field, pid, rest, err)
		}
		return kb << 10, nil
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read %s of %d: %w", field, pid, err)
	}
	return 0, fmt.Errorf("read %s of %d: no %s line", field, pid, field)
}

// waitReady polls url until it answers 200, the subprocess exits, or
// timeout passes.
func (p *proc) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("readiness of %s: %w", p.name, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("status %s", resp.Status)
		} else {
			last = err
		}
		select {
		case <-p.done:
			return p.failure()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s (last: %w)", p.name, timeout, last)
		case <-tick.C:
		}
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
