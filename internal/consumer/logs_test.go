package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// logSink collects a logger's JSON lines; safe for concurrent use.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// lines decodes every line written so far.
func (s *logSink) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

// startTestWorker runs a worker of group on topic until the test ends.
func startTestWorker(t *testing.T, brokers []string, topic, group string, p Handler, logger *slog.Logger) (*Worker, context.CancelFunc) {
	t.Helper()
	met, err := metrics.New(metrics.NewRegistry())
	require.NoError(t, err)
	w := New(Config{
		Brokers: brokers, Topic: topic, GroupID: group,
		Backoff:        Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 300 * time.Millisecond, RebalanceTimeout: 6 * time.Second,
		MaxWait: 100 * time.Millisecond, ShutdownTimeout: 10 * time.Second,
	}, p, met, logger)
	return w, runUntilStopped(t, w)
}

func (w *Worker) currentGeneration() int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.generation
}

func produceTrades(t *testing.T, brokers []string, topic string, from, n int) {
	t.Helper()
	msgs := make([]kafkaops.Message, n)
	for i := range msgs {
		tr := channelstest.NewTrade(channels.SQB, from+i)
		msgs[i] = kafkaops.Message{Key: []byte(fmt.Sprintf("trade-%d", from+i)), Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{})}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, kafkaops.Produce(ctx, brokers, topic, msgs))
}

// TestRebalanceLogsNoCancellationWarnings: a second worker joining and
// leaving the group ends generations under both workers' partition loops
// and readers; those expected cancellations are no WARN or ERROR line.
func TestRebalanceLogsNoCancellationWarnings(t *testing.T) {
	const topic, group = "channel-events", "settlement-consumer"
	cluster, brokers, err := inprocess.Start(map[string]int32{topic: 4})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	env := newPipelineEnv(t)
	sink := &logSink{}
	logger := logging.New(sink, slog.LevelDebug, "json")
	produceTrades(t, brokers, topic, 0, 100)

	// Started together: the first generation ends while its partition
	// readers are starting up, the second moments later.
	a, _ := startTestWorker(t, brokers, topic, group, env.p, logger.With("worker", "a"))
	b, stopB := startTestWorker(t, brokers, topic, group, env.p, logger.With("worker", "b"))
	require.Eventually(t, func() bool {
		g := a.currentGeneration()
		return g != 0 && g == b.currentGeneration()
	}, 30*time.Second, 20*time.Millisecond, "both workers in one generation")
	produceTrades(t, brokers, topic, 100, 100)
	produceTrades(t, brokers, topic, 200, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, kafkaops.WaitConsumed(ctx, brokers, group, topic, 50*time.Millisecond, nil))
	shared := a.currentGeneration()
	stopB()
	require.Eventually(t, func() bool { g := a.currentGeneration(); return g != 0 && g != shared }, 30*time.Second, 20*time.Millisecond,
		"the remaining worker in a new generation")
	produceTrades(t, brokers, topic, 300, 50)
	require.NoError(t, kafkaops.WaitConsumed(ctx, brokers, group, topic, 50*time.Millisecond, nil))

	lines := sink.lines(t)
	joined, kafkaLines := 0, 0
	for _, l := range lines {
		if l["component"] == "kafka" {
			kafkaLines++
		}
		if l["msg"] == "joined generation" {
			joined++
		}
		level, _ := l["level"].(string)
		if level != "WARN" && level != "ERROR" {
			continue
		}
		raw, err := json.Marshal(l)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), "context canceled", "an expected cancellation logged at %s", level)
	}
	assert.GreaterOrEqual(t, joined, 3, "generations joined: a and b, each, then a alone again")
	assert.Positive(t, kafkaLines, "kafka-go's own lines come through slog")
}

func TestKafkaLoggerLevelsAndBacksOff(t *testing.T) {
	sink := &logSink{}
	logger := logging.New(sink, slog.LevelDebug, "json")
	repeats := logging.NewSuppressor(logger)
	warn := kafkaLogger(logger, slog.LevelWarn, repeats)

	// As kafka-go's reader reports a lag poll cut short by Close.
	warn("kafka reader failed to read lag of partition %d of %s: %s", 0, "t", fmt.Errorf("dial: %w", context.Canceled))
	warn("failed to commit: %v", ErrGenerationEndedForTest)
	refused := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	for range 3 {
		warn("Unable to establish connection to consumer group coordinator for group %s: %v\n", "g", refused)
	}
	kafkaLogger(logger, slog.LevelDebug, nil)("initializing kafka reader for partition %d", 1)

	lines := sink.lines(t)
	require.Len(t, lines, 4, "the repeated failure written once")
	for _, l := range lines {
		assert.Equal(t, "kafka", l["component"])
	}
	assert.Equal(t, "DEBUG", lines[0]["level"], "a cancellation is expected")
	assert.Equal(t, "kafka reader failed to read lag of partition 0 of t: dial: context canceled", lines[0]["msg"])
	assert.Equal(t, "DEBUG", lines[1]["level"], "a generation's end is expected")
	assert.Equal(t, "WARN", lines[2]["level"])
	assert.Equal(t, "Unable to establish connection to consumer group coordinator for group g: "+refused.Error(), lines[2]["msg"],
		"no trailing newline")
	assert.Equal(t, "DEBUG", lines[3]["level"])
	assert.Equal(t, "initializing kafka reader for partition 1", lines[3]["msg"])
}

// ErrGenerationEndedForTest wraps kafka-go's generation end as its
// consumer group reports it.
var ErrGenerationEndedForTest = fmt.Errorf("commit offsets: %w", kafka.ErrGenerationEnded)

// TestUnreachableBrokerBacksOff: with the broker's port closed, every
// join attempt fails alike (kafka-go retries each second); the WARN lines
// back off instead of repeating each attempt, and count what they left out.
func TestUnreachableBrokerBacksOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: refused

	sink := &logSink{}
	logger := logging.New(sink, slog.LevelInfo, "json")
	_, stop := startTestWorker(t, []string{addr}, "channel-events", "settlement-consumer", &pipeline.Pipeline{}, logger)
	warns := func() (n int, suppressed float64) {
		for _, l := range sink.lines(t) {
			if l["level"] == "WARN" {
				n++
				k, _ := l["suppressed"].(float64)
				suppressed += k
			}
		}
		return n, suppressed
	}
	// The first line written after leaving some out comes about 2s after
	// the first.
	require.Eventually(t, func() bool { _, s := warns(); return s > 0 }, 30*time.Second, 20*time.Millisecond)
	stop()

	n, _ := warns()
	assert.GreaterOrEqual(t, n, 2, "each condition (kafka-go's and the worker's) reported at once")
	assert.LessOrEqual(t, n, 4, "then once more each at 2s; the next not before 6s")
}
