package main

import (
	"context"
	"os"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/kafkaconn/kafkaconntest"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/pkg/channels"
)

func TestOperatorCommandsOnASecuredBroker(t *testing.T) {
	const user, password = "operator", "Pw-c0ffee-never-printed"
	pki := kafkaconntest.MustPKI(t, true)
	cluster, brokers, err := inprocess.Start(map[string]int32{"channel-events": 2, "channel-events.dlq": 1, "channel-events.settled": 1},
		kfake.EnableSASL(), kfake.Superuser(config.SASLScramSHA512, user, password), kfake.TLS(pki.ServerTLS))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	passwordFile := t.TempDir() + "/sasl-password"
	require.NoError(t, os.WriteFile(passwordFile, []byte(password+"\n"), 0o600))
	vars := map[string]string{
		"PAYCB_KAFKA_BROKERS":            brokers[0],
		"PAYCB_LOG_LEVEL":                "warn",
		"PAYCB_KAFKA_TLS_ENABLED":        "true",
		"PAYCB_KAFKA_TLS_CA_FILE":        pki.CAFile,
		"PAYCB_KAFKA_TLS_CERT_FILE":      pki.CertFile,
		"PAYCB_KAFKA_TLS_KEY_FILE":       pki.KeyFile,
		"PAYCB_KAFKA_SASL_MECHANISM":     config.SASLScramSHA512,
		"PAYCB_KAFKA_SASL_USERNAME":      user,
		"PAYCB_KAFKA_SASL_PASSWORD_FILE": passwordFile,
	}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }

	// Seed through the same setting: a message to replay and a dead letter.
	cfg := config.Kafka{
		Brokers: brokers,
		TLS:     config.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile},
		SASL:    config.SASL{Mechanism: config.SASLScramSHA512, Username: user, Password: password},
	}
	conn, err := kafkaconn.New(cfg)
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	ctx := context.Background()
	require.NoError(t, kafkaops.Produce(ctx, brokers, "channel-events", []kafkaops.Message{{Key: []byte("SQB:a"), Value: []byte("{}")}}, kafkaops.WithConn(conn)))
	dl := deadletters.NewKafkaWriter(brokers, "channel-events.dlq", 0, deadletters.WithTransport(conn.Transport()))
	t.Cleanup(func() { _ = dl.Close() })
	require.NoError(t, dl.DeadLetter(ctx, kafka.Message{Topic: "channel-events", Partition: 1, Offset: 7, Key: []byte("WECHAT:T-1"), Value: []byte("{")},
		channels.KindMalformed, "unexpected end of JSON input"))

	out, _, err := runCmd(t, lookup, "dlq", "list")
	require.NoError(t, err, out)
	assert.Contains(t, out, "dead letters in channel-events.dlq: 1")
	assert.Regexp(t, `WECHAT:T-1\s+channel-events/1@7`, out)

	out, _, err = runCmd(t, lookup, "replay", "--to-earliest", "--dry-run")
	require.NoError(t, err, out)
	assert.Regexp(t, `\n\s+1\s+none\s+0\s+0\s+1\s`, out, "partition 1 read through TLS and SASL: first 0, end 1")
	assert.Contains(t, out, "dry run: nothing committed")

	t.Run("wrong password", func(t *testing.T) {
		require.NoError(t, os.WriteFile(passwordFile, []byte("wrong-"+password), 0o600))
		out, _, err := runCmd(t, lookup, "dlq", "list")
		require.ErrorIs(t, err, kafkaconn.ErrRejected, out)
		assert.Equal(t, 1, exitCode(err))
		assert.Contains(t, err.Error(), `kafka sasl authentication failed`)
		assert.Contains(t, err.Error(), `user "operator"`)
		assert.NotContains(t, err.Error()+out, password)
	})
	t.Run("untrusted broker certificate", func(t *testing.T) {
		require.NoError(t, os.WriteFile(passwordFile, []byte(password), 0o600))
		vars["PAYCB_KAFKA_TLS_CA_FILE"] = kafkaconntest.MustPKI(t, false).CAFile
		_, _, err := runCmd(t, lookup, "replay", "--to-earliest", "--dry-run")
		require.ErrorIs(t, err, kafkaconn.ErrRejected)
		assert.Contains(t, err.Error(), "kafka tls: the broker's certificate is signed by an authority not in kafka.tls.ca_file")
	})
}
