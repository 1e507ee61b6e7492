// Package bench is the end-to-end benchmark behind `make bench`: in one run
// it builds the consumer, starts a Kafka broker (kfake) as a process of its
// own, creates fresh MariaDB/MySQL databases, produces a realistic generated
// stream, and measures the worker against the two ceilings it cannot beat:
// kafka-go reading the topic with a no-op handler, and raw multi-row inserts
// of the rows an event writes. It then measures the per-message pipeline,
// the batched pipeline, a replay, and publish→settled latency at a paced
// rate, and reports one table (Result.Table).
//
// Figures on a shared machine are noisy: compare rows of one run (the
// ratios) rather than absolute numbers across runs.
//
// This package must never touch a database it did not create (every name
// starts with paycb_bench_<random>_ and is dropped at the end), commit
// offsets for a group with live members, or leave a subprocess running when
// Run returns.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
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
	// DefaultStorageBatch is how many events one storage-ceiling
	// transaction inserts.
	DefaultStorageBatch = 500
	// DefaultStorageConns is how many connections insert concurrently for
	// the storage ceiling.
	DefaultStorageConns = 4
	// DefaultPacedRate is the publish rate of the latency rows, messages/s.
	DefaultPacedRate = 1000
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
	RowTransport      = "transport"
	RowStorage        = "storage"
	RowPerMessage     = "per-message"
	RowBatched        = "batched"
	RowReplay         = "replay"
	RowPacedBatched   = "paced-batched"
	RowPacedPerMesage = "paced-per-message"
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
	// BinDir receives the built consumer and kfake-broker (default
	// RepoDir/bin).
	BinDir string
	// GoTool is the go command (default "go", looked up on PATH).
	GoTool string
	// BatchMax is PAYCB_BATCH_MAX of the batched rows (default
	// DefaultBatchMax).
	BatchMax int
	// StorageBatch and StorageConns shape the storage ceiling (defaults
	// DefaultStorageBatch and DefaultStorageConns).
	StorageBatch, StorageConns int
	// PacedRate (messages/s) and PacedDuration shape the latency rows
	// (defaults DefaultPacedRate and DefaultPacedDuration). The rate is
	// lowered to half the batched pipeline's backlog throughput when that is
	// less, and the table says so.
	PacedRate     float64
	PacedDuration time.Duration
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
	if o.StorageConns <= 0 {
		o.StorageConns = DefaultStorageConns
	}
	if o.PacedRate <= 0 {
		o.PacedRate = DefaultPacedRate
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
	// Count is what was processed: messages, or distinct events for the
	// storage ceiling.
	Count int
	// Elapsed is the wall time the count took. For pipelines it runs from
	// starting the consumer process to the group's last commit.
	Elapsed time.Duration
	// Rate is Count per second of Elapsed; for paced rows the publish rate
	// achieved.
	Rate float64
	// Startup is, for pipelines, the time from starting the process to its
	// readiness (consumer group joined), included in Elapsed.
	Startup time.Duration
	// P50 and P99 are publish→settled latencies (paced rows only).
	P50, P99 time.Duration
	// FirstCommit is, for backlog pipelines, the time from starting the
	// process to the group's first commit (joining, first fetch and first
	// batches); SteadyRate is the messages committed after that first
	// commit per second of the rest of Elapsed.
	FirstCommit time.Duration
	SteadyRate  float64
	// PeakRSS is the consumer process's VmHWM in bytes (pipelines only).
	PeakRSS int64
	// Note qualifies the row.
	Note string
}

// Result is what a run measured.
type Result struct {
	// Facts describe the run: machine, server, stream.
	Facts []string
	// Rows, in table order.
	Rows []Row
	// Problems lists failed sanity checks (ledger invariants, claims left
	// unsettled, totals that differ from the stream's); empty when all held.
	Problems []string
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

func (h *harness) build(ctx context.Context) error {
	for _, target := range []struct{ out, pkg string }{
		{"consumer", "./cmd/consumer"},
		{"kfake-broker", "./cmd/kfake-broker"},
	} {
		start := time.Now()
		out := filepath.Join(h.o.BinDir, target.out)
		cmd := exec.CommandContext(ctx, h.o.GoTool, "build", "-o", out, target.pkg) //nolint:gosec // the caller's go tool building this module
		cmd.Dir = h.o.RepoDir
		output, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %w\n%s", target.pkg, err, output)
		}
		h.log.Info("built", "binary", filepath.Join(h.o.BinDir, target.out), "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// e2eTopics are the full run's input topics: the main stream and the two
// paced streams.
var e2eTopics = []string{mainTopic, "paced-batched", "paced-per-message"}

// startBroker starts the kfake-broker process with topics (Partitions
// each) and a one-partition dead-letter topic for each.
func (h *harness) startBroker(ctx context.Context, topics []string) (*proc, error) {
	args := []string{"--port", "0"}
	for _, t := range topics {
		args = append(args, "--topic", fmt.Sprintf("%s:%d", t, Partitions), "--topic", t+".dlq:1")
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
	h.res.Facts = append(h.res.Facts,
		fmt.Sprintf("machine: %d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		fmt.Sprintf("stream: seed %d, %d trades, %d messages, %d distinct money events (%.2f messages per event), "+
			"%d partitions, 3 channels, 2 tenants, %d conflicting and %d malformed",
			o.Seed, stream.Trades, n, stream.Events, float64(n)/float64(stream.Events), Partitions, stream.Conflicts, stream.Malformed))
	produceStart := time.Now()
	if err := kafkaops.Produce(ctx, h.brokers, mainTopic, msgs); err != nil {
		return err
	}
	h.log.Info("produced", "messages", n, "took", time.Since(produceStart).Round(time.Millisecond))

	// 1. Transport ceiling.
	read, elapsed, err := transportCeiling(ctx, h.brokers, mainTopic)
	if err != nil {
		return err
	}
	if read != n {
		return fmt.Errorf("transport ceiling read %d messages, want %d", read, n)
	}
	h.add(Row{Key: RowTransport, Name: "transport ceiling: kafka-go, 12 partitions, no-op", Count: read, Elapsed: elapsed})

	// 2. Storage ceiling.
	events, err := distinctEvents(values)
	if err != nil {
		return err
	}
	_, raw, err := h.dbs.create(ctx, "storage")
	if err != nil {
		return err
	}
	defer func() { _ = raw.Close() }()
	info, err := serverInfo(ctx, raw)
	if err != nil {
		return err
	}
	h.res.Facts = append(h.res.Facts, "database: "+info)
	elapsed, deadlocks, err := storageCeiling(ctx, raw, events, o.StorageBatch, o.StorageConns)
	if err != nil {
		return err
	}
	h.add(Row{
		Key: RowStorage, Name: fmt.Sprintf("storage ceiling: raw INSERTs, %d ev/tx, %d conns", o.StorageBatch, o.StorageConns),
		Count: len(events), Elapsed: elapsed,
		Note: fmt.Sprintf("counts distinct events (4 rows each), not messages; %d deadlocked batches retried", deadlocks),
	})

	// 3. Per-message pipeline.
	check := func(db *bun.DB, label string, topic string, want demo.Stream) {
		h.sanity(ctx, db, label, topic, want)
	}
	pmDSN, pmDB, err := h.dbs.create(ctx, "per_message")
	if err != nil {
		return err
	}
	defer func() { _ = pmDB.Close() }()
	row, err := h.throughput(ctx, consumerRun{topic: mainTopic, group: h.dbs.prefix + "per_message", dsn: pmDSN, batchMax: 1}, n)
	if err != nil {
		return err
	}
	row.Key, row.Name = RowPerMessage, "per-message pipeline: PAYCB_BATCH_MAX=1"
	h.add(row)
	check(pmDB, "per-message", mainTopic, stream)

	// 4. Batched pipeline.
	bDSN, bDB, err := h.dbs.create(ctx, "batched")
	if err != nil {
		return err
	}
	defer func() { _ = bDB.Close() }()
	batched := consumerRun{topic: mainTopic, group: h.dbs.prefix + "batched", dsn: bDSN, batchMax: o.BatchMax}
	row, err = h.throughput(ctx, batched, n)
	if err != nil {
		return err
	}
	row.Key, row.Name = RowBatched, fmt.Sprintf("batched pipeline: PAYCB_BATCH_MAX=%d", o.BatchMax)
	h.add(row)

	// 5. Replay: the same group, offsets reset to earliest, over the
	// settled database: every message is a duplicate.
	if err := h.resetToEarliest(ctx, batched); err != nil {
		return err
	}
	row, err = h.throughput(ctx, batched, n)
	if err != nil {
		return err
	}
	row.Key, row.Name = RowReplay, "replay: same group reset to earliest"
	row.Note = "offsets reset with ops.ApplyReplay; every message a duplicate"
	h.add(row)
	check(bDB, "batched+replay", mainTopic, stream)

	// 6 and 7. Latency at a paced rate: the requested rate, or half of
	// what the batched pipeline settled from a backlog when that is lower,
	// so the figure is latency rather than queueing. The per-message
	// pipeline is paced at the same rate whether or not it keeps up.
	rate := o.PacedRate
	var rateNote string
	if bat, _ := h.res.Row(RowBatched); pacedHeadroom*bat.Rate < rate {
		rate = max(1, math.Floor(pacedHeadroom*bat.Rate))
		rateNote = fmt.Sprintf("rate lowered from the requested %.0f/s to %.0f/s, half what the batched pipeline settled from a backlog (%.0f/s)",
			o.PacedRate, rate, bat.Rate)
	}
	perMsg, _ := h.res.Row(RowPerMessage)
	for _, pr := range []struct {
		key, topic string
		batchMax   int
		seed       uint64
	}{
		{RowPacedBatched, "paced-batched", o.BatchMax, o.Seed + 1},
		{RowPacedPerMesage, "paced-per-message", 1, o.Seed + 2},
	} {
		total := max(1, int(rate*o.PacedDuration.Seconds()))
		ps := demo.Generate(demo.StreamOptions{Seed: pr.seed, Trades: max(1, total/4), NoTraps: true})
		dsn, db, err := h.dbs.create(ctx, strings.ReplaceAll(pr.key, "-", "_"))
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		row, err := h.paced(ctx, consumerRun{topic: pr.topic, group: h.dbs.prefix + pr.key, dsn: dsn, batchMax: pr.batchMax}, ps, db, rate)
		if err != nil {
			return err
		}
		row.Key = pr.key
		row.Name = fmt.Sprintf("paced %.0f/s: PAYCB_BATCH_MAX=%d", rate, pr.batchMax)
		notes := []string{}
		if row.Note != "" {
			notes = append(notes, row.Note)
		}
		if rateNote != "" {
			notes = append(notes, rateNote)
		}
		if pr.batchMax == 1 && perMsg.Rate < rate {
			notes = append(notes, fmt.Sprintf("the per-message pipeline settled only %.0f/s from a backlog", perMsg.Rate))
		}
		row.Note = strings.Join(notes, "; ")
		h.add(row)
		check(db, pr.key, pr.topic, ps)
	}
	return nil
}

func (h *harness) add(r Row) {
	if r.Rate == 0 && r.Elapsed > 0 {
		r.Rate = float64(r.Count) / r.Elapsed.Seconds()
	}
	if r.SteadyRate > 0 {
		steady := fmt.Sprintf("first commit %s after start; %.0f events/s from then to the last commit",
			r.FirstCommit.Round(time.Millisecond), r.SteadyRate)
		if r.Note != "" {
			steady = r.Note + "; " + steady
		}
		r.Note = steady
	}
	h.res.Rows = append(h.res.Rows, r)
	h.log.Info("measured", "row", r.Key, "count", r.Count, "elapsed", r.Elapsed.Round(time.Millisecond),
		"per_second", int64(r.Rate), "p50", r.P50, "p99", r.P99, "peak_rss", r.PeakRSS)
}

// consumerRun is one `consumer run` process's configuration.
type consumerRun struct {
	topic, group, dsn string
	batchMax          int
}

// startConsumer starts bin/consumer run with the contract's variables and
// returns it with its /readyz URL.
func (h *harness) startConsumer(ctx context.Context, c consumerRun) (*proc, string, error) {
	port, err := freePort(ctx)
	if err != nil {
		return nil, "", err
	}
	admin := "127.0.0.1:" + strconv.Itoa(port)
	env := []string{
		"PAYCB_KAFKA_BROKERS=" + strings.Join(h.brokers, ","),
		"PAYCB_KAFKA_TOPIC=" + c.topic,
		"PAYCB_KAFKA_GROUP=" + c.group,
		"PAYCB_DB_DSN=" + c.dsn,
		"PAYCB_ADMIN_ADDR=" + admin,
		"PAYCB_WECHAT_APIV3_KEY=" + channelstest.APIv3Key,
		"PAYCB_LOG_LEVEL=warn",
		"PAYCB_BATCH_MAX=" + strconv.Itoa(c.batchMax),
	}
	p, err := startProc(ctx, h.log, "consumer ("+c.group+")", h.work, filepath.Join(h.o.BinDir, "consumer"), []string{"run"}, env, nil)
	if err != nil {
		return nil, "", err
	}
	return p, "http://" + admin + "/readyz", nil
}

// consumeTimeout bounds how long one pipeline row may take to commit
// everything.
func (h *harness) consumeTimeout(messages int) time.Duration {
	return 2*time.Minute + time.Duration(messages)*5*time.Millisecond
}

// throughput runs one consumer over the backlog of c.topic until its group
// has committed every partition to the end.
func (h *harness) throughput(ctx context.Context, c consumerRun, messages int) (Row, error) {
	start := time.Now()
	p, readyURL, err := h.startConsumer(ctx, c)
	if err != nil {
		return Row{}, err
	}
	defer p.kill()
	if err := p.waitReady(ctx, readyURL, time.Minute); err != nil {
		return Row{}, err
	}
	startup := time.Since(start)
	first, err := h.waitConsumed(ctx, p, c, messages)
	if err != nil {
		return Row{}, err
	}
	elapsed := time.Since(start)
	rss, err := p.peakRSS()
	if err != nil {
		return Row{}, err
	}
	if err := p.stop(45 * time.Second); err != nil {
		return Row{}, err
	}
	row := Row{Count: messages, Elapsed: elapsed, Startup: startup, PeakRSS: rss}
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
// all), giving up early when the consumer process exits. Every
// progressEvery it logs how far the group got and the process's RSS.
func (h *harness) waitConsumed(ctx context.Context, p *proc, c consumerRun, messages int) (firstCommit, error) {
	ctx, cancel := context.WithTimeout(ctx, h.consumeTimeout(messages))
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	lastLog := start
	var first firstCommit
	initial := int64(-1)
	report := func(ps []kafkaops.PartitionProgress) {
		var committed int64
		for _, pp := range ps {
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
		rss, _ := p.rss()
		peak, _ := p.peakRSS()
		h.log.Info("consuming", "group", c.group, "committed", committed, "lag", kafkaops.TotalLag(ps),
			"after", time.Since(start).Round(time.Second), "rss", mib(rss), "peak_rss", mib(peak))
	}
	err := kafkaops.WaitConsumed(ctx, h.brokers, c.group, c.topic, pollInterval(messages), report)
	if err != nil && p.exited() {
		return first, p.failure()
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
	k := ops.Kafka{Brokers: h.brokers, Topic: c.topic, Group: c.group, DLQTopic: c.topic + ".dlq"}
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

// paced starts a consumer, publishes stream at the paced rate with each
// envelope stamped at its publish time, waits until everything is
// committed, and reads publish→settled latencies from the claims.
func (h *harness) paced(ctx context.Context, c consumerRun, stream demo.Stream, db *bun.DB, rate float64) (Row, error) {
	values := make([][]byte, len(stream.Messages))
	msgKeys := make([][]byte, len(stream.Messages))
	for i, m := range stream.Messages {
		values[i], msgKeys[i] = m.Value, m.Key
	}
	msgs, err := preparePaced(values, msgKeys)
	if err != nil {
		return Row{}, err
	}
	start := time.Now()
	p, readyURL, err := h.startConsumer(ctx, c)
	if err != nil {
		return Row{}, err
	}
	defer p.kill()
	if err := p.waitReady(ctx, readyURL, time.Minute); err != nil {
		return Row{}, err
	}
	startup := time.Since(start)
	published, achieved, err := producePaced(ctx, h.brokers, c.topic, msgs, rate)
	if err != nil {
		return Row{}, err
	}
	lastPublish := time.Now()
	if _, err := h.waitConsumed(ctx, p, c, len(msgs)); err != nil {
		return Row{}, err
	}
	drain := time.Since(lastPublish)
	rss, err := p.peakRSS()
	if err != nil {
		return Row{}, err
	}
	if err := p.stop(45 * time.Second); err != nil {
		return Row{}, err
	}
	lat, err := latencies(ctx, db, c.topic, published)
	if err != nil {
		return Row{}, err
	}
	if len(lat.total) != len(published) {
		h.problem("%s: %d claims settled from %s, want %d", c.group, len(lat.total), c.topic, len(published))
	}
	row := Row{
		Count: len(msgs), Rate: achieved, Elapsed: time.Duration(float64(len(msgs)) / achieved * float64(time.Second)),
		Startup: startup, PeakRSS: rss,
	}
	row.P50, row.P99 = percentile(lat.total, 0.50), percentile(lat.total, 0.99)
	notes := []string{fmt.Sprintf("p50/p99 publish->claimed %s/%s, claimed->settled %s/%s",
		latency(percentile(lat.toClaim, 0.50)), latency(percentile(lat.toClaim, 0.99)),
		latency(percentile(lat.settle, 0.50)), latency(percentile(lat.settle, 0.99)))}
	if achieved < 0.95*rate {
		notes = append(notes, fmt.Sprintf("publisher reached only %.0f/s", achieved))
	}
	if drain > fellBehind {
		notes = append(notes, fmt.Sprintf("FELL BEHIND: the group committed the last message %s after the last publish, "+
			"so this latency is mostly queueing", drain.Round(10*time.Millisecond)))
	}
	row.Note = strings.Join(notes, "; ")
	return row, nil
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

// sanity checks a pipeline's database after its runs: the settlement
// invariants (settlement.Check), every claim SETTLED, one claim per distinct
// event of the stream, and per-tenant totals equal to what the channels
// reported.
func (h *harness) sanity(ctx context.Context, db *bun.DB, label, topic string, want demo.Stream) {
	rep, err := settlement.Check(ctx, db)
	if err != nil {
		h.problem("%s: check ledger: %v", label, err)
		return
	}
	for _, v := range rep.Violations {
		h.problem("%s: %s", label, v)
	}
	var claims, unsettled int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(status <> 'SETTLED'), 0) FROM ss_channel_idempotent").Scan(&claims, &unsettled)
	if err != nil {
		h.problem("%s: count claims: %v", label, err)
		return
	}
	if claims != want.Events {
		h.problem("%s: %d claims, want %d (one per distinct event of %s)", label, claims, want.Events, topic)
	}
	if unsettled != 0 {
		h.problem("%s: %d claims not SETTLED", label, unsettled)
	}
	for tenant, paid := range want.Paid {
		got := rep.Tenants[tenant]
		if got.Paid != paid || got.Refunded != want.Refunded[tenant] {
			h.problem("%s: tenant %d paid %d refunded %d, the channels reported %d and %d",
				label, tenant, got.Paid, got.Refunded, paid, want.Refunded[tenant])
		}
	}
}
