// Package soak is the kill -9 soak: the real consumer binary as a
// subprocess, kfake as a process of its own (or the Apache Kafka broker
// PAYCB_TEST_KAFKA_BROKERS names) and MariaDB, with the consumer SIGKILLed
// at random moments and restarted, then the invariants. The default size
// is the short CI version; `make soak` runs the full one.
package soak

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/invariant"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/internal/settledpub/settledpubtest"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/schema"
)

var (
	eventsFlag = flag.Int("soak.events", 3000, "distinct money events to stream (about 1.85 per trade)")
	killsFlag  = flag.Int("soak.kills", 3, "SIGKILLs of the consumer, each followed by a restart")
	seedFlag   = flag.Uint64("soak.seed", 1, "stream and kill-timing seed")
)

const (
	baseTopic = "channel-events"
	baseGroup = "settlement-consumer"
	baseDLQ   = baseTopic + ".dlq"
)

// startBroker starts kfake-broker as a process of its own, or, when
// PAYCB_TEST_KAFKA_BROKERS names a real cluster, creates the soak's own
// topics there. It returns the brokers and the topic, group and dead-letter
// topic names.
func startBroker(ctx context.Context, t *testing.T, dir string) (brokers []string, topic, group, dlq string) {
	t.Helper()
	if kafkaopstest.ExternalBrokers() != nil {
		k := kafkaopstest.Start(t, map[string]int32{baseTopic: 8, baseDLQ: 1, baseTopic + ".settled": 1})
		return k.Brokers, k.Name(baseTopic), k.Name(baseGroup), k.Name(baseDLQ)
	}
	broker := filepath.Join(dir, "kfake-broker")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", broker, "github.com/paycallback/paycallback/cmd/kfake-broker").CombinedOutput()
	require.NoError(t, err, "build kfake-broker: %s", out)
	bk := exec.CommandContext(ctx, broker, "--topic", baseTopic+":8", "--topic", baseDLQ+":1", "--topic", baseTopic+".settled:1")
	stdout, err := bk.StdoutPipe()
	require.NoError(t, err)
	bk.Stderr = os.Stderr
	require.NoError(t, bk.Start())
	t.Cleanup(func() { _ = bk.Process.Signal(syscall.SIGTERM); _ = bk.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "broker address")
	return []string{strings.TrimSpace(line)}, baseTopic, baseGroup, baseDLQ
}

type quiet struct{}

func (quiet) Print(...any) {}

func TestMain(m *testing.M) {
	flag.Parse()
	_ = mysql.SetLogger(quiet{})
	os.Exit(m.Run())
}

// TestKillNineSoak streams the events, SIGKILLs the consumer at random
// moments while it works (each time restarting it), lets the last one run
// to the end of the topic, sweeps orphans and checks the invariants.
func TestKillNineSoak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	dir := t.TempDir()
	consumer := filepath.Join(dir, "consumer")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", consumer, "github.com/paycallback/paycallback/cmd/consumer").CombinedOutput()
	require.NoError(t, err, "build the consumer: %s", out)
	rng := rand.New(rand.NewPCG(*seedFlag, *seedFlag^0xabcdef))

	brokers, topic, group, dlq := startBroker(ctx, t, dir)

	// A private MariaDB instance, so the soak can restart it under the
	// running consumer; on a cluster (TEST_MYSQL_NODES) a database of the
	// cluster, each start of the consumer connecting to the next node.
	var server *sqldbtest.Server
	var dsn string
	if len(sqldbtest.Nodes()) > 0 {
		dsn = sqldbtest.NewDatabase(t)
	} else {
		server = sqldbtest.StartServer(t)
		dsn = server.CreateDatabase(t, "paycb_soak")
	}
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(ctx, db)
	require.NoError(t, err)

	trades := max(*eventsFlag*100/185, 10)
	stream := thinDuplicates(t, demo.Generate(demo.StreamOptions{Seed: *seedFlag, Trades: trades}), 0.30, rng)
	dups := len(stream.Messages) - stream.Events - stream.Conflicts - stream.Malformed
	t.Logf("soak: %d messages, %d distinct events (%.0f%% of messages are duplicates), %d kills planned",
		len(stream.Messages), stream.Events, 100*float64(dups)/float64(len(stream.Messages)), *killsFlag)
	msgs := make([]kafkaops.Message, len(stream.Messages))
	for i, m := range stream.Messages {
		msgs[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
	}
	// The stream is produced in a chunk per planned kill and one more: the
	// next chunk goes out whenever the consumer has caught up with what is
	// produced, so a kill always lands with messages outstanding however
	// fast the machine reads a backlog (a stream produced whole ran out
	// after the first kill once the consumer read it in under a second).
	chunk := (len(msgs) + *killsFlag) / (*killsFlag + 1)
	produced := 0
	produceNext := func() {
		if produced == len(msgs) {
			return
		}
		end := min(produced+chunk, len(msgs))
		require.NoError(t, kafkaops.Produce(ctx, brokers, topic, msgs[produced:end]))
		produced = end
	}
	produceNext()

	env := append(os.Environ(),
		"PAYCB_KAFKA_BROKERS="+brokers[0], "PAYCB_KAFKA_TOPIC="+topic, "PAYCB_KAFKA_GROUP="+group,
		"PAYCB_DB_DSN="+dsn, "PAYCB_ADMIN_ADDR=127.0.0.1:0", "PAYCB_WECHAT_APIV3_KEY="+channelstest.APIv3Key,
		"PAYCB_LOG_LEVEL=error", "PAYCB_ORPHAN_AFTER=2s", "PAYCB_SWEEP_INTERVAL=500ms",
		"PAYCB_KAFKA_SESSION_TIMEOUT=6s", "PAYCB_KAFKA_HEARTBEAT_INTERVAL=300ms", "PAYCB_KAFKA_REBALANCE_TIMEOUT=6s",
		"PAYCB_KAFKA_MAX_WAIT=100ms", "PAYCB_BATCH_MAX=16")
	starts := 0
	start := func() *exec.Cmd {
		nodeDSN, err := sqldbtest.NodeDSN(dsn, starts)
		require.NoError(t, err)
		starts++
		cmd := exec.CommandContext(ctx, consumer, "run")
		cmd.Env = append(env, "PAYCB_DB_DSN="+nodeDSN)
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		return cmd
	}
	committed := func() int64 {
		ps, err := kafkaops.Progress(ctx, brokers, group, topic)
		if err != nil {
			return -1
		}
		var n int64
		for _, p := range ps {
			n += max(p.Committed, 0)
		}
		return n
	}

	kills := 0
	restarted := false
	cmd := start()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for kills < *killsFlag {
		// Kill once the consumer has moved (committed more than at the last
		// kill), plus a random delay, so that every kill lands mid-stream.
		if committed() >= int64(produced) {
			produceNext()
		}
		before := committed()
		require.Eventually(t, func() bool { return committed() > before }, 2*time.Minute, 20*time.Millisecond,
			"consumer made no progress after %d kills", kills)
		timer := time.NewTimer(time.Duration(rng.IntN(800)) * time.Millisecond)
		select {
		case <-timer.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		if committed() >= int64(produced) {
			produceNext() // caught up: the kill lands on the next chunk
		}
		if committed() >= int64(len(msgs)) {
			break // the stream ran out before the planned kills
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		kills++
		cmd = start()
		if kills == 1 && !restarted && server != nil {
			// Once, mid-stream: the database restarts under the freshly
			// restarted consumer. Its in-flight messages fail and are
			// retried in place until the server is back.
			server.Restart(t)
			restarted = true
		}
	}
	for produced < len(msgs) {
		produceNext()
	}
	require.True(t, restarted || server == nil || committed() >= int64(len(msgs)), "the database was restarted mid-stream")
	waitCtx, cancelWait := context.WithTimeout(ctx, 20*time.Minute)
	defer cancelWait()
	require.NoError(t, kafkaops.WaitConsumed(waitCtx, brokers, group, topic, 100*time.Millisecond, nil))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()

	swept, err := invariant.SweepOrphans(ctx, db)
	require.NoError(t, err)
	rep, err := invariant.Check(ctx, db, brokers, dlq, stream)
	require.NoError(t, err)
	fmt.Printf("soak: %d messages, %d events, %d kills survived, database restarted %v, %d orphans swept after, lost %d, posted twice %d, %d violations\n",
		rep.Messages, rep.Events, kills, restarted, swept, rep.Lost, rep.Doubled, len(rep.Violations))
	require.NoError(t, rep.Err())
	require.GreaterOrEqual(t, kills, *killsFlag, "the stream ran out before every kill: use more events")
	checkSettledEvents(ctx, t, db, brokers, topic+".settled")
}

// checkSettledEvents publishes what the kills left unpublished (and the
// orphans swept after) as a restarted worker's sweeper would, then holds
// the settled-event topic to the contract: every claim settled POSTED has
// its event there, every copy of an event is its outbox row's bytes, and
// per trade trade_seq never decreases.
func checkSettledEvents(ctx context.Context, t *testing.T, db *bun.DB, brokers []string, topic string) {
	t.Helper()
	w := settledpub.NewKafkaWriter(brokers, topic, nil, nil, 0)
	defer func() { _ = w.Close() }()
	sw := &settledpub.Sweeper{DB: db, Writer: w, Grace: time.Nanosecond}
	require.Eventually(t, func() bool {
		_, _, err := sw.Sweep(ctx)
		n, _, perr := settledpub.Pending(ctx, db)
		return err == nil && perr == nil && n == 0
	}, 2*time.Minute, 10*time.Millisecond, "the sweeper publishes what the kills left")
	pubs := settledpubtest.Read(t, db, brokers, topic)
	repeats := settledpubtest.RequireInOrder(t, pubs)
	var posted []string
	require.NoError(t, db.NewRaw(`SELECT CONCAT(tenant_id, ':', idempotent_key) FROM ss_channel_idempotent WHERE settle_outcome = 'POSTED'`).Scan(ctx, &posted))
	on := map[string]bool{}
	for _, p := range pubs {
		on[p.Event.EventID] = true
	}
	for _, id := range posted {
		require.True(t, on[id], "%s settled POSTED without its event on the topic", id)
	}
	fmt.Printf("soak: %d settled events on the topic, %d repeated (at least once), one for each of %d POSTED claims\n",
		len(pubs), repeats, len(posted))
}

// thinDuplicates drops channel retries (copies of an event already in the
// stream, same fingerprint) at random until about share of the messages are
// duplicates; demo.Generate delivers every notification one to three times,
// about half of all messages. Conflicts, malformed messages and each event's
// first copy are kept, so the stream's expectations stay true.
func thinDuplicates(t *testing.T, s demo.Stream, share float64, rng *rand.Rand) demo.Stream {
	t.Helper()
	dec := channels.NewDecoder(channels.StaticKeys{Default: channelstest.APIv3Key})
	seen := map[string]bool{}
	dups := len(s.Messages) - s.Events - s.Conflicts - s.Malformed
	// keep/(events+conflicts+malformed+keep) = share
	want := share * float64(s.Events+s.Conflicts+s.Malformed) / (1 - share)
	keep := want / float64(dups)
	out := s.Messages[:0:0]
	for _, m := range s.Messages {
		res, err := dec.Decode(m.Value)
		if err == nil && !res.Ignored {
			id := fmt.Sprintf("%d/%s/%s", res.Event.TenantID, res.Event.Key, res.Event.Fingerprint)
			if seen[id] && rng.Float64() >= keep {
				continue
			}
			seen[id] = true
		}
		out = append(out, m)
	}
	s.Messages = out
	return s
}
