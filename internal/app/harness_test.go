package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/app/apptest"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/invariant"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/schema"
)

const (
	testTopic = "channel-events"
	testGroup = "settlement-consumer"
	testDLQ   = testTopic + ".dlq"
)

// harness is one test's world: a Kafka of its own (an in-process kfake
// cluster, or uniquely named topics and group on the real cluster
// PAYCB_TEST_KAFKA_BROKERS names), a MariaDB database of its own, and
// workers started through app.Main as production starts them.
type harness struct {
	t       *testing.T
	cluster *kfake.Cluster // nil on a real cluster
	brokers []string
	db      *bun.DB // the test's own view of the database
	dsn     string
	// kafka names the test's topics and group; nil means the package's
	// constants on a kfake cluster of the test's own.
	kafka *kafkaopstest.Kafka
}

func newHarness(t *testing.T, partitions int32) *harness {
	t.Helper()
	k := kafkaopstest.Start(t, map[string]int32{testTopic: partitions, testDLQ: 1, testTopic + ".settled": 1})
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(t, err)
	return &harness{t: t, cluster: k.Fake, brokers: k.Brokers, db: db, dsn: dsn, kafka: k}
}

// name is the test's name for base, one of testTopic, testGroup, testDLQ.
func (h *harness) name(base string) string {
	if h.kafka == nil {
		return base
	}
	return h.kafka.Name(base)
}

// topic, group and dlq are the test's input topic, consumer group and
// dead-letter topic.
func (h *harness) topic() string { return h.name(testTopic) }
func (h *harness) group() string { return h.name(testGroup) }
func (h *harness) dlq() string   { return h.name(testDLQ) }

func (h *harness) config() config.Config {
	cfg := config.Default()
	cfg.Kafka.Brokers = h.brokers
	cfg.Kafka.Topic = h.topic()
	cfg.Kafka.Group = h.group()
	cfg.Kafka.SessionTimeout = 6 * time.Second
	cfg.Kafka.HeartbeatInterval = 300 * time.Millisecond
	cfg.Kafka.RebalanceTimeout = 6 * time.Second
	cfg.Kafka.MaxWait = 100 * time.Millisecond
	cfg.DB.DSN = config.DSN(h.dsn)
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.WeChat.APIv3Key = config.Secret(channelstest.APIv3Key)
	cfg.Worker.RetryBackoffMin = 20 * time.Millisecond
	cfg.Worker.RetryBackoffMax = 200 * time.Millisecond
	cfg.Worker.SweepInterval = 200 * time.Millisecond
	cfg.Worker.ShutdownTimeout = 10 * time.Second
	if v := os.Getenv("PAYCB_TEST_BATCH_MAX"); v != "" {
		// The batch size to run the suite at (one pipeline whatever the
		// size; PAYCB_TEST_BATCH_MAX=1 runs it on batches of one).
		n, err := strconv.Atoi(v)
		require.NoError(h.t, err, "PAYCB_TEST_BATCH_MAX")
		cfg.Worker.BatchMax = n
	}
	cfg.Finalize()
	require.NoError(h.t, cfg.ValidateFor("run", app.FileChecks()))
	return cfg
}

// running is a started worker.
type running struct {
	main *app.Main
}

// start runs a worker; adjust may change its Main before it starts.
func (h *harness) start(adjust func(m *app.Main)) *running {
	h.t.Helper()
	m := &app.Main{Config: h.config(), Logger: testLogger(), Registry: metrics.NewRegistry()}
	if adjust != nil {
		adjust(m)
	}
	return &running{main: apptest.MustRun(h.t, m)}
}

// stop begins a graceful shutdown, as SIGTERM would, without waiting.
func (r *running) stop() { apptest.Signal(r.main) }

// shutdown stops the worker gracefully and waits for Run to return.
func (r *running) shutdown(t *testing.T) {
	t.Helper()
	apptest.MustClose(t, r.main)
}

func (h *harness) produce(msgs []demo.Message) {
	h.t.Helper()
	out := make([]kafkaops.Message, len(msgs))
	for i, m := range msgs {
		out[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
	}
	require.NoError(h.t, kafkaops.Produce(context.Background(), h.brokers, h.topic(), out))
}

func (h *harness) waitConsumed(timeout time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(h.t, kafkaops.WaitConsumed(ctx, h.brokers, h.group(), h.topic(), 50*time.Millisecond, nil))
}

func (h *harness) committed() map[int]int64 {
	h.t.Helper()
	ps, err := kafkaops.Progress(context.Background(), h.brokers, h.group(), h.topic())
	require.NoError(h.t, err)
	out := map[int]int64{}
	for _, p := range ps {
		out[p.Partition] = p.Committed
	}
	return out
}

// checkStream asserts, with the one invariant checker the simulation and
// the soak use, what a fully consumed stream must leave: one SETTLED claim
// per distinct event and none for anything else, each POSTED claim posted
// exactly once, a consistent ledger, every tenant's merchant_payable net
// credit equal to paid minus refunded, and the stream's malformed and
// conflicting messages in the dead-letter topic.
func (h *harness) checkStream(s demo.Stream) {
	h.t.Helper()
	rep, err := invariant.Check(context.Background(), h.db, h.brokers, h.dlq(), s)
	require.NoError(h.t, err)
	require.NoError(h.t, rep.Err())
	assert.Equal(h.t, s.Events, rep.Claims, "one claim per distinct event")
	assert.Zero(h.t, rep.Acquired, "no claim left ACQUIRED")
}

// deadLetters reads the dead-letter topic.
func (h *harness) deadLetters() []kafka.Message {
	h.t.Helper()
	msgs, err := kafkaops.ReadAll(context.Background(), h.brokers, h.dlq())
	require.NoError(h.t, err)
	return msgs
}

func header(m kafka.Message, key string) string {
	for _, hd := range m.Headers {
		if hd.Key == key {
			return string(hd.Value)
		}
	}
	return ""
}

// counted sums a metric family's samples whose labels include want.
func counted(t *testing.T, m *app.Main, family string, want map[string]string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	metric:
		for _, mt := range mf.GetMetric() {
			for k, v := range want {
				found := false
				for _, l := range mt.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			sum += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	return sum
}

func testLogger() *slog.Logger {
	if os.Getenv("PAYCB_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// blockOnce returns a fault that blocks the first n messages reaching point
// until their context ends, as a process that died there would, and reports
// each hit on hits.
func blockOnce(point pipeline.FaultPoint, n int, hits chan<- struct{}) pipeline.FaultFunc {
	remaining := make(chan struct{}, n)
	for range n {
		remaining <- struct{}{}
	}
	return func(ctx context.Context, p pipeline.FaultPoint) error {
		if p != point {
			return nil
		}
		select {
		case <-remaining:
		default:
			return nil
		}
		hits <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("simulated crash at %s: %w", p, errors.Join(ctx.Err()))
	}
}
