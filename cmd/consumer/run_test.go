package main

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/schema"
)

const (
	runTopic = "channel-events"
	runDLQ   = runTopic + ".dlq"
	// runSettled is the settled-event topic run checks for.
	runSettled = runTopic + ".settled"
)

// runWorld is what `consumer run` needs: an in-process broker (which, like
// many brokers, would create a topic on request) that counts JoinGroup
// requests, and a database of the test's own.
type runWorld struct {
	cluster *kfake.Cluster
	broker  string
	joins   atomic.Int64
	dsn     string
	vars    map[string]string
}

// worldOptions shape a runWorld.
type worldOptions struct {
	topics     map[string]int32 // default: the input, dead-letter and settled-event topics
	unmigrated bool             // leave the database empty
}

func newRunWorld(t *testing.T, o worldOptions) *runWorld {
	t.Helper()
	topics := o.topics
	if topics == nil {
		topics = map[string]int32{runTopic: 2, runDLQ: 1, runSettled: 1}
	}
	cluster, brokers, err := inprocess.Start(topics)
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	w := &runWorld{cluster: cluster, broker: brokers[0], dsn: sqldbtest.NewDatabase(t)}
	cluster.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		w.joins.Add(1)
		return nil, nil, false // observe only: the broker answers as usual
	})
	if !o.unmigrated {
		db, err := sqldb.OpenMySQL(w.dsn)
		require.NoError(t, err)
		defer db.Close()
		_, err = schema.Migrate(context.Background(), db)
		require.NoError(t, err)
	}
	w.vars = map[string]string{
		"PAYCB_DB_DSN":                   w.dsn,
		"PAYCB_KAFKA_BROKERS":            w.broker,
		"PAYCB_ADMIN_ADDR":               "127.0.0.1:0",
		"PAYCB_WECHAT_APIV3_KEY":         channelstest.APIv3Key,
		"PAYCB_STARTUP_TIMEOUT":          "2s",
		"PAYCB_KAFKA_SESSION_TIMEOUT":    "6s",
		"PAYCB_KAFKA_HEARTBEAT_INTERVAL": "300ms",
		"PAYCB_KAFKA_REBALANCE_TIMEOUT":  "6s",
		"PAYCB_KAFKA_MAX_WAIT":           "100ms",
		"PAYCB_SHUTDOWN_TIMEOUT":         "10s",
	}
	return w
}

// env returns the world's variables with changes applied; an empty value
// unsets the variable.
func (w *runWorld) env(changes map[string]string) func(string) (string, bool) {
	vars := maps.Clone(w.vars)
	for k, v := range changes {
		if v == "" {
			delete(vars, k)
			continue
		}
		vars[k] = v
	}
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// topicExists asks the broker afresh (a transport of its own, no cache)
// whether topic exists, without asking it to create one.
func (w *runWorld) topicExists(t *testing.T, topic string) bool {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(w.broker), Timeout: 10 * time.Second, Transport: tr}
	meta, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{topic}})
	require.NoError(t, err)
	require.Len(t, meta.Topics, 1)
	if errors.Is(meta.Topics[0].Error, kafka.UnknownTopicOrPartition) {
		return false
	}
	require.NoError(t, meta.Topics[0].Error)
	return true
}

// runConsumer runs `consumer run` to its end (a minute at most).
func runConsumer(t *testing.T, lookup func(string) (string, bool)) (stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, []string{"run"}, &out, &errOut, lookup)
	return errOut.String(), err
}

func TestRunFailsFastBeforeJoiningTheGroup(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = taken.Close() }()
	closedPort := func(t *testing.T) string {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		return addr
	}

	cases := []struct {
		name    string
		world   worldOptions
		prepare func(t *testing.T, w *runWorld) map[string]string
		code    int
		message []string
		// absent are topics that must still not exist afterwards.
		absent []string
		// within, when set, bounds how long the command may take.
		within time.Duration
	}{
		{
			// Waiting will not heal a wrong password: with a minute to
			// wait, run still gives up at once, naming the setting.
			name: "wrong database password",
			prepare: func(t *testing.T, w *runWorld) map[string]string {
				t.Helper()
				cfg, err := mysql.ParseDSN(w.dsn)
				require.NoError(t, err)
				cfg.Passwd = "not-the-password"
				return map[string]string{"PAYCB_DB_DSN": cfg.FormatDSN(), "PAYCB_STARTUP_TIMEOUT": "1m"}
			},
			code: 1,
			message: []string{
				"start-up check failed: database: access denied", "fix PAYCB_DB_DSN (root:***@tcp(",
				"waiting will not heal it", "Access denied for user",
			},
			within: 10 * time.Second,
		},
		{
			name: "unknown database",
			prepare: func(t *testing.T, w *runWorld) map[string]string {
				t.Helper()
				cfg, err := mysql.ParseDSN(w.dsn)
				require.NoError(t, err)
				cfg.DBName = "paycb_no_such_database"
				return map[string]string{"PAYCB_DB_DSN": cfg.FormatDSN(), "PAYCB_STARTUP_TIMEOUT": "1m"}
			},
			code:    1,
			message: []string{"start-up check failed: database: unknown database: fix PAYCB_DB_DSN (", "/paycb_no_such_database", "Error 1049"},
			within:  10 * time.Second,
		},
		{
			// A server that is not there yet may come: retried.
			name: "database unreachable",
			prepare: func(t *testing.T, w *runWorld) map[string]string {
				t.Helper()
				cfg, err := mysql.ParseDSN(w.dsn)
				require.NoError(t, err)
				cfg.Addr = closedPort(t)
				return map[string]string{"PAYCB_DB_DSN": cfg.FormatDSN()}
			},
			code:    1,
			message: []string{"start-up check failed: database: still failing after 2s (PAYCB_STARTUP_TIMEOUT)", "PAYCB_DB_DSN (root@tcp(127.0.0.1:", "connection refused"},
		},
		{
			name:    "schema not migrated",
			world:   worldOptions{unmigrated: true},
			code:    1,
			message: []string{"start-up check failed: schema: schema not migrated", "run `consumer migrate` first"},
		},
		{
			name:    "input topic missing",
			world:   worldOptions{topics: map[string]int32{runDLQ: 1, runSettled: 1}},
			code:    1,
			message: []string{`start-up check failed: kafka: input topic "channel-events" does not exist; this binary never creates topics`, "PAYCB_KAFKA_TOPIC"},
			absent:  []string{runTopic},
		},
		{
			name:    "dead-letter topic missing",
			world:   worldOptions{topics: map[string]int32{runTopic: 2, runSettled: 1}},
			code:    1,
			message: []string{`start-up check failed: kafka: dead-letter topic "channel-events.dlq" does not exist`, "PAYCB_KAFKA_DLQ_TOPIC"},
			absent:  []string{runDLQ},
		},
		{
			name:    "settled-event topic missing",
			world:   worldOptions{topics: map[string]int32{runTopic: 2, runDLQ: 1}},
			code:    1,
			message: []string{`start-up check failed: kafka: settled-event topic "channel-events.settled" does not exist; this binary never creates topics`, "PAYCB_SETTLED_TOPIC"},
			absent:  []string{runSettled},
		},
		{
			name: "mistyped input topic",
			prepare: func(*testing.T, *runWorld) map[string]string {
				return map[string]string{"PAYCB_KAFKA_TOPIC": "chanel-events"}
			},
			code:    1,
			message: []string{`input topic "chanel-events" does not exist`},
			absent:  []string{"chanel-events", "chanel-events.dlq"},
		},
		{
			name:  "fetch limit below the topic's max.message.bytes",
			world: worldOptions{topics: map[string]int32{runDLQ: 1, runSettled: 1}},
			prepare: func(t *testing.T, w *runWorld) map[string]string {
				t.Helper()
				require.NoError(t, w.cluster.CreateTopic(runTopic, 2, map[string]string{"max.message.bytes": "4194304"}))
				return map[string]string{"PAYCB_KAFKA_MAX_BYTES": "2097152"}
			},
			code:    1,
			message: []string{`kafka.max_bytes (PAYCB_KAFKA_MAX_BYTES) is 2097152, below the 4194304 bytes topic "channel-events" accepts (max.message.bytes)`},
		},
		{
			name: "fetch limit below the broker's default message size",
			prepare: func(*testing.T, *runWorld) map[string]string {
				return map[string]string{"PAYCB_KAFKA_MAX_BYTES": "1048576"}
			},
			code:    1,
			message: []string{"kafka.max_bytes (PAYCB_KAFKA_MAX_BYTES) is 1048576, below the 1048588 bytes"},
		},
		{
			name: "broker unreachable",
			prepare: func(t *testing.T, _ *runWorld) map[string]string {
				t.Helper()
				return map[string]string{"PAYCB_KAFKA_BROKERS": closedPort(t)}
			},
			code:    1,
			message: []string{"start-up check failed: kafka: still failing after 2s (PAYCB_STARTUP_TIMEOUT)"},
		},
		{
			name: "admin address in use",
			prepare: func(*testing.T, *runWorld) map[string]string {
				return map[string]string{"PAYCB_ADMIN_ADDR": taken.Addr().String()}
			},
			code:    1,
			message: []string{"start-up check failed: admin: admin listen " + taken.Addr().String(), "address already in use", "PAYCB_ADMIN_ADDR"},
		},
		{
			name:    "no APIv3 key while WeChat is accepted",
			prepare: func(*testing.T, *runWorld) map[string]string { return map[string]string{"PAYCB_WECHAT_APIV3_KEY": ""} },
			code:    2,
			message: []string{"start-up check failed: wechat: invalid configuration: no APIv3 key is set while WECHAT is in worker.channels (PAYCB_CHANNELS)"},
		},
		{
			name:    "an invalid value",
			prepare: func(*testing.T, *runWorld) map[string]string { return map[string]string{"PAYCB_SWEEP_INTERVAL": "1ns"} },
			code:    2,
			message: []string{"PAYCB_SWEEP_INTERVAL"},
		},
		{
			name: "a value that does not parse",
			prepare: func(*testing.T, *runWorld) map[string]string {
				return map[string]string{"PAYCB_STARTUP_TIMEOUT": "soon"}
			},
			code:    2,
			message: []string{"PAYCB_STARTUP_TIMEOUT"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newRunWorld(t, tc.world)
			var changes map[string]string
			if tc.prepare != nil {
				changes = tc.prepare(t, w)
			}
			start := time.Now()
			stderr, err := runConsumer(t, w.env(changes))
			require.Error(t, err, "stderr:\n%s", stderr)
			assert.Equal(t, tc.code, exitCode(err), "%v", err)
			assert.NotContains(t, err.Error(), "\n", "one line")
			for _, m := range tc.message {
				assert.Contains(t, err.Error(), m)
			}
			assert.NotContains(t, err.Error()+stderr, "not-the-password", "the password is never printed")
			assert.Zero(t, w.joins.Load(), "the instance never joined the group")
			assert.Less(t, time.Since(start), 20*time.Second, "no shutdown cap is spent")
			if tc.within > 0 {
				assert.Less(t, time.Since(start), tc.within, "gave up at once")
			}
			for _, topic := range tc.absent {
				assert.False(t, w.topicExists(t, topic), "topic %s was created", topic)
			}
		})
	}
}

// signalWriter is a log destination that closes seen when a line holds
// want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (s *signalWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if strings.Contains(s.buf.String(), s.want) {
		s.once.Do(func() { close(s.seen) })
	}
	return len(p), nil
}

func (s *signalWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func TestRunStopsAtOnceWhenSignalledDuringTheStartupChecks(t *testing.T) {
	w := newRunWorld(t, worldOptions{})
	cfg, err := mysql.ParseDSN(w.dsn)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.Addr = l.Addr().String() // refuses connections once closed: retried
	require.NoError(t, l.Close())
	lookup := w.env(map[string]string{"PAYCB_DB_DSN": cfg.FormatDSN(), "PAYCB_STARTUP_TIMEOUT": "1m"})

	logs := &signalWriter{want: "attempt=2", seen: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run"}, &bytes.Buffer{}, logs, lookup) }()
	select {
	case <-logs.seen:
	case err := <-done:
		t.Fatalf("run returned before retrying: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no second attempt logged:\n%s", logs.String())
	}
	assert.Contains(t, logs.String(), `level=WARN msg="start-up check failed; retrying" check=database attempt=1 retry_in=250ms`)

	cancel() // SIGTERM
	stopped := time.Now()
	select {
	case err := <-done:
		require.NoError(t, err, "a signal is a normal stop")
	case <-time.After(5 * time.Second):
		t.Fatal("the start-up checks did not stop at once")
	}
	assert.Less(t, time.Since(stopped), 2*time.Second)
	assert.Zero(t, w.joins.Load(), "the instance never joined the group")
}

func TestRunStartsWhenEveryCheckPasses(t *testing.T) {
	// Without any APIv3 key, but WeChat is not accepted: nothing to refuse.
	w := newRunWorld(t, worldOptions{})
	lookup := w.env(map[string]string{"PAYCB_WECHAT_APIV3_KEY": "", "PAYCB_CHANNELS": "ALIPAY,SQB", "PAYCB_ADMIN_PPROF": "true"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &signalWriter{want: "admin server listening", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run"}, &bytes.Buffer{}, logs, lookup) }()

	// The instance joins and consumes: an undecodable message is
	// dead-lettered and committed past.
	require.NoError(t, kafkaops.Produce(context.Background(), []string{w.broker}, runTopic,
		[]kafkaops.Message{{Key: []byte("k"), Value: []byte("not json")}}))
	waitCtx, waitCancel := context.WithTimeout(context.Background(), time.Minute)
	defer waitCancel()
	err := kafkaops.WaitConsumed(waitCtx, []string{w.broker}, "settlement-consumer", runTopic, 50*time.Millisecond, nil)
	require.NoError(t, err, "logs:\n%s", logs.String())
	assert.Positive(t, w.joins.Load(), "the instance joined the group")
	dead, err := kafkaops.ReadAll(context.Background(), []string{w.broker}, runDLQ)
	require.NoError(t, err)
	assert.Len(t, dead, 1)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "logs:\n%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
	assert.NotContains(t, logs.String(), "start-up check", "every check passed at once")

	// Among the first lines, the engine, told by what the server is.
	line := `msg="database engine" ` + serverEngine(t, w.dsn).String() + "\n"
	assert.Contains(t, logs.String(), line)
	engineAt, startAt := strings.Index(logs.String(), line), strings.Index(logs.String(), `msg="starting worker"`)
	assert.True(t, engineAt >= 0 && engineAt < startAt, "the engine is said before the worker starts:\n%s", logs.String())
}

// serverEngine is what the server of dsn is, checked against
// TEST_MYSQL_ENGINE; on MariaDB and MySQL its version is VERSION().
func serverEngine(t *testing.T, dsn string) dbengine.Info {
	t.Helper()
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	defer db.Close()
	info := sqldbtest.Engine(t, db)
	if info.Engine != dbengine.TiDB {
		var version string
		require.NoError(t, db.QueryRowContext(context.Background(), "SELECT VERSION()").Scan(&version))
		require.Equal(t, version, info.Version)
	}
	return info
}

// TestMigratePrintsTheEngineFirst: `consumer migrate` says first what the
// server is ("engine=mariadb version=10.11…" on the test server), then
// what it applied.
func TestMigratePrintsTheEngineFirst(t *testing.T) {
	w := newRunWorld(t, worldOptions{unmigrated: true})
	want := serverEngine(t, w.dsn)
	for _, then := range []string{"applied migrations [", "schema is current"} {
		var out, errOut bytes.Buffer
		require.NoError(t, run(context.Background(), []string{"migrate"}, &out, &errOut, w.env(nil)), "stderr:\n%s", errOut.String())
		lines := strings.Split(out.String(), "\n")
		require.GreaterOrEqual(t, len(lines), 2, out.String())
		assert.Equal(t, want.String(), lines[0])
		if sqldbtest.ExpectedEngine() == dbengine.MariaDB {
			assert.Regexp(t, `^engine=mariadb version=\d+\.\d+\.\d+-MariaDB`, lines[0])
		}
		assert.True(t, strings.HasPrefix(lines[1], then), out.String())
	}
}

// TestMigrateGivesUpAtOnceOnAWrongPassword: migrate retries nothing; a
// refused password exits 1 at once, naming PAYCB_DB_DSN without the
// password.
func TestMigrateGivesUpAtOnceOnAWrongPassword(t *testing.T) {
	w := newRunWorld(t, worldOptions{unmigrated: true})
	cfg, err := mysql.ParseDSN(w.dsn)
	require.NoError(t, err)
	cfg.Passwd = "not-the-password"
	var out, errOut bytes.Buffer
	start := time.Now()
	err = run(context.Background(), []string{"migrate"}, &out, &errOut, w.env(map[string]string{"PAYCB_DB_DSN": cfg.FormatDSN()}))
	require.Error(t, err)
	assert.Equal(t, 1, exitCode(err), "%v", err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Contains(t, err.Error(), "access denied")
	assert.Contains(t, err.Error(), "fix PAYCB_DB_DSN (root:***@tcp(")
	assert.NotContains(t, err.Error()+out.String()+errOut.String(), "not-the-password")
}
