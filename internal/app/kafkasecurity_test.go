package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/kafkaconn/kafkaconntest"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/schema"
)

const (
	saslUser     = "settlement"
	saslPassword = "Pw-51d0-never-printed"
)

// securedHarness is a harness whose broker requires SASL with mechanism
// and, when pki is set, TLS with a client certificate. It also returns the
// client setting that broker accepts.
func securedHarness(t *testing.T, mechanism string, pki *kafkaconntest.PKI) (*harness, config.Kafka) {
	t.Helper()
	opts := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser(mechanism, saslUser, saslPassword)}
	sec := config.Kafka{SASL: config.SASL{Mechanism: mechanism, Username: saslUser, Password: saslPassword}}
	if pki != nil {
		opts = append(opts, kfake.TLS(pki.ServerTLS))
		sec.TLS = config.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile}
	}
	cluster, brokers, err := inprocess.Start(map[string]int32{testTopic: 2, testDLQ: 1, testTopic + ".settled": 1}, opts...)
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	sec.Brokers = brokers
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(t, err)
	return &harness{t: t, cluster: cluster, brokers: brokers, db: db, dsn: dsn}, sec
}

// secure gives a worker's configuration the client setting sec.
func secure(sec config.Kafka) func(m *app.Main) {
	return func(m *app.Main) {
		m.Config.Kafka.TLS = sec.TLS
		m.Config.Kafka.SASL = sec.SASL
	}
}

func TestWorkerAndOperatorCommandsOnASecuredBroker(t *testing.T) {
	pki := kafkaconntest.MustPKI(t, true)
	for _, tc := range []struct {
		name, mechanism string
		tls             bool
	}{
		{"PLAIN over TCP", config.SASLPlain, false},
		{"SCRAM-SHA-256 over TCP", config.SASLScramSHA256, false},
		{"SCRAM-SHA-512 over TLS with a client certificate", config.SASLScramSHA512, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p *kafkaconntest.PKI
			if tc.tls {
				p = &pki
			}
			h, sec := securedHarness(t, tc.mechanism, p)
			conn, err := kafkaconn.New(sec)
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			s := demo.Generate(demo.StreamOptions{Seed: 13, Trades: 6})
			require.Positive(t, s.Malformed, "the stream carries a malformed message")
			msgs := make([]kafkaops.Message, len(s.Messages))
			for i, m := range s.Messages {
				msgs[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
			}
			require.NoError(t, kafkaops.Produce(ctx, sec.Brokers, testTopic, msgs, kafkaops.WithConn(conn)))

			w := h.start(secure(sec))
			require.NoError(t, kafkaops.WaitConsumed(ctx, sec.Brokers, testGroup, testTopic, 50*time.Millisecond, nil, kafkaops.WithConn(conn)))
			ps, err := kafkaops.Progress(ctx, sec.Brokers, testGroup, testTopic, kafkaops.WithConn(conn))
			require.NoError(t, err)
			var committed int64
			for _, p := range ps {
				committed += p.Committed
			}
			assert.Equal(t, int64(len(s.Messages)), committed, "every message committed")

			var settled int
			require.NoError(t, h.db.NewRaw("SELECT COUNT(*) FROM ss_channel_idempotent WHERE status = 'SETTLED'").Scan(ctx, &settled))
			assert.Equal(t, s.Events, settled, "one settled claim per event")

			// The dead letters, read by the operator command path.
			k := kafkaops.Kafka{Brokers: sec.Brokers, Topic: testTopic, Group: testGroup, DLQTopic: testDLQ, Timeout: 5 * time.Second, Conn: conn}
			ds, err := deadletters.ReadTopic(ctx, kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Topic, DLQTopic: k.DLQTopic, Timeout: k.Timeout, Conn: k.Conn}, deadletters.Filter{})
			require.NoError(t, err)
			kinds := map[string]int{}
			for _, d := range ds {
				kinds[d.Kind]++
			}
			assert.Equal(t, s.Malformed, kinds["malformed"], "the malformed message dead-lettered")
			assert.Len(t, ds, s.Malformed+s.Conflicts)

			// The sweeper's read-back of an original message.
			first, err := kafkaops.ReadAll(ctx, sec.Brokers, testTopic, kafkaops.WithConn(conn))
			require.NoError(t, err)
			orig, err := pipeline.KafkaOriginals{Brokers: sec.Brokers, Dialer: conn.Dialer()}.Original(ctx,
				idempotent.Source{Topic: testTopic, Partition: first[0].Partition, Offset: first[0].Offset})
			require.NoError(t, err)
			assert.Equal(t, first[0].Value, orig.Value)

			w.shutdown(t)
			plan, err := ops.PlanReplay(ctx, k, ops.ReplayTarget{Earliest: true})
			require.NoError(t, err, "a replay plan once the group is empty")
			assert.Equal(t, int64(len(s.Messages)), plan.TotalReplay())
		})
	}
}

func TestWorkerRefusesToStartWithAWrongSASLPassword(t *testing.T) {
	for _, mechanism := range []string{config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512} {
		t.Run(mechanism, func(t *testing.T) {
			h, sec := securedHarness(t, mechanism, nil)
			sec.SASL.Password = "wrong-" + saslPassword
			err := h.runToEnd(secure(sec))
			require.ErrorIs(t, err, kafkaconn.ErrRejected)
			assert.Contains(t, err.Error(), "kafka sasl authentication failed")
			assert.Contains(t, err.Error(), "PAYCB_KAFKA_SASL_PASSWORD")
			assert.NotContains(t, err.Error(), saslPassword)
		})
	}
}

func TestWorkerRefusesABrokerCertificateFromAnUntrustedCA(t *testing.T) {
	brokerPKI := kafkaconntest.MustPKI(t, false)
	h, sec := securedHarness(t, config.SASLScramSHA256, &brokerPKI)
	sec.TLS = config.TLS{Enabled: true, CAFile: kafkaconntest.MustPKI(t, false).CAFile}
	err := h.runToEnd(secure(sec))
	require.ErrorIs(t, err, kafkaconn.ErrRejected)
	assert.Contains(t, err.Error(), "kafka tls: the broker's certificate is signed by an authority not in kafka.tls.ca_file")
	assert.Contains(t, err.Error(), "x509: certificate signed by unknown authority")
}

func TestWorkerRefusesAnUnreadableCABundle(t *testing.T) {
	h := newHarness(t, 1)
	missing := t.TempDir() + "/missing-ca.pem"
	err := h.runToEnd(func(m *app.Main) { m.Config.Kafka.TLS = config.TLS{Enabled: true, CAFile: missing} })
	require.ErrorIs(t, err, config.ErrInvalid, "a setting at fault: consumer run exits 2")
	assert.Contains(t, err.Error(), "kafka.tls.ca_file (PAYCB_KAFKA_TLS_CA_FILE)")
	assert.Contains(t, err.Error(), missing)
}

// runToEnd runs a worker that is expected to stop by itself at start, and
// returns Run's error; it fails the test if the worker gets as far as
// joining the group.
func (h *harness) runToEnd(adjust func(m *app.Main)) error {
	h.t.Helper()
	m := &app.Main{Config: h.config(), Logger: testLogger(), Registry: metrics.NewRegistry()}
	adjust(m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := m.Run(ctx)
	require.Nil(h.t, m.Worker(), "stopped before the worker was wired")
	return err
}
