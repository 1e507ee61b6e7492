package kafkaconn_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/kafkaconn/kafkaconntest"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
)

const (
	user     = "settlement"
	password = "Pw-9c1e-never-printed"
	topic    = "t"
)

func TestInsecureIsKafkaGoDefault(t *testing.T) {
	for name, c := range map[string]*kafkaconn.Conn{"nil": nil, "zero": mustNew(t, config.Kafka{Brokers: []string{"a:1"}})} {
		t.Run(name, func(t *testing.T) {
			assert.False(t, c.Secured())
			assert.Equal(t, *kafka.DefaultDialer, *c.Dialer())
			assert.NotSame(t, kafka.DefaultDialer, c.Dialer(), "a copy the caller may change")
			assert.Same(t, kafka.DefaultTransport, kafka.RoundTripper(c.Transport()))
			c.Close() // leaves the shared default transport alone
		})
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	pki := kafkaconntest.MustPKI(t, false)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	missing := filepath.Join(t.TempDir(), "missing.pem")
	on := func(ca, cert, key string) config.TLS {
		return config.TLS{Enabled: true, CAFile: ca, CertFile: cert, KeyFile: key}
	}
	for _, tc := range []struct {
		name string
		k    config.Kafka
		want []string
	}{
		{"unreadable CA", config.Kafka{TLS: on(missing, "", "")}, []string{"PAYCB_KAFKA_TLS_CA_FILE", missing, "no such file"}},
		{"CA without certificate", config.Kafka{TLS: on(notPEM, "", "")}, []string{"PAYCB_KAFKA_TLS_CA_FILE", notPEM, "no PEM certificate"}},
		{"certificate without key", config.Kafka{TLS: on("", pki.CertFile, "")}, []string{"PAYCB_KAFKA_TLS_KEY_FILE", "required"}},
		{"key without certificate", config.Kafka{TLS: on("", "", pki.KeyFile)}, []string{"PAYCB_KAFKA_TLS_CERT_FILE", "required"}},
		{"key not matching", config.Kafka{TLS: on("", pki.CAFile, pki.KeyFile)}, []string{"PAYCB_KAFKA_TLS_CERT_FILE", pki.CAFile, "PAYCB_KAFKA_TLS_KEY_FILE", pki.KeyFile}},
		{"TLS file while off", config.Kafka{TLS: config.TLS{CAFile: pki.CAFile}}, []string{"PAYCB_KAFKA_TLS_ENABLED", "false"}},
		{"unknown mechanism", config.Kafka{SASL: config.SASL{Mechanism: "GSSAPI", Username: user, Password: password}}, []string{"PAYCB_KAFKA_SASL_MECHANISM", `"GSSAPI"`, "SCRAM-SHA-512"}},
		{"no username", config.Kafka{SASL: config.SASL{Mechanism: config.SASLPlain, Password: password}}, []string{"PAYCB_KAFKA_SASL_USERNAME", "required"}},
		{"no password", config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: user}}, []string{"PAYCB_KAFKA_SASL_PASSWORD", "required"}},
		{"credentials without mechanism", config.Kafka{SASL: config.SASL{Username: user, Password: password}}, []string{"PAYCB_KAFKA_SASL_MECHANISM", "required"}},
		{"password SCRAM cannot use", config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA512, Username: user, Password: password + "\u0007"}}, []string{"PAYCB_KAFKA_SASL_PASSWORD", "SASLprep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kafkaconn.New(tc.k)
			require.Error(t, err)
			assert.Nil(t, c)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), password)
		})
	}
}

func TestSecuredSetting(t *testing.T) {
	pki := kafkaconntest.MustPKI(t, true)
	c := mustNew(t, config.Kafka{
		Brokers: []string{"b:9093"},
		TLS:     config.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile, ServerName: "kafka.internal"},
		SASL:    config.SASL{Mechanism: config.SASLScramSHA512, Username: user, Password: password},
	})
	require.True(t, c.Secured())
	d := c.Dialer()
	require.NotNil(t, d.TLS)
	assert.Equal(t, uint16(0x0303), d.TLS.MinVersion, "TLS 1.2 at least")
	assert.Equal(t, "kafka.internal", d.TLS.ServerName)
	assert.NotNil(t, d.TLS.RootCAs)
	assert.Len(t, d.TLS.Certificates, 1)
	require.NotNil(t, d.SASLMechanism)
	assert.Equal(t, config.SASLScramSHA512, d.SASLMechanism.Name())
	assert.Equal(t, kafka.DefaultDialer.Timeout, d.Timeout)
	tr := c.Transport()
	assert.Same(t, tr, c.Transport(), "one transport shared by every client")
	assert.Same(t, d.TLS, tr.TLS)
	assert.Equal(t, config.SASLScramSHA512, tr.SASL.Name())
	assert.Same(t, tr, c.Client(time.Second).Transport)
	assert.Equal(t, []string{"b:9093"}, c.Brokers())
}

// broker starts a kfake cluster with SASL (when mechanism is set) and TLS
// (when pki is set), and the matching client setting.
func broker(t *testing.T, mechanism string, pki *kafkaconntest.PKI) config.Kafka {
	t.Helper()
	var opts []kfake.Opt
	k := config.Kafka{}
	if mechanism != "" {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(mechanism, user, password))
		k.SASL = config.SASL{Mechanism: mechanism, Username: user, Password: password}
	}
	if pki != nil {
		opts = append(opts, kfake.TLS(pki.ServerTLS))
	}
	cluster, brokers, err := inprocess.Start(map[string]int32{topic: 2}, opts...)
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	k.Brokers = brokers
	return k
}

func TestClientsThroughSecuredBroker(t *testing.T) {
	pki := kafkaconntest.MustPKI(t, true)
	for _, tc := range []struct {
		name, mechanism string
		tls             bool
	}{
		{"PLAIN over TCP", config.SASLPlain, false},
		{"SCRAM-SHA-256 over TCP", config.SASLScramSHA256, false},
		{"SCRAM-SHA-512 over TLS with a client certificate", config.SASLScramSHA512, true},
		{"TLS alone", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p *kafkaconntest.PKI
			if tc.tls {
				p = &pki
			}
			k := broker(t, tc.mechanism, p)
			if tc.tls {
				k.TLS = config.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile}
			}
			c := mustNew(t, k)
			t.Cleanup(c.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, c.Check(ctx, 5*time.Second))

			// A writer (transport), a client and a reader (dialer).
			msgs := []kafkaops.Message{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}
			require.NoError(t, kafkaops.Produce(ctx, k.Brokers, topic, msgs, kafkaops.WithConn(c)))
			got, err := kafkaops.ReadAll(ctx, k.Brokers, topic, kafkaops.WithConn(c))
			require.NoError(t, err)
			assert.Len(t, got, 2)
		})
	}
}

func TestWrongPasswordIsRejected(t *testing.T) {
	for _, mechanism := range []string{config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512} {
		t.Run(mechanism, func(t *testing.T) {
			k := broker(t, mechanism, nil)
			k.SASL.Password = "wrong-" + password
			c := mustNew(t, k)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := c.Check(ctx, 5*time.Second)
			require.ErrorIs(t, err, kafkaconn.ErrRejected)
			assert.Contains(t, err.Error(), "kafka sasl authentication failed")
			assert.Contains(t, err.Error(), "the "+mechanism+` exchange for user "settlement"`)
			assert.Contains(t, err.Error(), "PAYCB_KAFKA_SASL_PASSWORD")
			assert.NotContains(t, err.Error(), password)
		})
	}
}

func TestUntrustedBrokerCertificateIsRejected(t *testing.T) {
	brokerPKI := kafkaconntest.MustPKI(t, false)
	other := kafkaconntest.MustPKI(t, false)
	k := broker(t, "", &brokerPKI)
	k.TLS = config.TLS{Enabled: true, CAFile: other.CAFile}
	c := mustNew(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := c.Check(ctx, 5*time.Second)
	require.ErrorIs(t, err, kafkaconn.ErrRejected)
	assert.Contains(t, err.Error(), "kafka tls: the broker's certificate is signed by an authority not in kafka.tls.ca_file")
	assert.Contains(t, err.Error(), "x509: certificate signed by unknown authority")
}

func TestBrokerCertificateForAnotherNameIsRejected(t *testing.T) {
	pki := kafkaconntest.MustPKI(t, false)
	k := broker(t, "", &pki)
	k.TLS = config.TLS{Enabled: true, CAFile: pki.CAFile, ServerName: "kafka.example"}
	err := mustNew(t, k).Check(context.Background(), 5*time.Second)
	require.ErrorIs(t, err, kafkaconn.ErrRejected)
	assert.Contains(t, err.Error(), "kafka tls: the broker's certificate is not valid for the name dialled; check kafka.tls.server_name")
}

func TestMissingClientCertificateIsRejected(t *testing.T) {
	pki := kafkaconntest.MustPKI(t, true)
	k := broker(t, "", &pki)
	k.TLS = config.TLS{Enabled: true, CAFile: pki.CAFile}
	err := mustNew(t, k).Check(context.Background(), 5*time.Second)
	require.ErrorIs(t, err, kafkaconn.ErrRejected)
	assert.Contains(t, err.Error(), "kafka tls: the broker refused the handshake")
}

func TestExplainRefusalFromBroker(t *testing.T) {
	c := mustNew(t, config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: user, Password: password}})
	err := c.Explain(fmt.Errorf("join group: %w", kafka.SASLAuthenticationFailed))
	require.ErrorIs(t, err, kafkaconn.ErrRejected)
	require.ErrorIs(t, err, kafka.SASLAuthenticationFailed)
	assert.Contains(t, err.Error(), `kafka sasl authentication failed: the brokers refused user "settlement" with SCRAM-SHA-256`)
	err = c.Explain(fmt.Errorf("handshake: %w", kafka.UnsupportedSASLMechanism))
	require.ErrorIs(t, err, kafkaconn.ErrRejected)
	assert.Contains(t, err.Error(), "do not enable mechanism SCRAM-SHA-256")
	other := errors.New("connection refused")
	assert.Same(t, other, c.Explain(other))
	assert.NoError(t, c.Explain(nil))
}

func TestPlainClientOfTLSBrokerFails(t *testing.T) {
	pki := kafkaconntest.MustPKI(t, false)
	k := broker(t, "", &pki)
	err := mustNew(t, k).Check(context.Background(), 2*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connect to kafka ["+k.Brokers[0]+"]")
}

func TestUnreachableIsNotRejected(t *testing.T) {
	k := broker(t, "", nil)
	c := mustNew(t, config.Kafka{Brokers: []string{"127.0.0.1:1"}})
	err := c.Check(context.Background(), 2*time.Second)
	require.Error(t, err)
	require.NotErrorIs(t, err, kafkaconn.ErrRejected)
	require.NoError(t, mustNew(t, k).Check(context.Background(), 5*time.Second))
}

func mustNew(tb testing.TB, k config.Kafka) *kafkaconn.Conn {
	tb.Helper()
	c, err := kafkaconn.New(k)
	require.NoError(tb, err)
	return c
}
