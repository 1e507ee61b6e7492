//go:build enginekafka

// Checked against Apache Kafka's own tooling: built with the enginekafka
// tag by scripts/engines/kafka.sh (make test-kafka), which starts the
// broker and names it and its kafka-consumer-groups tool in
// PAYCB_TEST_KAFKA_BROKERS and PAYCB_TEST_KAFKA_CONSUMER_GROUPS.

package ops_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// groupsTool runs kafka-consumer-groups with args and returns its output.
func groupsTool(t *testing.T, args ...string) string {
	t.Helper()
	tool := os.Getenv("PAYCB_TEST_KAFKA_CONSUMER_GROUPS")
	require.NotEmpty(t, tool, "PAYCB_TEST_KAFKA_CONSUMER_GROUPS must name kafka-consumer-groups.sh (make test-kafka)")
	out, err := exec.Command(tool, args...).CombinedOutput()
	require.NoError(t, err, "kafka-consumer-groups %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// toolRows parses the tool's table rows for group and topic: the columns
// after PARTITION, by partition.
func toolRows(t *testing.T, out, group, topic string) map[int][]string {
	t.Helper()
	rows := map[int][]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != group || f[1] != topic {
			continue
		}
		p, err := strconv.Atoi(f[2])
		require.NoError(t, err, "partition column in %q", sc.Text())
		rows[p] = f[3:]
	}
	require.NotEmpty(t, rows, "no rows for %s/%s in:\n%s", group, topic, out)
	return rows
}

func offsetCol(t *testing.T, s string) int64 {
	t.Helper()
	if s == "-" {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "offset column %q", s)
	return n
}

// produceStamped writes s's messages, keyed as the worker's upstream keys
// them, each stamped at.
func produceStamped(t *testing.T, k kafkaops.Kafka, s demo.Stream, at time.Time) {
	t.Helper()
	w := &kafka.Writer{
		Addr: kafka.TCP(k.Brokers...), Topic: k.Topic, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
	}
	defer func() { _ = w.Close() }()
	msgs := make([]kafka.Message, len(s.Messages))
	for i, m := range s.Messages {
		msgs[i] = kafka.Message{Key: m.Key, Value: m.Value, Time: at}
	}
	require.NoError(t, w.WriteMessages(context.Background(), msgs...))
}

// TestApacheKafkaReplayPlanAgreesWithKafkaConsumerGroups checks the replay
// command's plan against the broker's own kafka-consumer-groups: --describe
// reports the same committed offsets and log-end offsets per partition; the
// plan's equivalent --reset-offsets --dry-run command, run through the tool,
// reports the plan's targets for earliest, a date-time and explicit
// offsets; after ApplyReplay, --describe shows the targets committed; and
// the worker then replays from them without moving money twice.
func TestApacheKafkaReplayPlanAgreesWithKafkaConsumerGroups(t *testing.T) {
	require.NotEmpty(t, kafkaopstest.ExternalBrokers(), "%s must name the Apache Kafka broker", kafkaopstest.EnvBrokers)
	ctx := context.Background()
	k := mustKafka(t, 3)
	cfg, db := migratedWorker(t, k)

	// Two hours of history, consumed; then an hour's worth not yet.
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	old := demo.Generate(demo.StreamOptions{Seed: 51, Trades: 20, NoTraps: true, TradePrefix: "OLD"})
	recent := demo.Generate(demo.StreamOptions{Seed: 52, Trades: 20, NoTraps: true, TradePrefix: "RECENT"})
	later := demo.Generate(demo.StreamOptions{Seed: 53, Trades: 10, NoTraps: true, TradePrefix: "LATER"})
	produceStamped(t, k, old, t0.Add(-2*time.Hour))
	produceStamped(t, k, recent, t0.Add(-time.Hour))
	stop := runWorker(t, cfg)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, waitConsumedK(wctx, k))
	first := outcomes(t, stop())
	require.InDelta(t, float64(old.Events+recent.Events), first["acquired"], 0)
	produceStamped(t, k, later, t0)
	eventually(t, 20*time.Second, "the group to be empty", func() bool {
		st, err := k.DescribeGroup(ctx)
		return err == nil && len(st.Members) == 0
	})

	// --describe against the plan's reading of the group and the topic.
	targets := []struct {
		name string
		t    ops.ReplayTarget
	}{
		{"earliest", ops.ReplayTarget{Earliest: true}},
		{"the last hour and a half", ops.ReplayTarget{At: t0.Add(-90 * time.Minute)}},
		{"explicit offsets", ops.ReplayTarget{Offsets: map[int]int64{0: 1, 2: 3}}},
	}
	desc := toolRows(t, groupsTool(t, "--bootstrap-server", k.Brokers[0], "--describe", "--group", k.Group), k.Group, k.Topic)
	for _, tc := range targets {
		plan, err := ops.PlanReplay(ctx, k, tc.t)
		require.NoError(t, err, tc.name)
		for _, r := range plan.Partitions {
			row, ok := desc[r.Partition]
			require.True(t, ok, "%s: partition %d described", tc.name, r.Partition)
			assert.Equal(t, r.Current, offsetCol(t, row[0]), "%s: partition %d CURRENT-OFFSET", tc.name, r.Partition)
			assert.Equal(t, r.End, offsetCol(t, row[1]), "%s: partition %d LOG-END-OFFSET", tc.name, r.Partition)
			assert.Equal(t, r.End-r.Current, offsetCol(t, row[2]), "%s: partition %d LAG", tc.name, r.Partition)
		}

		// The plan's own kafka-consumer-groups command, dry run.
		got := map[int]int64{}
		cmd := plan.KafkaCommand(k.Brokers, tc.t, ops.KafkaCommandOptions{})
		for _, line := range strings.Split(cmd, "\n") {
			args := strings.Fields(line)
			require.Equal(t, "kafka-consumer-groups.sh", args[0])
			require.Contains(t, args, "--dry-run")
			for p, row := range toolRows(t, groupsTool(t, args[1:]...), k.Group, k.Topic) {
				got[p] = offsetCol(t, row[0])
			}
		}
		want := map[int]int64{}
		for _, r := range plan.Partitions {
			want[r.Partition] = r.Target
		}
		assert.Equal(t, want, got, "%s: NEW-OFFSET per partition, from %q", tc.name, cmd)
	}

	// The last hour and a half replayed: the plan applied, as --describe
	// sees it, then consumed by the worker.
	plan, err := ops.PlanReplay(ctx, k, targets[1].t)
	require.NoError(t, err)
	require.Equal(t, int64(len(recent.Messages)), plan.TotalReplay(), "the recent messages and nothing older")
	require.NoError(t, ops.ApplyReplay(ctx, k, plan))
	desc = toolRows(t, groupsTool(t, "--bootstrap-server", k.Brokers[0], "--describe", "--group", k.Group), k.Group, k.Topic)
	for _, r := range plan.Partitions {
		assert.Equal(t, r.Target, offsetCol(t, desc[r.Partition][0]), "partition %d committed at the target", r.Partition)
	}
	stop = runWorker(t, cfg)
	require.NoError(t, waitConsumedK(wctx, k))
	second := outcomes(t, stop())
	assert.InDelta(t, float64(later.Events), second["acquired"], 0, "only the unread events are new")
	assert.InDelta(t, float64(recent.Events), second["redelivered"], 0, "each replayed message that made a claim comes back as redelivered")
	rep, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{})
	require.NoError(t, err)
	assert.NoError(t, rep.Err(), "the books reconcile")
}

// waitConsumedK waits until k's group has committed its topic to the end.
func waitConsumedK(ctx context.Context, k kafkaops.Kafka) error {
	return kafkaops.WaitConsumed(ctx, k.Brokers, k.Group, k.Topic, 50*time.Millisecond, nil)
}
