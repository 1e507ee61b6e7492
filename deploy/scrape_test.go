package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/app/apptest"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/schema"
)

// syncBuffer is a bytes.Buffer safe for a process's output and a test's
// failure message at once.
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

const topic, group = "channel-events", "settlement-consumer"

// startWorker runs the worker through app.Main against an in-process Kafka
// and a MariaDB database of its own, feeds it stream, and returns its admin
// address once every message is consumed.
func startWorker(t *testing.T, stream demo.Stream) string {
	t.Helper()
	w := runWorker(t, 2, nil)
	msgs := make([]kafkaops.Message, len(stream.Messages))
	for i, msg := range stream.Messages {
		msgs[i] = kafkaops.Message{Key: msg.Key, Value: msg.Value}
	}
	require.NoError(t, kafkaops.Produce(context.Background(), w.brokers, topic, msgs))
	w.waitConsumed(t)
	return w.addr
}

// runningWorker is a worker started by runWorker: its admin address, its
// brokers and its database's DSN.
type runningWorker struct {
	addr    string
	brokers []string
	dsn     string
}

// waitConsumed waits until the group has committed every partition to
// its end.
func (w runningWorker) waitConsumed(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, kafkaops.WaitConsumed(ctx, w.brokers, group, topic, 50*time.Millisecond, nil))
}

// runWorker runs the worker through app.Main against an in-process Kafka
// whose input topic has partitions partitions and a MariaDB database of
// its own; adjust may change the configuration first. It returns once the
// admin server listens.
func runWorker(t *testing.T, partitions int32, adjust func(*config.Config)) runningWorker {
	t.Helper()
	cluster, brokers, err := inprocess.Start(map[string]int32{topic: partitions, topic + ".dlq": 1, topic + ".settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(t, err)

	cfg := config.Default()
	cfg.Kafka.Brokers, cfg.Kafka.Topic, cfg.Kafka.Group = brokers, topic, group
	cfg.Kafka.SessionTimeout, cfg.Kafka.HeartbeatInterval, cfg.Kafka.RebalanceTimeout = 6*time.Second, 300*time.Millisecond, 6*time.Second
	cfg.Kafka.MaxWait = 100 * time.Millisecond
	cfg.DB.DSN = config.DSN(dsn)
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.WeChat.APIv3Key = config.Secret(channelstest.APIv3Key)
	cfg.Worker.SweepInterval = 200 * time.Millisecond
	cfg.Worker.ShutdownTimeout = 10 * time.Second
	if adjust != nil {
		adjust(&cfg)
	}
	cfg.Finalize()
	require.NoError(t, cfg.ValidateFor("run", app.FileChecks()))

	m := apptest.MustRun(t, &app.Main{
		Config: cfg, Logger: slog.New(slog.DiscardHandler), Registry: metrics.NewRegistry(),
		StatementMetricsRefresh: 100 * time.Millisecond,
	})
	var addr string
	poll(t, 10*time.Second, "the admin server to listen", func() (bool, string) {
		if a := m.Admin().Addr(); a != nil {
			addr = a.String()
			return true, ""
		}
		return false, "no address yet"
	})
	return runningWorker{addr: addr, brokers: brokers, dsn: dsn}
}

// startPrometheus runs Debian's prometheus server scraping target every
// second with the project's alerting rules loaded, and returns its base URL.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs("prometheus/rules.yml")
	require.NoError(t, err)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: paycallback
    static_configs:
      - targets: [%q]
`, rules, target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	listen := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	base := "http://" + listen
	poll(t, 30*time.Second, "prometheus to be ready", func() (bool, string) {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return base
}

// query runs an instant PromQL query and returns the single sample's value;
// ok is false when the result is not exactly one sample.
func query(base, q string) (float64, bool, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, false, fmt.Errorf("query %s: %w", q, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, false, fmt.Errorf("query %s: decode: %w", q, err)
	}
	if body.Status != "success" {
		return 0, false, fmt.Errorf("query %s: %s", q, body.Error)
	}
	if len(body.Data.Result) != 1 {
		return 0, false, nil
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("query %s: value %q: %w", q, s, err)
	}
	return v, true, nil
}

// poll checks cond every 100ms until it holds or timeout passes; cond
// returns why it does not hold yet, for the failure message.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
		}
		<-tick.C
	}
}

// TestPrometheusScrapesTheWorker runs the real thing: Debian's Prometheus
// server scrapes a running worker, with the alerting rules loaded, and the
// contract's metrics are read back through its query API.
func TestPrometheusScrapesTheWorker(t *testing.T) {
	bin := requireTool(t, "prometheus")
	stream := demo.Generate(demo.StreamOptions{Seed: 3, Trades: 12})
	require.Positive(t, stream.Conflicts)
	require.Positive(t, stream.Malformed)
	target := startWorker(t, stream)
	base := startPrometheus(t, bin, target)

	want := []struct {
		query string
		check func(v float64) bool
		want  string
	}{
		{`up{job="paycallback"}`, func(v float64) bool { return v == 1 }, "1"},
		{`sum(paycb_events_total{job="paycallback"})`, func(v float64) bool { return v == float64(len(stream.Messages)) }, strconv.Itoa(len(stream.Messages))},
		{`sum(paycb_events_total{job="paycallback",outcome="acquired"})`, func(v float64) bool { return v == float64(stream.Events) }, strconv.Itoa(stream.Events)},
		{`sum(paycb_dead_letters_total{job="paycallback",kind="conflict"})`, func(v float64) bool { return v == float64(stream.Conflicts) }, strconv.Itoa(stream.Conflicts)},
		{`sum(paycb_dead_letters_total{job="paycallback",kind="malformed"})`, func(v float64) bool { return v == float64(stream.Malformed) }, strconv.Itoa(stream.Malformed)},
		{`sum(paycb_settle_total{job="paycallback",outcome="POSTED"})`, func(v float64) bool { return v > 0 }, "> 0"},
		{`sum(paycb_processing_errors_total{job="paycallback"})`, func(v float64) bool { return v >= 0 }, "present"},
		{`paycb_orphan_claims{job="paycallback"}`, func(v float64) bool { return v == 0 }, "0"},
		{`sum(paycb_settle_duration_seconds_count{job="paycallback"})`, func(v float64) bool { return v == float64(stream.Events) }, strconv.Itoa(stream.Events)},
		{`count(paycb_consumer_lag{job="paycallback"})`, func(v float64) bool { return v == 2 }, "2 partitions"},
		{`sum(paycb_consumer_lag{job="paycallback"})`, func(v float64) bool { return v == 0 }, "0"},
		{`count(ALERTS{alertname=~"Paycb.*"}) or vector(0)`, func(float64) bool { return true }, "rules evaluate"},
	}
	for _, w := range want {
		poll(t, 30*time.Second, w.query+" = "+w.want, func() (bool, string) {
			v, ok, err := query(base, w.query)
			switch {
			case err != nil:
				return false, err.Error()
			case !ok:
				return false, "no single sample"
			default:
				return w.check(v), fmt.Sprint("got ", v)
			}
		})
	}

	// The rules file loaded into the real server, every rule healthy.
	ruleCount := readAlertingRules(t).count()
	require.Positive(t, ruleCount)
	poll(t, 30*time.Second, "the alerting rules to be loaded and evaluated", func() (bool, string) {
		resp, err := http.Get(base + "/api/v1/rules?type=alert")
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		var body struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, g := range body.Data.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return false, fmt.Sprintf("rule %s: %s %s", r.Name, r.Health, r.LastError)
				}
				n++
			}
		}
		return n == ruleCount, fmt.Sprintf("%d healthy rules of %d", n, ruleCount)
	})
}
