package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/schema"
)

// runningBinary is a `consumer run` started from the built binary.
type runningBinary struct {
	cmd   *exec.Cmd
	admin string
	mu    sync.Mutex
	logs  bytes.Buffer
	done  chan struct{}
}

func (r *runningBinary) logText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// buildConsumer builds the consumer binary into a directory of the test's.
func buildConsumer(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "consumer")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/paycallback/paycallback/cmd/consumer").CombinedOutput()
	require.NoError(t, err, "build the consumer: %s", out)
	return bin
}

// migratedDatabase returns the DSN of a database of the test's own with
// the schema migrated.
func migratedDatabase(ctx context.Context, t *testing.T) string {
	t.Helper()
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, db)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	return dsn
}

// runBinary runs `bin args…` with env to its end: its standard output
// and error, and its exit status (a failure to run it fails the test).
func runBinary(ctx context.Context, t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, state := runChild(ctx, t, bin, env, args...)
	return stdout, stderr, state.ExitCode()
}

// runChild is runBinary returning the child's state (its exit status and
// its resource usage) rather than its exit status.
func runChild(ctx context.Context, t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, state *os.ProcessState) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, "consumer %s", strings.Join(args, " "))
	}
	return out.String(), errOut.String(), cmd.ProcessState
}

// startConsumerRun starts `bin run` with env; the function it returns
// stops it with SIGTERM and requires a clean exit, once (also at cleanup).
func startConsumerRun(t *testing.T, bin string, env []string) (stop func()) {
	t.Helper()
	cmd := exec.Command(bin, "run") //nolint:noctx // stopped with SIGTERM, as an operator's would be
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			assert.NoError(t, cmd.Wait(), "consumer run exits cleanly on SIGTERM:\n%s", logs.String())
		})
	}
	t.Cleanup(stop)
	return stop
}

// startBinary starts `bin run` with env and returns once its admin server
// listens; SIGTERM stops it when the test ends, and it must exit 0 within
// a minute (else it is killed).
func startBinary(t *testing.T, bin string, env []string) *runningBinary {
	t.Helper()
	cmd := exec.Command(bin, "run")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	r := &runningBinary{cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			r.mu.Lock()
			r.logs.Write(line)
			r.logs.WriteByte('\n')
			r.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "admin server listening" {
				listening <- rec.Addr
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-r.done
		}
		assert.NoError(t, cmd.Wait(), "consumer run exits cleanly on SIGTERM:\n%s", r.logText())
	})
	select {
	case r.admin = <-listening:
	case <-r.done:
		t.Fatalf("consumer run ended before its admin server listened:\n%s", r.logText())
	case <-time.After(30 * time.Second):
		t.Fatalf("the admin server did not listen in 30s:\n%s", r.logText())
	}
	return r
}

// get reads one admin endpoint: its status and body.
func (r *runningBinary) get(t *testing.T, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.admin+path, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s answers", path)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

var (
	groupJoinedLine = regexp.MustCompile(`(?m)^paycb_group_joined ([0-9.e+-]+)$`)
	lagLine         = regexp.MustCompile(`(?m)^paycb_consumer_lag\{partition="(\d+)"\} ([0-9.e+-]+)$`)
)

// groupState is what one look at the admin endpoints shows of the group.
type groupState struct {
	ready  int
	body   string
	joined float64 // -1 when not exported
	lag    map[int]float64
}

func (r *runningBinary) look(t *testing.T) groupState {
	t.Helper()
	st := groupState{joined: -1, lag: map[int]float64{}}
	st.ready, st.body = r.get(t, "/readyz")
	code, metrics := r.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	if m := groupJoinedLine.FindStringSubmatch(metrics); m != nil {
		st.joined, _ = strconv.ParseFloat(m[1], 64)
	}
	for _, m := range lagLine.FindAllStringSubmatch(metrics, -1) {
		p, _ := strconv.Atoi(m[1])
		st.lag[p], _ = strconv.ParseFloat(m[2], 64)
	}
	return st
}

// waitFor looks at the worker until cond holds or within passes, and
// returns the state that satisfied it and when.
func (r *runningBinary) waitFor(t *testing.T, within time.Duration, what string, cond func(groupState) bool) (groupState, time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last groupState
	for {
		last = r.look(t)
		if cond(last) {
			return last, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last /readyz %d %q, paycb_group_joined %v, lag %v\nlogs:\n%s",
				what, within, last.ready, last.body, last.joined, last.lag, r.logText())
		}
		select {
		case <-tick.C:
		case <-r.done:
			t.Fatalf("consumer run ended: %s\n%s", what, r.logText())
		}
	}
}

// TestBrokerLossTurnsTheWorkerUnready runs the built binary against a kfake
// cluster, closes the cluster under it, and starts a new one on the same
// address: within 15 s of the loss (the default heartbeat interval and
// session timeout) /readyz is 503 naming why and paycb_group_joined 0;
// once the broker is back, 200 and 1 again, the lag series back and
// messages consumed.
func TestBrokerLossTurnsTheWorkerUnready(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildConsumer(ctx, t)
	topics := map[string]int32{runTopic: 2, runDLQ: 1, runSettled: 1}
	first, brokers, err := inprocess.Start(topics)
	require.NoError(t, err)
	defer first.Close()
	_, port, err := net.SplitHostPort(brokers[0])
	require.NoError(t, err)
	portN, err := strconv.Atoi(port)
	require.NoError(t, err)

	dsn := migratedDatabase(ctx, t)

	// The group's timings are the defaults: the 15 s bound is theirs.
	env := append(os.Environ(), "PAYCB_DB_DSN="+dsn, "PAYCB_KAFKA_BROKERS="+brokers[0],
		"PAYCB_KAFKA_TOPIC="+runTopic, "PAYCB_ADMIN_ADDR=127.0.0.1:0", "PAYCB_LOG_FORMAT=json",
		"PAYCB_WECHAT_APIV3_KEY="+channelstest.APIv3Key, "PAYCB_KAFKA_MAX_WAIT=100ms")
	w := startBinary(t, bin, env)

	w.waitFor(t, time.Minute, "joined: /readyz 200, paycb_group_joined 1, lag of both partitions", func(s groupState) bool {
		return s.ready == http.StatusOK && s.joined == 1 && len(s.lag) == 2
	})

	first.Close()
	lost := time.Now()
	st, at := w.waitFor(t, 15*time.Second, "the lost group seen", func(s groupState) bool {
		return s.ready == http.StatusServiceUnavailable && s.joined == 0
	})
	t.Logf("group loss seen %s after the broker closed; /readyz: %s", at.Sub(lost).Round(time.Millisecond), st.body)
	assert.Regexp(t, `consumer failed: not a member of group settlement-consumer since \S+ \(\d+s ago\): generation \d+ ended; (rejoining for \d+s|last join attempt \(\d+s ago\): [^…]+|rejoining: an attempt in flight for \d+s; the previous one failed \d+s ago: [^…]+)\n`, st.body)
	assert.Empty(t, st.lag, "the lag series went with the partitions")

	// A new cluster on the same address: the group and the topics anew.
	var second *kfake.Cluster
	deadline := time.Now().Add(30 * time.Second)
	for {
		second, _, err = inprocess.Start(topics, kfake.Ports(portN))
		if err == nil || time.Now().After(deadline) {
			break
		}
		select { // the old listener's port is being released
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	require.NoError(t, err, "a new cluster on %s", brokers[0])
	defer second.Close()
	require.NoError(t, kafkaops.Produce(ctx, brokers, runTopic, []kafkaops.Message{{Key: []byte("k"), Value: []byte("not json")}}))

	st, _ = w.waitFor(t, time.Minute, "back: /readyz 200, paycb_group_joined 1, lag of both partitions", func(s groupState) bool {
		return s.ready == http.StatusOK && s.joined == 1 && len(s.lag) == 2
	})
	assert.NotContains(t, st.body, "not a member")
	waitCtx, waitCancel := context.WithTimeout(ctx, time.Minute)
	defer waitCancel()
	require.NoError(t, kafkaops.WaitConsumed(waitCtx, brokers, "settlement-consumer", runTopic, 50*time.Millisecond, nil),
		"the worker consumes again:\n%s", w.logText())
	w.waitFor(t, 30*time.Second, "the lag read again: both partitions at 0", func(s groupState) bool {
		return s.ready == http.StatusOK && len(s.lag) == 2 && s.lag[0] == 0 && s.lag[1] == 0
	})
}
