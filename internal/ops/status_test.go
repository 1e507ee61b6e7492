package ops_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/app/apptest"
	"github.com/paycallback/paycallback/internal/consumer"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/schema"
)

func TestParseStalls(t *testing.T) {
	text := `# HELP paycb_partition_stalled_seconds Seconds since the partition last advanced.
# TYPE paycb_partition_stalled_seconds gauge
paycb_partition_stalled_seconds{partition="0"} 0
paycb_partition_stalled_seconds{partition="3"} 12.5
paycb_partition_stalled_seconds{instance="a,b\"c",partition="7"} 4 1700000000000
paycb_partition_stalled_seconds_other{partition="1"} 99
paycb_consumer_lag{partition="1"} 40
paycb_partition_stalled_seconds{partition="x"} 1
`
	got, err := ops.ParseStalls(strings.NewReader(text))
	require.NoError(t, err)
	assert.Equal(t, map[int]float64{0: 0, 3: 12.5, 7: 4}, got)

	_, err = ops.ParseStalls(strings.NewReader(`paycb_partition_stalled_seconds{partition="1"} lots` + "\n"))
	require.Error(t, err, "an unreadable value is an error")
	_, err = ops.ParseStalls(strings.NewReader(`paycb_partition_stalled_seconds{partition="1" 3` + "\n"))
	require.Error(t, err, "an unterminated label set is an error")
}

func TestParseSettledBacklog(t *testing.T) {
	text := `# TYPE paycb_settled_pending gauge
paycb_settled_pending 42
paycb_settled_pending_other 7
paycb_settled_oldest_pending_seconds 12.5
`
	assert.Equal(t, &ops.SettledBacklog{Pending: 42, OldestPendingSeconds: 12.5}, ops.ParseSettledBacklog(strings.NewReader(text)))
	assert.Nil(t, ops.ParseSettledBacklog(strings.NewReader("paycb_settled_pending 42\n")), "one of the two missing (settled events off, or not read yet)")
	assert.Nil(t, ops.ParseSettledBacklog(strings.NewReader("paycb_settled_pending lots\npaycb_settled_oldest_pending_seconds 1\n")))
}

// startMain starts the worker through app.Main and stops it at cleanup.
func startMain(t *testing.T, cfg config.Config) (*app.Main, func()) {
	t.Helper()
	m := apptest.MustRun(t, &app.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Registry: metrics.NewRegistry()})
	stop := func() { t.Helper(); apptest.MustClose(t, m) }
	return m, stop
}

// workerConfig is a worker configuration on k and a fresh MariaDB
// database.
func workerConfig(t *testing.T, k kafkaops.Kafka) config.Config {
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
	return cfg
}

// TestStatusWhileTheWorkerRuns reads the live group: its one member with
// every partition, found through its client ID and reachable, no lag and
// no stall once the stream is consumed; then, with the worker stopped and more messages
// produced, no members, the new messages as lag and stalls unknown.
func TestStatusWhileTheWorkerRuns(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 3)
	cfg := workerConfig(t, k)
	require.NoError(t, migrateDSN(ctx, cfg))

	stream := demo.Generate(demo.StreamOptions{Seed: 11, Trades: 12, NoTraps: true})
	require.NoError(t, kafkaops.Produce(ctx, k.Brokers, k.Topic, streamMessages(stream)))
	m, stop := startMain(t, cfg)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, kafkaops.WaitConsumed(wctx, k.Brokers, k.Group, k.Topic, 50*time.Millisecond, nil))

	rep, err := ops.Status(ctx, k, ops.StatusOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Stable", rep.State)
	require.Len(t, rep.Members, 1)
	mem := rep.Members[0]
	assert.Equal(t, []int{0, 1, 2}, mem.Partitions)
	assert.Equal(t, m.Admin().Addr().String(), mem.Admin, "the admin address comes from the client ID")
	assert.True(t, mem.Reachable, mem.Error)
	require.Len(t, rep.Partitions, 3)
	var total int64
	for _, p := range rep.Partitions {
		assert.Equal(t, mem.ID, p.Member)
		assert.Equal(t, p.End, p.Committed, "partition %d consumed", p.Partition)
		assert.Zero(t, p.Lag)
		require.NotNil(t, p.StalledSeconds, "partition %d: its owner reports its stall", p.Partition)
		assert.Less(t, *p.StalledSeconds, 1.0, "partition %d is not held up (its gauge may catch a message in flight)", p.Partition)
		total += p.End
	}
	assert.Equal(t, int64(len(stream.Messages)), total)
	assert.Zero(t, rep.TotalLag)
	require.NotNil(t, rep.Settled, "the member reports the settled-event backlog")
	assert.GreaterOrEqual(t, rep.Settled.Pending, 0.0)

	stop()
	eventually(t, 20*time.Second, "the group to be empty", func() bool {
		st, err := k.DescribeGroup(ctx)
		return err == nil && len(st.Members) == 0
	})
	produceAt(t, k, k.Topic, 1, 5, time.Now())
	rep, err = ops.Status(ctx, k, ops.StatusOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Members)
	assert.Equal(t, int64(5), rep.TotalLag)
	for _, p := range rep.Partitions {
		assert.Empty(t, p.Member)
		assert.Nil(t, p.StalledSeconds, "no owner, no stall reading")
		if p.Partition == 1 {
			assert.Equal(t, int64(5), p.Lag)
		}
	}
}

// TestStatusShowsAStalledPartition holds one order row locked while its
// trade's refund waits: status shows that partition's lag and its stall as
// the owning worker reports it, the other partitions not stalled; once the
// lock is released the partition catches up and its stall returns to 0.
func TestStatusShowsAStalledPartition(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 3)
	cfg := workerConfig(t, k)
	require.NoError(t, migrateDSN(ctx, cfg))
	db, err := sqldb.OpenMySQL(cfg.DB.DSN.Reveal())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, _ = startMain(t, cfg)
	consumed := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		require.NoError(t, kafkaops.WaitConsumed(wctx, k.Brokers, k.Group, k.Topic, 50*time.Millisecond, nil))
	}

	tr := channelstest.NewTrade(channels.Alipay, 31)
	key := []byte("ALIPAY:" + tr.TradeNo)
	require.NoError(t, kafkaops.Produce(ctx, k.Brokers, k.Topic, []kafkaops.Message{{Key: key, Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{})}}))
	consumed()

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	released := false
	release := func() {
		if !released {
			released = true
			_ = tx.Rollback()
		}
	}
	t.Cleanup(release)
	var ids []int64
	require.NoError(t, tx.NewRaw("SELECT id FROM ss_channel_order WHERE tenant_id = ? AND channel_code = 'ALIPAY' AND channel_trade_no = ? FOR UPDATE",
		tr.TenantID, tr.TradeNo).Scan(ctx, &ids))
	require.Len(t, ids, 1)
	require.NoError(t, kafkaops.Produce(ctx, k.Brokers, k.Topic, []kafkaops.Message{
		{Key: key, Value: channelstest.RefundEnvelope(tr, channelstest.Refund{No: "RF-1", Amount: 100}, channelstest.Delivery{})},
	}))

	var rep ops.StatusReport
	var stuck ops.PartitionStatus
	eventually(t, 30*time.Second, "one partition to show a stall", func() bool {
		rep, err = ops.Status(ctx, k, ops.StatusOptions{})
		require.NoError(t, err)
		for _, p := range rep.Partitions {
			if p.StalledSeconds != nil && *p.StalledSeconds >= 1 {
				stuck = p
				return true
			}
		}
		return false
	})
	assert.Equal(t, int64(1), stuck.Lag, "the refund waits")
	assert.Equal(t, int64(1), rep.TotalLag)
	for _, p := range rep.Partitions {
		if p.Partition == stuck.Partition {
			continue
		}
		require.NotNil(t, p.StalledSeconds, "partition %d reported by its owner", p.Partition)
		assert.Less(t, *p.StalledSeconds, 1.0, "partition %d is not held up", p.Partition)
		assert.Nil(t, p.Stuck, "partition %d is not stuck", p.Partition)
	}
	// What it is stuck on, as its owner reports it: the refund's offset and
	// key, since when, and, once an attempt has met the lock, its error.
	eventually(t, 30*time.Second, "the stuck message's error", func() bool {
		rep, err = ops.Status(ctx, k, ops.StatusOptions{})
		require.NoError(t, err)
		stuck = rep.Partitions[stuck.Partition]
		return stuck.Stuck != nil && stuck.Stuck.Attempts > 0
	})
	s := stuck.Stuck
	assert.Equal(t, int64(1), s.Offset, "the refund, after the payment")
	assert.Equal(t, string(key), s.Key)
	assert.Contains(t, s.Error, "Lock wait timeout exceeded")
	assert.WithinDuration(t, time.Now(), s.Since, time.Minute)
	assert.LessOrEqual(t, time.Since(s.Since).Seconds(), *stuck.StalledSeconds+5, "since is the stall's start")
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"stuck":{"offset":1,"key":"`+string(key)+`","since":"`)

	release()
	consumed()
	eventually(t, 30*time.Second, "the stall to clear", func() bool {
		rep, err = ops.Status(ctx, k, ops.StatusOptions{})
		require.NoError(t, err)
		p := rep.Partitions[stuck.Partition]
		return p.StalledSeconds != nil && *p.StalledSeconds == 0
	})
	assert.Zero(t, rep.TotalLag)
	assert.Nil(t, rep.Partitions[stuck.Partition].Stuck, "no longer stuck")
}

// TestStatusOfAnUnreachableMember: a member that announces an admin
// address where nothing answers owns its partitions with their stalls
// unknown, and says why.
func TestStatusOfAnUnreachableMember(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: k.Group, Brokers: k.Brokers, Topics: []string{k.Topic},
		Dialer: consumer.WithClientID(nil, consumer.ClientIDPrefix+deadAddr),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cg.Close() })
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = cg.Next(gctx)
	require.NoError(t, err)

	rep, err := ops.Status(ctx, k, ops.StatusOptions{AdminTimeout: 2 * time.Second})
	require.NoError(t, err)
	require.Len(t, rep.Members, 1)
	m := rep.Members[0]
	assert.Equal(t, deadAddr, m.Admin)
	assert.False(t, m.Reachable)
	assert.Contains(t, m.Error, deadAddr)
	assert.Equal(t, []int{0, 1}, m.Partitions)
	for _, p := range rep.Partitions {
		assert.Equal(t, m.ID, p.Member)
		assert.Nil(t, p.StalledSeconds, "partition %d: its owner cannot be asked", p.Partition)
	}
	assert.Nil(t, rep.Settled, "no member to ask")
}

// TestStatusOfAMissingTopic refuses rather than creating the topic.
func TestStatusOfAMissingTopic(t *testing.T) {
	k := mustKafka(t, 1)
	k.Topic = "no-such-topic"
	_, err := ops.Status(context.Background(), k, ops.StatusOptions{})
	require.ErrorIs(t, err, ops.ErrTopicNotFound)
}

// migratedWorker is workerConfig with its database migrated and open; the
// database closes at cleanup.
func migratedWorker(t *testing.T, k kafkaops.Kafka) (config.Config, *bun.DB) {
	t.Helper()
	cfg := workerConfig(t, k)
	db, err := sqldb.OpenMySQL(cfg.DB.DSN.Reveal())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(t, err)
	return cfg, db
}

// migrateDSN migrates the database cfg names.
func migrateDSN(ctx context.Context, cfg config.Config) error {
	db, err := sqldb.OpenMySQL(cfg.DB.DSN.Reveal())
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	_, err = schema.Migrate(ctx, db)
	return err
}

// streamMessages is s's messages to produce.
func streamMessages(s demo.Stream) []kafkaops.Message {
	out := make([]kafkaops.Message, len(s.Messages))
	for i, m := range s.Messages {
		out[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
	}
	return out
}
