package deadletters_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/app/apptest"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/metrics"
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

// mustKafka gives the test the input topic (parts partitions) and the
// dead-letter topic: on an in-process cluster, or under names of the test's
// own on the real cluster PAYCB_TEST_KAFKA_BROKERS names.
func mustKafka(t *testing.T, parts int32) kafkaops.Kafka {
	t.Helper()
	k, _ := mustKafkaAndGroup(t, parts)
	return k
}

// mustKafkaAndGroup is mustKafka with the operators' description of the
// same cluster and the worker's group, for tests that run the worker.
func mustKafkaAndGroup(t *testing.T, parts int32) (kafkaops.Kafka, kafkaops.Kafka) {
	t.Helper()
	k := kafkaopstest.Start(t, map[string]int32{testTopic: parts, testDLQ: 1, testTopic + ".settled": 1})
	o := kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Name(testTopic), Group: k.Name(testGroup), DLQTopic: k.Name(testDLQ), Timeout: 10 * time.Second}
	return kafkaops.Kafka{Brokers: o.Brokers, Topic: o.Topic, DLQTopic: o.DLQTopic, Timeout: o.Timeout}, o
}

// mustCluster is mustKafka on an in-process cluster that it also returns,
// for tests that drive its retention.
func mustCluster(t *testing.T, parts int32) (kafkaops.Kafka, *kfake.Cluster) {
	t.Helper()
	cluster, brokers, err := inprocess.Start(map[string]int32{testTopic: parts, testDLQ: 1, testTopic + ".settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	return kafkaops.Kafka{Brokers: brokers, Topic: testTopic, DLQTopic: testDLQ, Timeout: 10 * time.Second}, cluster
}

// produceAt writes n messages to partition p of topic, stamped at.
func produceAt(t *testing.T, k kafkaops.Kafka, topic string, p, n int, at time.Time) {
	t.Helper()
	w := &kafka.Writer{
		Addr: kafka.TCP(k.Brokers...), Topic: topic, RequiredAcks: kafka.RequireAll,
		Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return p }), BatchTimeout: time.Millisecond,
	}
	defer func() { _ = w.Close() }()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("k"), Value: []byte("v"), Time: at}
	}
	require.NoError(t, w.WriteMessages(context.Background(), msgs...))
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// migratedWorker is a worker configuration on k and a fresh MariaDB
// database, migrated.
func migratedWorker(t *testing.T, k kafkaops.Kafka) (config.Config, *bun.DB) {
	t.Helper()
	cfg := config.Default()
	cfg.Kafka.Brokers, cfg.Kafka.Topic, cfg.Kafka.Group, cfg.Kafka.DLQTopic = k.Brokers, k.Topic, k.Group, k.DLQTopic
	cfg.Kafka.SessionTimeout, cfg.Kafka.HeartbeatInterval, cfg.Kafka.RebalanceTimeout = 6*time.Second, 300*time.Millisecond, 6*time.Second
	cfg.Kafka.MaxWait = 100 * time.Millisecond
	cfg.DB.DSN = config.DSN(sqldbtest.NewDatabase(t))
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.WeChat.APIv3Key = config.Secret(channelstest.APIv3Key)
	cfg.Worker.ShutdownTimeout = 10 * time.Second
	cfg.Finalize()
	require.NoError(t, cfg.ValidateFor("run", app.FileChecks()))
	db, err := sqldb.OpenMySQL(cfg.DB.DSN.Reveal())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(t, err)
	return cfg, db
}

// runWorker starts the worker on cfg and returns once it is ready
// (apptest.MustRun); the function it returns stops it and returns its
// registry.
func runWorker(t *testing.T, cfg config.Config) func() *prometheus.Registry {
	t.Helper()
	m := apptest.MustRun(t, &app.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Registry: metrics.NewRegistry()})
	return func() *prometheus.Registry {
		t.Helper()
		apptest.MustClose(t, m)
		return m.Registry
	}
}

// outcomes sums paycb_events_total by outcome.
func outcomes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
