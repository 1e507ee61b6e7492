package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// binaryWorld is the built consumer binary, an in-process broker and a
// database of the test's own, as an operator has them.
type binaryWorld struct {
	t       *testing.T
	bin     string
	brokers []string
	cluster *kfake.Cluster
	env     []string
}

func newBinaryWorld(t *testing.T) *binaryWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildConsumer(ctx, t)
	cluster, brokers, err := inprocess.Start(map[string]int32{runTopic: 2, runDLQ: 1, runTopic + ".settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	w := &binaryWorld{t: t, bin: bin, brokers: brokers, cluster: cluster}
	w.env = append(os.Environ(), "PAYCB_KAFKA_BROKERS="+brokers[0], "PAYCB_DB_DSN="+sqldbtest.NewDatabase(t),
		"PAYCB_ADMIN_ADDR=127.0.0.1:0", "PAYCB_WECHAT_APIV3_KEY="+channelstest.APIv3Key, "PAYCB_LOG_LEVEL=warn",
		"PAYCB_KAFKA_SESSION_TIMEOUT=6s", "PAYCB_KAFKA_HEARTBEAT_INTERVAL=300ms", "PAYCB_KAFKA_REBALANCE_TIMEOUT=6s",
		"PAYCB_KAFKA_MAX_WAIT=100ms", "PAYCB_SHUTDOWN_TIMEOUT=10s")
	if _, code, errOut := w.consumer("migrate"); code != 0 {
		t.Fatalf("consumer migrate: exit %d: %s", code, errOut)
	}
	return w
}

// consumer runs the binary with args to its end.
func (w *binaryWorld) consumer(args ...string) (stdout string, code int, stderr string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, stderr, code = runBinary(ctx, w.t, w.bin, w.env, args...)
	return stdout, code, stderr
}

// startWorker starts `consumer run`; the function it returns stops it with
// SIGTERM and waits for a clean exit (also at cleanup).
func (w *binaryWorld) startWorker() (stop func()) {
	w.t.Helper()
	return startConsumerRun(w.t, w.bin, w.env)
}

// waitConsumed waits until the group has consumed the input topic to its
// end.
func (w *binaryWorld) waitConsumed() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(w.t, kafkaops.WaitConsumed(ctx, w.brokers, "settlement-consumer", runTopic, 50*time.Millisecond, nil))
}

// listed is one dead letter of `dlq list --json`.
type listedLetter struct {
	ID           string `json:"id"`
	At           string `json:"at"`
	Kind         string `json:"kind"`
	Status       string `json:"status"`
	BodyLost     bool   `json:"body_lost"`
	Recorded     bool   `json:"recorded"`
	RedrivenFrom string `json:"redriven_from"`
	Successor    string `json:"successor"`
	Source       string `json:"source"`
	CloseNote    string `json:"close_note"`
}

func (w *binaryWorld) list() []listedLetter {
	w.t.Helper()
	out, code, errOut := w.consumer("dlq", "list", "--json")
	require.Equal(w.t, 0, code, "dlq list: %s", errOut)
	var doc struct {
		DeadLetters []listedLetter `json:"dead_letters"`
	}
	require.NoError(w.t, json.Unmarshal([]byte(out), &doc), out)
	return doc.DeadLetters
}

// dropDeadLetterRecords lets the dead-letter topic's retention remove every
// record it holds.
func (w *binaryWorld) dropDeadLetterRecords() {
	w.t.Helper()
	ctx := context.Background()
	client := &kafka.Client{Addr: kafka.TCP(w.brokers...), Timeout: 10 * time.Second}
	setRetention := func(v string) {
		_, err := client.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: runDLQ,
			Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: v}},
		}}})
		require.NoError(w.t, err)
	}
	end, err := kafkaops.ListOffsets(ctx, client, runDLQ, []int{0}, kafka.LastOffset)
	require.NoError(w.t, err)
	setRetention("1")
	require.Eventually(w.t, func() bool {
		w.cluster.ApplyRetention()
		first, err := kafkaops.ListOffsets(ctx, client, runDLQ, []int{0}, kafka.FirstOffset)
		return err == nil && first[0] == end[0]
	}, 10*time.Second, 20*time.Millisecond, "retention did not remove the dead letters")
	setRetention("604800000")
}

// TestDeadLettersThroughTheBinary runs the operator's dead-letter flow
// through the real binary: a conflict dead letter redriven by its id fails
// again and leaves exactly one open dead letter linked to the original
// (shown redriven); once the dead-letter topic's retention removed them,
// every dead letter is still listed with its id, from its row, saying its
// body is lost; one is shown and closed by its id, and its redrive refused.
func TestDeadLettersThroughTheBinary(t *testing.T) {
	w := newBinaryWorld(t)
	alipay := channelstest.NewTrade(channels.Alipay, 2)
	conflicting := alipay
	conflicting.Total = alipay.Total + 100
	require.NoError(t, kafkaops.Produce(context.Background(), w.brokers, runTopic, []kafkaops.Message{
		{Key: []byte("junk"), Value: []byte("not an envelope")},
		{Key: []byte("ALIPAY:" + alipay.TradeNo), Value: channelstest.PaymentEnvelope(alipay, channelstest.Delivery{})},
		{Key: []byte("ALIPAY:" + alipay.TradeNo), Value: channelstest.PaymentEnvelope(conflicting, channelstest.Delivery{})},
	}))
	stop := w.startWorker()
	w.waitConsumed()

	byKind := func(ls []listedLetter) map[string][]listedLetter {
		out := map[string][]listedLetter{}
		for _, l := range ls {
			out[l.Kind] = append(out[l.Kind], l)
		}
		return out
	}
	first := byKind(w.list())
	require.Len(t, first["conflict"], 1)
	require.Len(t, first["malformed"], 1)
	conflict, malformed := first["conflict"][0], first["malformed"][0]
	assert.Equal(t, "open", conflict.Status)
	assert.True(t, conflict.Recorded)
	assert.NotEmpty(t, conflict.ID)

	out, code, errOut := w.consumer("dlq", "redrive", "--id", conflict.ID)
	require.Equal(t, 0, code, "dlq redrive --id: %s\n%s", out, errOut)
	assert.Contains(t, out, "published 1 messages to "+runTopic)
	w.waitConsumed()
	stop()

	second := byKind(w.list())
	require.Len(t, second["conflict"], 2, "the redrive failed again")
	var original, again listedLetter
	for _, l := range second["conflict"] {
		if l.ID == conflict.ID {
			original = l
		} else {
			again = l
		}
	}
	assert.Equal(t, "redriven", original.Status, "the original is resolved as redriven")
	assert.Equal(t, again.ID, original.Successor)
	assert.Equal(t, "open", again.Status, "exactly one open dead letter for the original message")
	assert.Equal(t, runDLQ+"/0@"+strings.TrimPrefix(conflict.At, "0:"), again.RedrivenFrom, "the new dead letter keeps x-redriven-from")
	out, code, _ = w.consumer("dlq", "show", "--id", again.ID)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "x-redriven-from: "+again.RedrivenFrom)

	w.dropDeadLetterRecords()
	third := w.list()
	require.Len(t, third, 3, "listed from their rows")
	statuses := map[string]string{}
	for _, l := range third {
		assert.True(t, l.BodyLost, l.ID)
		assert.Empty(t, l.At, l.ID)
		statuses[l.ID] = l.Status
	}
	assert.Equal(t, map[string]string{malformed.ID: "open", original.ID: "redriven", again.ID: "open"}, statuses, "the same ids and statuses")
	out, code, _ = w.consumer("dlq", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "body lost (no longer in "+runDLQ)

	out, code, _ = w.consumer("dlq", "show", "--id", malformed.ID)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "LOST")
	assert.Contains(t, out, "status:   open")
	out, code, errOut = w.consumer("dlq", "redrive", "--id", malformed.ID)
	assert.Equal(t, 4, code, "refused: %s\n%s", out, errOut)
	assert.Contains(t, out, "no longer holds the dead letter")
	assert.Contains(t, out, "nothing published")
	out, code, errOut = w.consumer("dlq", "close", "--id", malformed.ID, "--note", "retention passed; nothing to redrive")
	require.Equal(t, 0, code, "dlq close --id: %s\n%s", out, errOut)
	assert.Contains(t, out, "closed dead letter "+malformed.ID)
	for _, l := range w.list() {
		if l.ID == malformed.ID {
			assert.Equal(t, "closed", l.Status)
			assert.Equal(t, "retention passed; nothing to redrive", l.CloseNote)
		}
	}
	_, code, errOut = w.consumer("dlq", "show", "--id", "999999")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "names no dead letter")
}
