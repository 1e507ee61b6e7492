package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/consumer"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Defaults of Options.
const (
	// DefaultTrades sizes the stream so that a whole run takes about three
	// minutes on a 2-core machine (about four messages per trade).
	DefaultTrades = 6000
	// DefaultServerDSN is the MariaDB/MySQL server the databases are made on.
	DefaultServerDSN = "root@tcp(127.0.0.1:3306)/"
	// DefaultBatchMax is PAYCB_BATCH_MAX for the batched rows.
	DefaultBatchMax = 256
	// DefaultStorageBatch is how many events one transaction of the raw
	// rows and of the rule floor writes.
	DefaultStorageBatch = 500
	// DefaultEventFloorEvents is how many events of the stream, from its
	// start, the per-event floor writes at most: one transaction pair per
	// event costs milliseconds each, so the whole stream would take
	// minutes for a figure per event that a few thousand give as well.
	DefaultEventFloorEvents = 3000
	// DefaultPacedRate is the publish rate of the latency rows, in
	// distinct events/s (the messages, channel retries included, go out
	// proportionally faster).
	DefaultPacedRate = 1000
	// DefaultOutboxPairs is how many times the batched backlog runs with
	// settled events on and then off (the batched row and its settled-off
	// row being the first pair): the outbox's cost is the median of the
	// pairs' ratios, since one pair on a shared machine swings by more than
	// the cost measured.
	DefaultOutboxPairs = 3
	// DefaultPacedDuration is how long each latency row publishes.
	DefaultPacedDuration = 10 * time.Second
	// Partitions is the partition count of every input topic.
	Partitions = 12
	// pacedHeadroom is the share of the batched pipeline's backlog
	// throughput the latency rows may publish at, at most.
	pacedHeadroom = 0.5
	// fellBehind is how long after the last publish a paced row may take
	// to commit everything before the table says the pipeline fell behind.
	fellBehind = time.Second
)

// Row keys, in table order.
const (
	RowTransport       = "transport"
	RowRaw             = "raw-rows"
	RowFloor           = "rule-floor"
	RowEventFloor      = "event-floor"
	RowPerMessage      = "per-message"
	RowBatched         = "batched"
	RowBatchedOff      = "batched-settled-off"
	RowReplay          = "replay"
	RowPacedRead       = "paced-read"
	RowPacedBatched    = "paced-batched"
	RowPacedBatched2   = "paced-batched-2"
	RowPacedPerMessage = "paced-per-message"
)

// Options configure a run. The zero value runs the full benchmark against
// DefaultServerDSN from within the repository.
type Options struct {
	// Seed seeds the generated streams (default 1).
	Seed uint64
	// Trades sizes the main stream (default DefaultTrades); each trade is
	// about four messages (payments, refunds, channel retries).
	Trades int
	// ServerDSN is a go-sql-driver/mysql DSN of the server; its database part
	// is ignored (default DefaultServerDSN).
	ServerDSN string
	// RepoDir is the module root to build from (default: the nearest
	// directory holding go.mod, upwards from the working directory).
	RepoDir string
	// BinDir receives the built consumer, kfake-broker and readfloor
	// (default RepoDir/bin). The readfloor is built from the module the
	// working directory is in, the others from RepoDir.
	BinDir string
	// GoTool is the go command (default "go", looked up on PATH).
	GoTool string
	// BatchMax is PAYCB_BATCH_MAX of the batched rows (default
	// DefaultBatchMax).
	BatchMax int
	// StorageBatch is how many events one transaction of the raw rows and
	// of the rule floor writes (default DefaultStorageBatch). Both write on
	// one connection.
	StorageBatch int
	// EventFloorEvents is how many events, from the stream's start, the
	// per-event floor writes (the rule floor one event per transaction);
	// default DefaultEventFloorEvents, the whole stream when it has fewer.
	EventFloorEvents int
	// OutboxPairs is how many on/off pairs of the batched backlog measure
	// the outbox's cost (default DefaultOutboxPairs; the first pair is the
	// batched and the settled-off rows).
	OutboxPairs int
	// OutboxOnly runs only what the outbox's goals are read from: the
	// batched backlog with settled events on and off (OutboxPairs pairs)
	// and the paced batched row of one process (its publish -> settled
	// event latency beside the pipeline's own); no floors, no per-message,
	// replay or two-process rows.
	OutboxOnly bool
	// PacedRate (distinct events/s) and PacedDuration shape the latency
	// rows (defaults DefaultPacedRate and DefaultPacedDuration). The rate is
	// lowered to half the batched pipeline's backlog throughput of
	// distinct events when that is less, and the table says so.
	PacedRate     float64
	PacedDuration time.Duration
	// ProfileDir, when set, receives a CPU profile of the worker over each
	// paced row's publishing (ROW.pprof, from the consumer's
	// /debug/pprof/profile); empty takes none.
	ProfileDir string
	// ConsumerEnv is KEY=VALUE settings given to every consumer process
	// after the harness's own (a later setting of a key wins): a tuning
	// measured, e.g. GOMAXPROCS=1 or PAYCB_MERGE_WAIT=5ms. The table's
	// facts list them.
	ConsumerEnv []string
	// Logger receives progress (default: discarded).
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Trades <= 0 {
		o.Trades = DefaultTrades
	}
	if o.ServerDSN == "" {
		o.ServerDSN = DefaultServerDSN
	}
	if o.RepoDir == "" {
		dir, err := moduleRoot()
		if err != nil {
			return err
		}
		o.RepoDir = dir
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RepoDir, "bin")
	}
	if o.GoTool == "" {
		o.GoTool = "go"
	}
	if o.BatchMax <= 0 {
		o.BatchMax = DefaultBatchMax
	}
	if o.StorageBatch <= 0 {
		o.StorageBatch = DefaultStorageBatch
	}
	if o.EventFloorEvents <= 0 {
		o.EventFloorEvents = DefaultEventFloorEvents
	}
	if o.PacedRate <= 0 {
		o.PacedRate = DefaultPacedRate
	}
	if o.OutboxPairs <= 0 {
		o.OutboxPairs = DefaultOutboxPairs
	}
	if o.PacedDuration <= 0 {
		o.PacedDuration = DefaultPacedDuration
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Row is one measured line of the table.
type Row struct {
	// Key is one of the Row… constants.
	Key string
	// Name describes what was measured.
	Name string
	// Messages is the Kafka messages read (or, paced, published); 0 for
	// the raw rows and the rule floor, which read none.
	Messages int
	// Events is the distinct money events (tenant, idempotency key) those
	// messages carry, or the raw rows and the rule floor wrote: the unit
	// the storage rows and the pipelines are compared in. A replay's
	// events are all duplicates.
	Events int
	// Elapsed is the wall time the row took. For pipelines it runs from
	// starting the consumer process to the group's last commit; for paced
	// rows it is the publishing time.
	Elapsed time.Duration
	// Rate is Messages per second of Elapsed (paced rows: the publish rate
	// achieved); EventRate is Events per second of Elapsed.
	Rate, EventRate float64
	// Startup is, for pipelines, the time from starting the process to its
	// readiness (consumer group joined), included in Elapsed.
	Startup time.Duration
	// P50 and P99 are publish→settled latencies (paced rows only).
	P50, P99 time.Duration
	// SettledP50 and SettledP99 are, on paced rows with settled events,
	// from an event's first publish to its settled event acknowledged by
	// the broker on the settled-event topic (the outbox row's
	// published_at); AckP50 and AckP99 from its settlement (the outbox
	// row's settled_at, the settling transaction's time) to that
	// acknowledgement. Zero where not measured.
	SettledP50, SettledP99 time.Duration
	AckP50, AckP99         time.Duration
	// FirstCommit is, for backlog pipelines, the time from starting the
	// process to the group's first commit (joining, first fetch and first
	// batches); SteadyRate is the messages committed after that first
	// commit per second of the rest of Elapsed.
	FirstCommit time.Duration
	SteadyRate  float64
	// PeakRSS is the consumer process's VmHWM in bytes (pipelines only).
	PeakRSS int64
	// WorkerCPU is the user+system CPU time (/proc utime+stime) the
	// worker used over the row: the consumer process, from its start to
	// the group's last commit, for pipelines; the harness process itself
	// for the transport ceiling, the raw rows and the rule floor. DBCPU is
	// the database server process's over the row. Statements is the
	// server's global Questions counter over the row. Each is negative when
	// unknown (a server not on this machine) or not measured (the database
	// on the transport row).
	WorkerCPU, DBCPU time.Duration
	Statements       int64
	// Note qualifies the row.
	Note string
}

// perEvent is d in µs per distinct event, or -1 when either is unknown.
func (r Row) perEvent(d time.Duration) float64 { return perUnit(d, r.Events) }

// perMessage is d in µs per message, or -1 when either is unknown.
func (r Row) perMessage(d time.Duration) float64 { return perUnit(d, r.Messages) }

func perUnit(d time.Duration, n int) float64 {
	if d < 0 || n <= 0 {
		return -1
	}
	return float64(d) / float64(time.Microsecond) / float64(n)
}

// StatementsPerEvent is Statements per distinct event, or -1 when unknown.
func (r Row) StatementsPerEvent() float64 {
	if r.Statements < 0 || r.Events <= 0 {
		return -1
	}
	return float64(r.Statements) / float64(r.Events)
}

// WorkerPerEvent and DBPerEvent are the CPU µs per distinct event of the
// worker and of the database, -1 when unknown.
func (r Row) WorkerPerEvent() float64 { return r.perEvent(r.WorkerCPU) }

// DBPerEvent is the database's CPU per distinct event, as WorkerPerEvent
// is the worker's.
func (r Row) DBPerEvent() float64 { return r.perEvent(r.DBCPU) }

// Result is what a run measured.
type Result struct {
	// Facts describe the run: machine, server, stream.
	Facts []string
	// MessagesPerEvent is the main stream's messages per distinct event.
	MessagesPerEvent float64
	// DBProcess is the database server's process id, 0 when it is not on
	// this machine (every DBCPU is then unknown).
	DBProcess int
	// Rows, in table order.
	Rows []Row
	// Problems lists failed sanity checks (ledger invariants, claims left
	// unsettled, totals that differ from the stream's); empty when all held.
	Problems []string
	// Outbox is the on/off pairs of the batched backlog (the first is the
	// batched and the settled-off rows).
	Outbox []OutboxPair
}

// Row returns the row with key, or false.
func (r Result) Row(key string) (Row, bool) {
	i := slices.IndexFunc(r.Rows, func(x Row) bool { return x.Key == key })
	if i < 0 {
		return Row{}, false
	}
	return r.Rows[i], true
}

// harness holds one run's shared state.
type harness struct {
	o       Options
	log     *slog.Logger
	dbs     *databases
	meter   *meter
	brokers []string
	work    string // scratch directory, the consumers' working directory
	res     Result
}

const mainTopic = "channel-events"

// Run performs one whole benchmark run. An error means a measurement could
// not be made; failed sanity checks are reported in Result.Problems. Every
// subprocess is stopped and every database dropped before Run returns.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	err := session(ctx, o, e2eTopics, func(h *harness, broker *proc) error {
		defer func() { res = h.res }()
		if err := h.measure(ctx); err != nil {
			return err
		}
		if rss, err := broker.peakRSS(); err == nil {
			h.res.Facts = append(h.res.Facts, "broker peak RSS: "+mib(rss)+" (separate process)")
		}
		if err := broker.stop(10 * time.Second); err != nil {
			h.log.Warn("broker did not stop cleanly", "err", err)
		}
		return nil
	})
	return res, err
}

// session sets up what every measurement needs (a database name prefix, a
// scratch directory, the built binaries, a broker process seeded with
// topics and their dead-letter topics), runs fn, and tears it all down: the
// broker is killed and every database fn created is dropped before session
// returns, whatever fn did.
func session(ctx context.Context, o Options, topics []string, fn func(h *harness, broker *proc) error) (err error) {
	if err := o.defaults(); err != nil {
		return err
	}
	h := &harness{o: o, log: o.Logger}
	h.dbs, err = newDatabases(o.ServerDSN)
	if err != nil {
		return err
	}
	h.meter, err = newMeter(ctx, o.ServerDSN)
	if err != nil {
		return err
	}
	defer h.meter.close()
	defer func() {
		dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := h.dbs.dropAll(dropCtx); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	h.work, err = os.MkdirTemp("", "paycb-bench-")
	if err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(h.work) }()

	if err := h.build(ctx); err != nil {
		return err
	}
	broker, err := h.startBroker(ctx, topics)
	if err != nil {
		return err
	}
	defer broker.kill()
	return fn(h, broker)
}

// build builds the consumer and the broker from RepoDir, and the read
// floor's reader from the harness's own module (a tree measured for a
// before/after comparison need not have it: it measures no worker).
func (h *harness) build(ctx context.Context) error {
	own, err := moduleRoot()
	if err != nil {
		return err
	}
	for _, target := range []struct{ out, pkg, dir string }{
		{"consumer", "./cmd/consumer", h.o.RepoDir},
		{"kfake-broker", "./cmd/kfake-broker", h.o.RepoDir},
		{"readfloor", "./internal/bench/readfloor", own},
	} {
		start := time.Now()
		out := filepath.Join(h.o.BinDir, target.out)
		cmd := exec.CommandContext(ctx, h.o.GoTool, "build", "-o", out, target.pkg) //nolint:gosec // the caller's go tool building this module
		cmd.Dir = target.dir
		output, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %w\n%s", target.pkg, err, output)
		}
		h.log.Info("built", "binary", filepath.Join(h.o.BinDir, target.out), "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// e2eTopics are the full run's input topics: the main stream and the
// paced streams.
var e2eTopics = []string{mainTopic, RowPacedRead, RowPacedBatched, RowPacedBatched2, RowPacedPerMessage}

// startBroker starts the kfake-broker process with topics (Partitions
// each), a one-partition dead-letter topic and a settled-event topic
// (Partitions) for each.
func (h *harness) startBroker(ctx context.Context, topics []string) (*proc, error) {
	args := []string{"--port", "0"}
	for _, t := range topics {
		args = append(args, "--topic", fmt.Sprintf("%s:%d", t, Partitions), "--topic", t+".dlq:1",
			"--topic", fmt.Sprintf("%s.settled:%d", t, Partitions))
	}
	addr := &firstLine{ch: make(chan string, 1)}
	p, err := startProc(ctx, h.log, "kfake-broker", h.work, filepath.Join(h.o.BinDir, "kfake-broker"), args, nil, addr)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case a := <-addr.ch:
		h.brokers = []string{a}
		h.log.Info("broker running", "addr", a, "pid", p.pid())
		return p, nil
	case <-p.done:
		return nil, p.failure()
	case <-t.C:
		p.kill()
		return nil, errors.New("kfake-broker printed no address within 30s")
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("wait for kfake-broker: %w", ctx.Err())
	}
}

// firstLine sends the first line written to it on ch and discards the rest.
type firstLine struct {
	buf  []byte
	sent bool
	ch   chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := strings.IndexByte(string(f.buf), '\n'); i >= 0 {
		f.sent = true
		f.ch <- strings.TrimSpace(string(f.buf[:i]))
	}
	return len(p), nil
}

func (h *harness) measure(ctx context.Context) error {
	o := h.o
	stream := demo.Generate(demo.StreamOptions{Seed: o.Seed, Trades: o.Trades, ReceivedAt: time.Now()})
	msgs := make([]kafkaops.Message, len(stream.Messages))
	values := make([][]byte, len(stream.Messages))
	for i, m := range stream.Messages {
		msgs[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
		values[i] = m.Value
	}
	n := len(msgs)
	h.res.MessagesPerEvent = float64(n) / float64(stream.Events)
	h.res.Facts = append(h.res.Facts,
		fmt.Sprintf("machine: %d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		fmt.Sprintf("stream: seed %d, %d trades, %d messages, %d distinct money events (%.2f messages per event), "+
			"%d partitions, 3 channels, 2 tenants, %d conflicting and %d malformed",
			o.Seed, stream.Trades, n, stream.Events, h.res.MessagesPerEvent, Partitions, stream.Conflicts, stream.Malformed))
	produceStart := time.Now()
	if err := kafkaops.Produce(ctx, h.brokers, mainTopic, msgs); err != nil {
		return err
	}
	h.log.Info("produced", "messages", n, "took", time.Since(produceStart).Round(time.Millisecond))

	events, err := distinctEvents(values)
	if err != nil {
		return err
	}
	_, rawDB, err := h.dbs.create(ctx, "raw_rows")
	if err != nil {
		return err
	}
	defer func() { _ = rawDB.Close() }()
	info, err := serverInfo(ctx, rawDB)
	if err != nil {
		return err
	}
	h.res.DBProcess = h.meter.serverPID
	h.res.Facts = append(h.res.Facts, "database: "+info)
	h.res.Facts = append(h.res.Facts, h.serverFacts(ctx)...)
	h.res.Facts = append(h.res.Facts, h.consumerFacts()...)

	check := func(db *bun.DB, label string, topic string, want demo.Stream) {
		h.sanity(ctx, db, label, topic, want)
	}
	if !o.OutboxOnly {
		// 1. Transport ceiling.
		var (
			read    int
			elapsed time.Duration
		)
		u, err := h.metered(ctx, func() (err error) {
			read, elapsed, err = transportCeiling(ctx, h.brokers, mainTopic)
			return err
		})
		if err != nil {
			return err
		}
		if read != n {
			return fmt.Errorf("transport ceiling read %d messages, want %d", read, n)
		}
		h.add(Row{
			Key: RowTransport, Name: "transport ceiling: kafka-go, 12 partitions, no-op",
			Messages: read, Events: stream.Events, Elapsed: elapsed, WorkerCPU: u.self, DBCPU: -1, Statements: -1,
			Note: "worker CPU is the harness's (the readers and the no-op handler)",
		})

		// 2. Raw rows and 3. the rule floor, one connection each.
		batch := o.StorageBatch
		err = h.storageRow(ctx, rawDB, Row{
			Key: RowRaw, Name: fmt.Sprintf("raw rows: multi-row INSERTs, %d events/tx, 1 conn", batch),
			Note: "a claim (SETTLED), an order upsert and two ledger rows per event, one transaction per batch; worker CPU is the harness's",
		}, events, batch, rawRows)
		if err != nil {
			return err
		}
		_, floorDB, err := h.dbs.create(ctx, "rule_floor")
		if err != nil {
			return err
		}
		defer func() { _ = floorDB.Close() }()
		err = h.storageRow(ctx, floorDB, Row{
			Key: RowFloor, Name: fmt.Sprintf("rule floor: claims, then settle, %d events/batch, 1 conn", batch),
			Note: "claims inserted ACQUIRED, committed first; then orders, ledger rows and one fence UPDATE in one transaction; " +
				"worker CPU is the harness's",
		}, events, batch, ruleFloor)
		if err != nil {
			return err
		}
		check(floorDB, "rule-floor", mainTopic, stream)

		// 3b. The per-event floor: the rule floor one event per transaction
		// pair, the fewest statements for an event written alone (what a
		// worker that merges nothing pays at low load), over the stream's
		// first events.
		if err := h.eventFloor(ctx, events); err != nil {
			return err
		}

		// 4. Per-message pipeline.
		pmDSN, pmDB, err := h.dbs.create(ctx, "per_message")
		if err != nil {
			return err
		}
		defer func() { _ = pmDB.Close() }()
		row, err := h.throughput(ctx, consumerRun{topic: mainTopic, group: h.dbs.prefix + "per_message", dsn: pmDSN, batchMax: 1}, n, stream.Events)
		if err != nil {
			return err
		}
		row.Key, row.Name = RowPerMessage, "batch size 1 (per message): PAYCB_BATCH_MAX=1"
		h.add(row)
		check(pmDB, "per-message", mainTopic, stream)
	}

	// 5. Batched pipeline.
	bDSN, bDB, err := h.dbs.create(ctx, "batched")
	if err != nil {
		return err
	}
	defer func() { _ = bDB.Close() }()
	batched := consumerRun{topic: mainTopic, group: h.dbs.prefix + "batched", dsn: bDSN, batchMax: o.BatchMax}
	row, err := h.throughput(ctx, batched, n, stream.Events)
	if err != nil {
		return err
	}
	row.Key, row.Name = RowBatched, fmt.Sprintf("batched pipeline: PAYCB_BATCH_MAX=%d", o.BatchMax)
	h.add(row)

	// 5b. The batched pipeline over the same backlog with settled events
	// off: what the outbox costs, as the ratios of the two rows.
	offDSN, offDB, err := h.dbs.create(ctx, "batched_settled_off")
	if err != nil {
		return err
	}
	defer func() { _ = offDB.Close() }()
	off := consumerRun{
		topic: mainTopic, group: h.dbs.prefix + "batched_settled_off", dsn: offDSN, batchMax: o.BatchMax,
		env: []string{settledOff},
	}
	row, err = h.throughput(ctx, off, n, stream.Events)
	if err != nil {
		return err
	}
	row.Key, row.Name = RowBatchedOff, fmt.Sprintf("batched, settled events off: PAYCB_SETTLED_TOPIC=none, PAYCB_BATCH_MAX=%d", o.BatchMax)
	row.Note = "the batched row's backlog and settings without the outbox; the goals compare the two"
	check(offDB, RowBatchedOff, mainTopic, stream)
	h.settledComplete(ctx, bDB, RowBatched, mainTopic, true)
	h.settledComplete(ctx, offDB, RowBatchedOff, mainTopic, false)
	bat, _ := h.res.Row(RowBatched)
	pairs := []OutboxPair{outboxPair(bat, row)}
	for i := 2; i <= o.OutboxPairs; i++ {
		p, err := h.outboxPairRun(ctx, i, stream, n)
		if err != nil {
			return err
		}
		pairs = append(pairs, p)
	}
	h.res.Outbox = pairs
	h.add(row)

	if !o.OutboxOnly {
		// 6. Replay: the same group, offsets reset to earliest, over the
		// settled database: every message is a duplicate.
		if err := h.resetToEarliest(ctx, batched); err != nil {
			return err
		}
		row, err = h.throughput(ctx, batched, n, stream.Events)
		if err != nil {
			return err
		}
		row.Key, row.Name = RowReplay, "replay: same group reset to earliest"
		row.Note = fmt.Sprintf("offsets reset with ops.ApplyReplay; every message a duplicate (no new event); per message: worker %s µs, database %s µs",
			perUnitText(row.perMessage(row.WorkerCPU)), perUnitText(row.perMessage(row.DBCPU)))
		h.add(row)
		check(bDB, "batched+replay", mainTopic, stream)
	}

	// 7, 8 and 9. Latency at a paced rate of distinct events: the
	// requested rate, or half of what the batched pipeline settled from a
	// backlog when that is lower, so the figure is latency rather than
	// queueing. The batched pipeline is paced with one process and with
	// two in one group (the same stream, the partitions shared); the
	// per-message pipeline at the same rate whether or not it keeps up.
	rate := o.PacedRate
	var rateNote string
	if bat, _ := h.res.Row(RowBatched); pacedHeadroom*bat.EventRate < rate {
		rate = max(1, math.Floor(pacedHeadroom*bat.EventRate))
		rateNote = fmt.Sprintf("rate lowered from the requested %.0f to %.0f events/s, half what the batched pipeline settled from a backlog (%.0f events/s)",
			o.PacedRate, rate, bat.EventRate)
	}
	perMsg, _ := h.res.Row(RowPerMessage)
	total := max(1, int(rate*o.PacedDuration.Seconds()))
	row, err = h.pacedRead(ctx, RowPacedRead, demo.Generate(demo.StreamOptions{Seed: o.Seed + 1, Trades: max(1, total/eventsPerTrade), NoTraps: true}), rate)
	if err != nil {
		return err
	}
	row.Key, row.Name = RowPacedRead, fmt.Sprintf("paced read floor %.0f events/s: kafka-go readers, decode, no database", rate)
	if rateNote != "" {
		row.Note += "; " + rateNote
	}
	h.add(row)
	for _, pr := range []struct {
		key, topic string
		batchMax   int
		workers    int
		seed       uint64
	}{
		{RowPacedBatched, RowPacedBatched, o.BatchMax, 1, o.Seed + 1},
		{RowPacedBatched2, RowPacedBatched2, o.BatchMax, 2, o.Seed + 1},
		{RowPacedPerMessage, RowPacedPerMessage, 1, 1, o.Seed + 2},
	} {
		if o.OutboxOnly && pr.key != RowPacedBatched {
			continue
		}
		ps := demo.Generate(demo.StreamOptions{Seed: pr.seed, Trades: max(1, total/eventsPerTrade), NoTraps: true})
		dsn, db, err := h.dbs.create(ctx, strings.ReplaceAll(pr.key, "-", "_"))
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		row, err := h.paced(ctx, consumerRun{topic: pr.topic, group: h.dbs.prefix + pr.key, dsn: dsn, batchMax: pr.batchMax},
			pr.workers, ps, db, rate)
		if err != nil {
			return err
		}
		row.Key = pr.key
		row.Name = fmt.Sprintf("paced %.0f events/s: PAYCB_BATCH_MAX=%d", rate, pr.batchMax)
		if pr.workers > 1 {
			row.Name = fmt.Sprintf("paced %.0f events/s: PAYCB_BATCH_MAX=%d, %d processes", rate, pr.batchMax, pr.workers)
		}
		notes := []string{}
		if row.Note != "" {
			notes = append(notes, row.Note)
		}
		if rateNote != "" {
			notes = append(notes, rateNote)
		}
		if pr.batchMax == 1 && perMsg.EventRate < rate {
			notes = append(notes, fmt.Sprintf("batch size 1 settled only %.0f events/s from a backlog", perMsg.EventRate))
		}
		row.Note = strings.Join(notes, "; ")
		h.add(row)
		check(db, pr.key, pr.topic, ps)
	}
	return nil
}

// OutboxPair is one run of the batched backlog with settled events on and
// one with them off, as ratios of on over off.
type OutboxPair struct {
	// DBCPU, WorkerCPU and Statements are per event, on over off (-1 when
	// unknown); Rate is events/s, on over off.
	DBCPU, WorkerCPU, Statements, Rate float64
}

// outboxPair is the pair of rows on and off.
func outboxPair(on, off Row) OutboxPair {
	div := func(a, b float64) float64 {
		if a < 0 || b <= 0 {
			return -1
		}
		return a / b
	}
	return OutboxPair{
		DBCPU: div(on.DBPerEvent(), off.DBPerEvent()), WorkerCPU: div(on.WorkerPerEvent(), off.WorkerPerEvent()),
		Statements: div(on.StatementsPerEvent(), off.StatementsPerEvent()), Rate: div(on.eventRate(), off.eventRate()),
	}
}

// eventRate is r's EventRate, or its events per second of Elapsed when
// it is not set yet (a row not added).
func (r Row) eventRate() float64 {
	if r.EventRate == 0 && r.Elapsed > 0 {
		return float64(r.Events) / r.Elapsed.Seconds()
	}
	return r.EventRate
}

// outboxPairRun runs pair i: the batched backlog of the main topic (n
// messages of stream) with settled events on and off, each in a database
// and group of its own; an even pair runs off first, so that whatever the
// order favours (the first pair, the main rows, runs on first) is not
// always on the same side.
func (h *harness) outboxPairRun(ctx context.Context, i int, stream demo.Stream, n int) (OutboxPair, error) {
	var rows [2]Row // on, off
	envs := [2][]string{nil, {settledOff}}
	order := [2]int{0, 1}
	if i%2 == 0 {
		order = [2]int{1, 0}
	}
	for _, k := range order {
		env := envs[k]
		name := fmt.Sprintf("outbox_%d_%d", i, k)
		dsn, db, err := h.dbs.create(ctx, name)
		if err != nil {
			return OutboxPair{}, err
		}
		c := consumerRun{topic: mainTopic, group: h.dbs.prefix + name, dsn: dsn, batchMax: h.o.BatchMax, env: env}
		rows[k], err = h.throughput(ctx, c, n, stream.Events)
		if err == nil {
			h.sanity(ctx, db, name, mainTopic, stream)
			h.settledComplete(ctx, db, name, mainTopic, k == 0)
		}
		_ = db.Close()
		if err != nil {
			return OutboxPair{}, err
		}
		// Gone before the next row: the pairs' databases kept would fill
		// the server's buffer pool (128 MiB by default) pair by pair, and
		// the later pairs' rows would pay for evicting them, the on row
		// (more data) more: the ratios rose from 1.15x to 1.42x over five
		// pairs of one run.
		if err := h.dbs.drop(ctx, name); err != nil {
			return OutboxPair{}, err
		}
	}
	on, off := rows[0], rows[1]
	pair := outboxPair(on, off)
	h.log.Info("outbox pair measured", "pair", i, "db_cpu_on_off", pair.DBCPU, "rate_on_off", pair.Rate,
		"db_us_per_event_on", on.perEvent(on.DBCPU), "db_us_per_event_off", off.perEvent(off.DBCPU),
		"worker_us_per_event_on", on.perEvent(on.WorkerCPU), "worker_us_per_event_off", off.perEvent(off.WorkerCPU))
	return pair, nil
}

// eventsPerTrade is about how many distinct money events demo.Generate
// makes per trade (a payment, and refunds for half the trades).
const eventsPerTrade = 2

// eventFloor measures the per-event floor: ruleFloor with a batch of one
// over the first EventFloorEvents events, on a database of its own, and
// checks that database (reconciliation, every claim settled).
func (h *harness) eventFloor(ctx context.Context, events []storageEvent) error {
	_, db, err := h.dbs.create(ctx, "event_floor")
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	subset := events[:min(len(events), h.o.EventFloorEvents)]
	note := "the rule floor one event at a time: its claim inserted ACQUIRED and committed, then its order, ledger rows and " +
		"fence in one transaction; worker CPU is the harness's"
	if len(subset) < len(events) {
		note = fmt.Sprintf("%s; the stream's first %d of %d distinct events (per-event figures; one at a time the whole stream "+
			"would take minutes)", note, len(subset), len(events))
	}
	err = h.storageRow(ctx, db, Row{
		Key: RowEventFloor, Name: "per-event floor: the rule floor, 1 event/batch, 1 conn", Note: note,
	}, subset, 1, ruleFloor)
	if err != nil {
		return err
	}
	if h.reconciled(ctx, db, RowEventFloor) {
		h.claimsSettled(ctx, db, RowEventFloor, mainTopic, len(subset))
	}
	return nil
}

// storageRow measures write over events, batch at a time, on one
// connection of db: the raw rows or a floor, the harness's own work.
func (h *harness) storageRow(ctx context.Context, db *bun.DB, row Row, events []storageEvent, batch int,
	write func(context.Context, bun.Conn, []storageEvent, int) (time.Duration, error),
) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: connection: %w", row.Key, err)
	}
	defer func() { _ = conn.Close() }()
	u, err := h.metered(ctx, func() (err error) {
		row.Elapsed, err = write(ctx, conn, events, batch)
		return err
	})
	if err != nil {
		return err
	}
	row.Events, row.WorkerCPU, row.DBCPU, row.Statements = len(events), u.self, u.server, u.statements
	h.add(row)
	return nil
}

// metered runs fn and returns what it cost, from the meter's readings
// right before and right after.
func (h *harness) metered(ctx context.Context, fn func() error) (usage, error) {
	start := h.meter.read(ctx)
	if err := fn(); err != nil {
		return usage{}, err
	}
	return h.meter.since(start, h.meter.read(ctx)), nil
}

// idleSample is how long serverFact watches the database server at rest.
const idleSample = time.Second

// Above these rates at rest, the database server is busy enough with
// other clients for the table to say that its figures include their work.
const (
	busyStatements = 20   // statements/s
	busyCPU        = 0.05 // CPU seconds per second
)

// consumerFacts names the settings ConsumerEnv gives the consumers, when
// there are any.
func (h *harness) consumerFacts() []string {
	if len(h.o.ConsumerEnv) == 0 {
		return nil
	}
	return []string{"consumer environment, beyond the harness's: " + strings.Join(h.o.ConsumerEnv, " ")}
}

// serverFacts say where the database's CPU figures come from, what the
// server did at rest (other clients, background work; every row's
// database figures include it) and how loaded the machine was.
func (h *harness) serverFacts(ctx context.Context) []string {
	var facts []string
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(load)); len(f) >= 3 {
			facts = append(facts, fmt.Sprintf("load average before the run: %s %s %s (1, 5, 15 min; %d CPUs)",
				f[0], f[1], f[2], runtime.NumCPU()))
		}
	}
	start := h.meter.read(ctx)
	t := time.NewTimer(idleSample)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	u := h.meter.since(start, h.meter.read(ctx))
	stmts := float64(u.statements) / idleSample.Seconds()
	if h.meter.serverPID <= 0 {
		facts = append(facts, fmt.Sprintf("database process: not on this machine, database CPU shown as -; "+
			"at rest before the run: %.0f statements/s", stmts))
	} else {
		facts = append(facts, fmt.Sprintf("database process: pid %d, CPU from /proc/%d/stat; at rest before the run: "+
			"%.0f ms CPU/s and %.0f statements/s", h.meter.serverPID, h.meter.serverPID, ms(u.server)/idleSample.Seconds(), stmts))
	}
	if stmts > busyStatements || u.server.Seconds()/idleSample.Seconds() > busyCPU {
		facts = append(facts, "WARNING: the database server was busy with other clients before the run; "+
			"its CPU and statement figures below include their work")
	}
	return facts
}

func (h *harness) add(r Row) {
	if r.Rate == 0 && r.Elapsed > 0 {
		r.Rate = float64(r.Messages) / r.Elapsed.Seconds()
	}
	r.EventRate = r.eventRate()
	if r.SteadyRate > 0 {
		steady := fmt.Sprintf("first commit %s after start; %.0f messages/s from then to the last commit",
			r.FirstCommit.Round(time.Millisecond), r.SteadyRate)
		if r.Note != "" {
			steady = r.Note + "; " + steady
		}
		r.Note = steady
	}
	h.res.Rows = append(h.res.Rows, r)
	h.log.Info("measured", "row", r.Key, "messages", r.Messages, "events", r.Events, "elapsed", r.Elapsed.Round(time.Millisecond),
		"messages_per_second", int64(r.Rate), "events_per_second", int64(r.EventRate), "worker_cpu", r.WorkerCPU,
		"db_cpu", r.DBCPU, "statements", r.Statements, "p50", r.P50, "p99", r.P99, "peak_rss", r.PeakRSS)
}

// consumerRun is one `consumer run` process's configuration.
type consumerRun struct {
	topic, group, dsn string
	batchMax          int
	// env is KEY=VALUE settings of this row's own, given after the
	// harness's and before Options.ConsumerEnv.
	env []string
}

// settledOff is the setting that turns settled events off.
const settledOff = "PAYCB_SETTLED_TOPIC=none"

// settledOn reports whether c's consumers write and publish settled events.
func (c consumerRun) settledOn() bool { return !slices.Contains(c.env, settledOff) }

// startConsumer starts bin/consumer run with the contract's variables;
// its admin address is the proc's admin.
func (h *harness) startConsumer(ctx context.Context, c consumerRun) (*proc, error) {
	port, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	admin := "127.0.0.1:" + strconv.Itoa(port)
	env := []string{
		"PAYCB_KAFKA_BROKERS=" + strings.Join(h.brokers, ","),
		"PAYCB_KAFKA_TOPIC=" + c.topic,
		"PAYCB_KAFKA_GROUP=" + c.group,
		"PAYCB_DB_DSN=" + c.dsn,
		"PAYCB_ADMIN_ADDR=" + admin,
		"PAYCB_WECHAT_APIV3_KEY=" + sample.APIv3Key,
		"PAYCB_LOG_LEVEL=warn",
		"PAYCB_BATCH_MAX=" + strconv.Itoa(c.batchMax),
	}
	if h.o.ProfileDir != "" {
		env = append(env, "PAYCB_ADMIN_PPROF=true")
	}
	env = append(env, c.env...)
	env = append(env, h.o.ConsumerEnv...)
	p, err := startProc(ctx, h.log, "consumer ("+c.group+")", h.work, filepath.Join(h.o.BinDir, "consumer"), []string{"run"}, env, nil)
	if err != nil {
		return nil, err
	}
	p.admin = "http://" + admin
	return p, nil
}

// readyzURL is consumer p's /readyz.
func (p *proc) readyzURL() string { return p.admin + "/readyz" }

// startReady starts a consumer for c (startConsumer) and waits until its
// /readyz answers; the caller kills it when done.
func (h *harness) startReady(ctx context.Context, c consumerRun) (*proc, error) {
	p, err := h.startConsumer(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, p.readyzURL(), time.Minute); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// finish stops the consumers ps gracefully and returns what their row
// cost since before: the database's share, the workers' CPU summed and the
// largest of their peak RSS.
func (h *harness) finish(ctx context.Context, ps []*proc, before reading) (usage, time.Duration, int64, error) {
	u := h.meter.since(before, h.meter.read(ctx))
	var (
		worker time.Duration
		rss    int64
	)
	for _, p := range ps {
		cpu, peak, err := p.usage()
		if err != nil {
			return usage{}, 0, 0, err
		}
		worker += cpu
		rss = max(rss, peak)
	}
	for _, p := range ps {
		if err := p.stop(45 * time.Second); err != nil {
			return usage{}, 0, 0, err
		}
	}
	return u, worker, rss, nil
}

// consumeTimeout bounds how long one pipeline row may take to commit
// everything.
func (h *harness) consumeTimeout(messages int) time.Duration {
	return 2*time.Minute + time.Duration(messages)*5*time.Millisecond
}

// throughput runs one consumer over the backlog of c.topic (messages,
// carrying events distinct events) until its group has committed every
// partition to the end, and measures what that cost.
func (h *harness) throughput(ctx context.Context, c consumerRun, messages, events int) (Row, error) {
	if !h.meter.waitQuiet(ctx) {
		h.log.Warn("the database server did not go quiet before the row; its figures include that work", "group", c.group)
	}
	before := h.meter.read(ctx)
	start := time.Now()
	p, err := h.startReady(ctx, c)
	if err != nil {
		return Row{}, err
	}
	defer p.kill()
	startup := time.Since(start)
	first, err := h.waitConsumed(ctx, []*proc{p}, c, messages)
	if err != nil {
		return Row{}, err
	}
	elapsed := time.Since(start)
	u, worker, rss, err := h.finish(ctx, []*proc{p}, before)
	if err != nil {
		return Row{}, err
	}
	row := Row{
		Messages: messages, Events: events, Elapsed: elapsed, Startup: startup, PeakRSS: rss,
		WorkerCPU: worker, DBCPU: u.server, Statements: u.statements,
	}
	if !first.at.IsZero() {
		row.FirstCommit = first.at.Sub(start)
		if rest := elapsed - row.FirstCommit; rest > 0 && int64(messages) > first.committed {
			row.SteadyRate = float64(int64(messages)-first.committed) / rest.Seconds()
		}
	}
	return row, nil
}

// pollInterval is how often waiting for a pipeline row reads the group's
// progress: every 20ms, so that the row's elapsed time ends close to the
// last commit, and less often over big backlogs (at most every 200ms, still
// a tiny share of their elapsed time) so that the harness takes less CPU
// from the worker and the broker.
func pollInterval(messages int) time.Duration {
	return min(max(20*time.Millisecond, time.Duration(messages)*200*time.Nanosecond), 200*time.Millisecond)
}

// progressEvery is how often waiting for a pipeline row logs its progress.
const progressEvery = 10 * time.Second

// waitConsumed waits for c.group to commit c.topic to its end (messages in
// all), giving up early when one of its consumer processes ps exits. Every
// progressEvery it logs how far the group got and the processes' RSS
// (summed; the peak is the largest).
func (h *harness) waitConsumed(ctx context.Context, ps []*proc, c consumerRun, messages int) (firstCommit, error) {
	ctx, cancel := context.WithTimeout(ctx, h.consumeTimeout(messages))
	defer cancel()
	for _, p := range ps {
		go func() {
			select {
			case <-p.done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	start := time.Now()
	lastLog := start
	var first firstCommit
	initial := int64(-1)
	report := func(progress []kafkaops.PartitionProgress) {
		var committed int64
		for _, pp := range progress {
			committed += max(pp.Committed, 0)
		}
		switch {
		case initial < 0:
			initial = committed
		case first.at.IsZero() && committed > initial:
			first = firstCommit{at: time.Now(), committed: committed - initial}
		}
		if time.Since(lastLog) < progressEvery {
			return
		}
		lastLog = time.Now()
		var rss, peak int64
		for _, p := range ps {
			r, _ := p.rss()
			pk, _ := p.peakRSS()
			rss, peak = rss+r, max(peak, pk)
		}
		h.log.Info("consuming", "group", c.group, "committed", committed, "lag", kafkaops.TotalLag(progress),
			"after", time.Since(start).Round(time.Second), "rss", mib(rss), "peak_rss", mib(peak))
	}
	err := kafkaops.WaitConsumed(ctx, h.brokers, c.group, c.topic, pollInterval(messages), report)
	if err != nil {
		for _, p := range ps {
			if p.exited() {
				return first, p.failure()
			}
		}
	}
	return first, err
}

// firstCommit is when a group first committed past where it started, and
// how many messages that first commit covered.
type firstCommit struct {
	at        time.Time
	committed int64
}

// resetToEarliest moves c.group's offsets to the start of c.topic once the
// group has no live members, as an operator's replay does.
func (h *harness) resetToEarliest(ctx context.Context, c consumerRun) error {
	k := kafkaops.Kafka{Brokers: h.brokers, Topic: c.topic, Group: c.group, DLQTopic: c.topic + ".dlq"}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		plan, err := ops.PlanReplay(ctx, k, ops.ReplayTarget{Earliest: true})
		if err == nil {
			if err := ops.ApplyReplay(ctx, k, plan); err != nil {
				return fmt.Errorf("replay reset: %w", err)
			}
			h.log.Info("group reset to earliest", "group", c.group, "replay", plan.TotalReplay())
			return nil
		}
		if !errors.Is(err, ops.ErrGroupActive) {
			return fmt.Errorf("replay plan: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replay reset: group %s kept live members: %w", c.group, ctx.Err())
		case <-tick.C:
		}
	}
}

// paced starts workers consumers in c.group (when more than one, waits
// until each owns some of the topic's partitions), publishes stream at
// rate distinct events per second (its messages, channel retries included,
// proportionally faster) with each envelope stamped at its publish time,
// waits until everything is committed, and reads publish→settled latencies
// from the claims. The CPU and statements cover the whole row, from
// starting the first consumer to the last commit, idle moments included;
// the worker's CPU is every process's summed, its peak RSS the largest.
func (h *harness) paced(ctx context.Context, c consumerRun, workers int, stream demo.Stream, db *bun.DB, rate float64) (Row, error) {
	msgs, msgRate, err := pacedStream(stream, rate)
	if err != nil {
		return Row{}, err
	}
	before := h.meter.read(ctx)
	start := time.Now()
	var ps []*proc
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	// Every process is started at once, so their start-ups overlap; the
	// first to be ready has joined, the others join after it and the
	// group rebalances.
	for range workers {
		p, err := h.startConsumer(ctx, c)
		if err != nil {
			return Row{}, err
		}
		ps = append(ps, p)
	}
	var (
		notes     []string
		atPublish []int
		// rebalance is what the database did from the first process's
		// readiness until the group shared the partitions among them
		// all: the workers wait for the group (kafka-go rejoins at its
		// next heartbeat), a shared server's other clients do not, so it
		// is left out of the row.
		rebalance = usage{}
		joined    reading
		firstUp   time.Time
	)
	readiness := make(chan error, len(ps))
	for _, p := range ps {
		go func() { readiness <- p.waitReady(ctx, p.readyzURL(), time.Minute) }()
	}
	for n := range ps {
		if err := <-readiness; err != nil {
			return Row{}, err // the deferred kills end the other waits
		}
		if n == 0 && workers > 1 {
			joined, firstUp = h.meter.read(ctx), time.Now()
		}
	}
	if workers > 1 {
		owned, settled, err := h.waitShared(ctx, ps, sharedWait)
		if err != nil {
			return Row{}, err
		}
		rebalance = h.meter.since(joined, h.meter.read(ctx))
		notes = append(notes, fmt.Sprintf("the database figures leave out the %s from the first process's readiness "+
			"to the partitions shared among all", time.Since(firstUp).Round(10*time.Millisecond)))
		atPublish = owned
		if !settled {
			notes = append(notes, fmt.Sprintf("ASSIGNMENT NOT SETTLED within %s of all being ready: partitions owned at publish %s",
				sharedWait, ownedText(owned)))
		}
	}
	startup := time.Since(start)
	var profiled []<-chan error
	for i, p := range ps {
		name := c.group
		if workers > 1 {
			name = fmt.Sprintf("%s-p%d", c.group, i+1)
		}
		profiled = append(profiled, h.profile(ctx, p, name))
	}
	published, achieved, err := producePaced(ctx, h.brokers, c.topic, msgs, msgRate)
	if err != nil {
		return Row{}, err
	}
	for _, done := range profiled {
		if err := <-done; err != nil {
			h.problem("%s: CPU profile: %v", c.group, err)
		}
	}
	lastPublish := time.Now()
	if _, err := h.waitConsumed(ctx, ps, c, len(msgs)); err != nil {
		return Row{}, err
	}
	drain := time.Since(lastPublish)
	var polls int64
	if c.settledOn() {
		// The settled events are published after their settlement's
		// commit, so the last of them may follow the group's last offset
		// commit: wait for them before stopping the workers.
		if polls, err = h.waitPublished(ctx, db, c.group); err != nil {
			return Row{}, err
		}
	}
	if workers > 1 {
		owned, err := ownedPartitions(ctx, ps)
		if err != nil {
			return Row{}, err
		}
		if slices.Contains(owned, 0) || slices.Contains(atPublish, 0) {
			notes = append(notes, fmt.Sprintf("A PROCESS OWNED NO PARTITION: partitions owned at publish %s, at the end %s",
				ownedText(atPublish), ownedText(owned)))
		} else {
			notes = append(notes, fmt.Sprintf("partitions owned at publish %s, at the end %s", ownedText(atPublish), ownedText(owned)))
		}
		notes = append(notes, fmt.Sprintf("%d processes in one group: worker CPU summed over them, peak RSS the largest, "+
			"startup until all joined and the partitions were shared", workers))
	}
	u, worker, rss, err := h.finish(ctx, ps, before)
	if err != nil {
		return Row{}, err
	}
	u = u.less(rebalance)
	u.statements -= polls // the harness's own, waiting for the outbox
	lat, err := latencies(ctx, db, c.topic, published)
	if err != nil {
		return Row{}, err
	}
	if len(lat.total) != len(published) {
		h.problem("%s: %d claims settled from %s, want %d", c.group, len(lat.total), c.topic, len(published))
	}
	row := Row{
		Messages: len(msgs), Events: stream.Events, Rate: achieved,
		Elapsed: time.Duration(float64(len(msgs)) / achieved * float64(time.Second)),
		Startup: startup, PeakRSS: rss, WorkerCPU: worker, DBCPU: u.server, Statements: u.statements,
	}
	row.P50, row.P99 = percentile(lat.total, 0.50), percentile(lat.total, 0.99)
	notes = append([]string{fmt.Sprintf("p50/p99 publish->claimed %s/%s, claimed->settled %s/%s",
		latency(percentile(lat.toClaim, 0.50)), latency(percentile(lat.toClaim, 0.99)),
		latency(percentile(lat.settle, 0.50)), latency(percentile(lat.settle, 0.99)))}, notes...)
	if c.settledOn() {
		sl, err := settledLatencies(ctx, db, published)
		if err != nil {
			return Row{}, err
		}
		h.settledComplete(ctx, db, c.group, c.topic, true)
		row.SettledP50, row.SettledP99 = percentile(sl.toTopic, 0.50), percentile(sl.toTopic, 0.99)
		row.AckP50, row.AckP99 = percentile(sl.ack, 0.50), percentile(sl.ack, 0.99)
		notes = append(notes, fmt.Sprintf("settled events: p50/p99 publish->settled event acked %s/%s, "+
			"settlement->acked %s/%s (%d events)", latency(row.SettledP50), latency(row.SettledP99),
			latency(row.AckP50), latency(row.AckP99), len(sl.toTopic)))
	}
	if achieved < 0.95*msgRate {
		notes = append(notes, fmt.Sprintf("publisher reached only %.0f of %.0f messages/s", achieved, msgRate))
	}
	if drain > fellBehind {
		notes = append(notes, fmt.Sprintf("FELL BEHIND: the group committed the last message %s after the last publish, "+
			"so this latency is mostly queueing", drain.Round(10*time.Millisecond)))
	}
	row.Note = strings.Join(notes, "; ")
	return row, nil
}

// pacedStream prepares stream's messages for producePaced, and returns
// the message rate that publishes rate distinct events/s.
func pacedStream(stream demo.Stream, rate float64) ([]pacedMessage, float64, error) {
	values := make([][]byte, len(stream.Messages))
	msgKeys := make([][]byte, len(stream.Messages))
	for i, m := range stream.Messages {
		values[i], msgKeys[i] = m.Value, m.Key
	}
	msgs, err := preparePaced(values, msgKeys)
	if err != nil {
		return nil, 0, err
	}
	return msgs, rate * float64(len(msgs)) / float64(max(1, stream.Events)), nil
}

// pacedRead measures the paced read floor: stream published to topic at
// rate distinct events/s, as to a paced pipeline row, and read by the
// readfloor process (one kafka-go reader per partition with the worker's
// fetch settings, each message decoded, nothing written). Its CPU, from
// its rusage, counts its whole life, as a consumer's counts from its
// start; the database is not involved.
func (h *harness) pacedRead(ctx context.Context, topic string, stream demo.Stream, rate float64) (Row, error) {
	msgs, msgRate, err := pacedStream(stream, rate)
	if err != nil {
		return Row{}, err
	}
	p, err := startProc(ctx, h.log, "readfloor", h.work, filepath.Join(h.o.BinDir, "readfloor"),
		[]string{"-brokers", strings.Join(h.brokers, ","), "-topic", topic, "-messages", strconv.Itoa(len(msgs))}, nil, nil)
	if err != nil {
		return Row{}, err
	}
	defer p.kill()
	_, achieved, err := producePaced(ctx, h.brokers, topic, msgs, msgRate)
	if err != nil {
		return Row{}, err
	}
	t := time.NewTimer(h.consumeTimeout(len(msgs)))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return Row{}, fmt.Errorf("readfloor read fewer than %d messages within %s of the last publish; last output:\n%s",
			len(msgs), h.consumeTimeout(len(msgs)), p.out.String())
	case <-ctx.Done():
		return Row{}, fmt.Errorf("wait for readfloor: %w", ctx.Err())
	}
	if p.err != nil {
		return Row{}, p.failure()
	}
	st := p.cmd.ProcessState
	row := Row{
		Messages: len(msgs), Events: stream.Events, Rate: achieved,
		Elapsed:   time.Duration(float64(len(msgs)) / achieved * float64(time.Second)),
		WorkerCPU: st.UserTime() + st.SystemTime(), DBCPU: -1, Statements: -1,
		Note: "the stream of the paced batched rows, read by the readfloor process (one kafka-go reader per partition, " +
			"the worker's fetch settings, each message decoded, no group, no offsets committed, nothing written); " +
			"worker CPU is its rusage over its whole life (start-up and closing included)",
	}
	return row, nil
}

// profile takes a CPU profile of consumer p over the paced row's
// publishing into ProfileDir/NAME.pprof when ProfileDir is set; the
// channel gives its error once the profile is written (at once when
// there is none to take).
func (h *harness) profile(ctx context.Context, p *proc, name string) <-chan error {
	done := make(chan error, 1)
	if h.o.ProfileDir == "" {
		done <- nil
		return done
	}
	go func() {
		done <- fetchTo(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.admin, max(1, int(h.o.PacedDuration.Seconds()))),
			filepath.Join(h.o.ProfileDir, name+".pprof"))
	}()
	return done
}

// fetchTo writes the body of a GET of url to path.
func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", url, resp.Status)
	}
	f, err := os.Create(path) //nolint:gosec // the operator's profile directory
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// latencySplit is the latency of each settled event of a paced row, whole
// and in its two halves, each sorted.
type latencySplit struct {
	total   []time.Duration // first publish -> claim settled_at
	toClaim []time.Duration // first publish -> claim created_at (delivery and queueing)
	settle  []time.Duration // claim created_at -> settled_at (the settlement)
}

// latencies returns, for every settled event of topic that was published
// in published, its publish→settled latency and the two halves of it.
func latencies(ctx context.Context, db bun.IDB, topic string, published map[string]time.Time) (latencySplit, error) {
	var out latencySplit
	rows, err := db.QueryContext(ctx, "SELECT tenant_id, idempotent_key, created_at, settled_at FROM ss_channel_idempotent "+
		"WHERE source_topic = ? AND status = 'SETTLED'", topic)
	if err != nil {
		return out, fmt.Errorf("read settle times: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			tenant           int64
			key              []byte
			created, settled time.Time
		)
		if err := rows.Scan(&tenant, &key, &created, &settled); err != nil {
			return out, fmt.Errorf("read settle times: %w", err)
		}
		if at, ok := published[fmt.Sprintf("%d|%s", tenant, key)]; ok {
			out.total = append(out.total, settled.Sub(at))
			out.toClaim = append(out.toClaim, created.Sub(at))
			out.settle = append(out.settle, settled.Sub(created))
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("read settle times: %w", err)
	}
	slices.Sort(out.total)
	slices.Sort(out.toClaim)
	slices.Sort(out.settle)
	return out, nil
}

// settledSplit is the latency of each published settled event of a paced
// row, sorted.
type settledSplit struct {
	toTopic []time.Duration // first publish -> settled event acknowledged (published_at)
	ack     []time.Duration // settlement (settled_at) -> acknowledged (published_at)
}

// settledLatencies returns, for every published settled event whose claim
// was published in published, its latencies. A settled event's outbox row
// has its claim's key; published_at is taken as soon as the broker
// acknowledged the write, before the row is marked.
func settledLatencies(ctx context.Context, db bun.IDB, published map[string]time.Time) (settledSplit, error) {
	var out settledSplit
	rows, err := db.QueryContext(ctx, "SELECT tenant_id, idempotent_key, settled_at, published_at FROM ss_settled_outbox "+
		"WHERE published = 1")
	if err != nil {
		return out, fmt.Errorf("read settled-event times: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			tenant         int64
			key            []byte
			settled, acked time.Time
		)
		if err := rows.Scan(&tenant, &key, &settled, &acked); err != nil {
			return out, fmt.Errorf("read settled-event times: %w", err)
		}
		if at, ok := published[fmt.Sprintf("%d|%s", tenant, key)]; ok {
			out.toTopic = append(out.toTopic, acked.Sub(at))
			out.ack = append(out.ack, acked.Sub(settled))
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("read settled-event times: %w", err)
	}
	slices.Sort(out.toTopic)
	slices.Sort(out.ack)
	return out, nil
}

// waitPublished waits until db's outbox holds no unpublished settled
// event, polling every 10ms for at most a minute (the outbox sweeper's
// grace and interval included), and returns how many statements it
// issued, so the row can leave them out.
func (h *harness) waitPublished(ctx context.Context, db bun.IDB, label string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	var polls int64
	for {
		var n int64
		polls++
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ss_settled_outbox WHERE published = 0").Scan(&n); err != nil {
			return polls, fmt.Errorf("%s: wait for the settled events: %w", label, err)
		}
		if n == 0 {
			return polls, nil
		}
		select {
		case <-ctx.Done():
			return polls, fmt.Errorf("%s: %d settled events still unpublished: %w", label, n, ctx.Err())
		case <-t.C:
		}
	}
}

// settledComplete checks db's outbox against its claims of topic: with
// settled events on, a row for each claim settled POSTED (published or
// not: a backlog row stops its worker at its last offset commit, and the
// sweeper of a later run would publish what is left; a paced row waits for
// them all to be published first); off, none at all. A settlement that
// moved nothing (NO_MONEY) has no settled event.
func (h *harness) settledComplete(ctx context.Context, db *bun.DB, label, topic string, on bool) {
	var posted, rows, missing int
	err := db.QueryRowContext(ctx, "SELECT "+
		"(SELECT COUNT(*) FROM ss_channel_idempotent WHERE source_topic = ? AND settle_outcome = 'POSTED'), "+
		"(SELECT COUNT(*) FROM ss_settled_outbox), "+
		"(SELECT COUNT(*) FROM ss_channel_idempotent c WHERE c.source_topic = ? AND c.settle_outcome = 'POSTED' AND NOT EXISTS "+
		"(SELECT 1 FROM ss_settled_outbox o WHERE o.tenant_id = c.tenant_id AND o.idempotent_key = c.idempotent_key))",
		topic, topic).Scan(&posted, &rows, &missing)
	switch {
	case err != nil:
		h.problem("%s: count settled events: %v", label, err)
	case on && missing > 0:
		h.problem("%s: %d of %d claims settled POSTED have no settled event", label, missing, posted)
	case !on && rows > 0:
		h.problem("%s: %d settled events written with settled events off", label, rows)
	}
}

// percentile is the nearest-rank percentile of sorted durations (0 when
// there are none).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (h *harness) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.log.Warn("sanity check failed", "problem", msg)
	h.res.Problems = append(h.res.Problems, msg)
}

// sanity checks a pipeline's database after its runs: the reconciliation
// checks (settlement.Reconcile, as consumer reconcile runs them), every claim
// SETTLED, one claim per distinct event of the stream, and per-tenant totals
// equal to what the channels reported.
func (h *harness) sanity(ctx context.Context, db *bun.DB, label, topic string, want demo.Stream) {
	if !h.reconciled(ctx, db, label) {
		return
	}
	rep, err := settlement.Totals(ctx, db)
	if err != nil {
		h.problem("%s: ledger totals: %v", label, err)
		return
	}
	if !h.claimsSettled(ctx, db, label, topic, want.Events) {
		return
	}
	for tenant, paid := range want.Paid {
		got := rep.Tenants[tenant]
		if got.Paid != paid || got.Refunded != want.Refunded[tenant] {
			h.problem("%s: tenant %d paid %d refunded %d, the channels reported %d and %d",
				label, tenant, got.Paid, got.Refunded, paid, want.Refunded[tenant])
		}
	}
}

// reconciled runs the reconciliation checks on db, recording every
// discrepancy; false when they could not run.
func (h *harness) reconciled(ctx context.Context, db *bun.DB, label string) bool {
	rec, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{})
	if err != nil {
		h.problem("%s: reconcile: %v", label, err)
		return false
	}
	for _, d := range rec.Discrepancies {
		h.problem("%s: %s", label, d)
	}
	return true
}

// claimsSettled checks that db holds events claims (one per distinct event
// of topic written), every one SETTLED; false when they could not be
// counted.
func (h *harness) claimsSettled(ctx context.Context, db *bun.DB, label, topic string, events int) bool {
	var claims, unsettled int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(status <> 'SETTLED'), 0) FROM ss_channel_idempotent").Scan(&claims, &unsettled)
	if err != nil {
		h.problem("%s: count claims: %v", label, err)
		return false
	}
	if claims != events {
		h.problem("%s: %d claims, want %d (one per distinct event of %s)", label, claims, events, topic)
	}
	if unsettled != 0 {
		h.problem("%s: %d claims not SETTLED", label, unsettled)
	}
	return true
}

// sharedWait bounds how long a paced row with several consumers waits,
// once all are ready, for the group to share the partitions among them.
const sharedWait = 30 * time.Second

// waitShared waits until the consumers ps together own each of the
// topic's Partitions exactly once, in one generation, every one of them
// owning some: the group rebalanced after the last one joined. It returns
// the partitions each owned when it stopped waiting, and false when
// timeout passed first.
func (h *harness) waitShared(ctx context.Context, ps []*proc, timeout time.Duration) ([]int, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		reports, err := partitionReports(ctx, ps)
		if err != nil && ctx.Err() == nil {
			return nil, false, err
		}
		owned := make([]int, len(ps))
		seen := map[int]bool{}
		generations := map[int32]bool{}
		disjoint := true
		for i, rs := range reports {
			owned[i] = len(rs)
			for _, r := range rs {
				disjoint = disjoint && !seen[r.Partition]
				seen[r.Partition] = true
				generations[r.Generation] = true
			}
		}
		if err == nil && disjoint && len(seen) == Partitions && len(generations) == 1 && !slices.Contains(owned, 0) {
			h.log.Info("partitions shared", "owned", ownedText(owned))
			return owned, true, nil
		}
		select {
		case <-ctx.Done():
			return owned, false, nil
		case <-tick.C:
		}
	}
}

// ownedPartitions returns how many partitions each consumer of ps owns now.
func ownedPartitions(ctx context.Context, ps []*proc) ([]int, error) {
	reports, err := partitionReports(ctx, ps)
	if err != nil {
		return nil, err
	}
	owned := make([]int, len(reports))
	for i, rs := range reports {
		owned[i] = len(rs)
	}
	return owned, nil
}

// partitionReports reads what each consumer of ps reports on its admin
// /partitions: the partitions it owns.
func partitionReports(ctx context.Context, ps []*proc) ([][]consumer.PartitionReport, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	out := make([][]consumer.PartitionReport, len(ps))
	for i, p := range ps {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.admin+consumer.PartitionsPath, nil)
		if err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", p.name, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", p.name, err)
		}
		err = json.NewDecoder(resp.Body).Decode(&out[i])
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("partitions of %s: %s", p.name, resp.Status)
		}
		if err != nil {
			return nil, fmt.Errorf("partitions of %s: decode: %w", p.name, err)
		}
	}
	return out, nil
}

// ownedText formats partition counts per process: "6+6".
func ownedText(owned []int) string {
	parts := make([]string, len(owned))
	for i, n := range owned {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, "+")
}
