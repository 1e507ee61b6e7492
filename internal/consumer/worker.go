package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
)

// Config is what the consumer needs to know about Kafka and its pacing.
// Zero durations and sizes take config.Default's values; BatchMax zero is
// 1 (batches of one).
type Config struct {
	Brokers []string
	Topic   string
	GroupID string

	// BatchMax is the most messages of one partition handled as one batch
	// (default 1: batches of one). A batch is what the partition already
	// has buffered, never a wait for more.
	BatchMax int

	// Backoff paces in-place retries of a failing message.
	Backoff Backoff
	// StallAfter is how long a partition may hold an unfinished message
	// without advancing before readiness reports it stalled.
	StallAfter time.Duration
	// LagInterval is how often the worker asks the broker for its
	// partitions' end and committed offsets (paycb_consumer_lag); a newly
	// assigned partition is asked about at once.
	LagInterval time.Duration
	// Client asks the broker for offsets (the lag); nil: a client of
	// Brokers with kafka-go's default transport.
	Client *kafka.Client
	// CommitInterval is the longest a handled message's offset waits to
	// be committed (see offsetCommitter): offsets are committed in the
	// background, and when a generation ends or the worker stops.
	CommitInterval time.Duration
	// ShutdownTimeout caps the graceful shutdown: finishing in-flight
	// messages and committing them.
	ShutdownTimeout time.Duration
	// SessionTimeout and HeartbeatInterval are the group's.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// RebalanceTimeout bounds how long the coordinator waits for members to
	// rejoin.
	RebalanceTimeout time.Duration
	// MaxWait bounds how long a fetch waits for new data.
	MaxWait time.Duration
	// MinBytes and MaxBytes bound one fetch.
	MinBytes, MaxBytes int
	// StartOffset is where a partition without a committed offset starts:
	// kafka.FirstOffset (default) or kafka.LastOffset.
	StartOffset int64
	// PartitionWatchInterval is how often the group looks for new
	// partitions.
	PartitionWatchInterval time.Duration
	// Dialer is kafka-go's dialer (nil: the default).
	Dialer *kafka.Dialer
	// Fault injects failures at FaultBeforeCommit, for tests; nil in
	// production. The pipeline has its fault points of its own
	// (pipeline.Pipeline.Fault).
	Fault pipeline.FaultFunc
}

// defaults fills the zero fields from config.Default, the one place
// defaults are declared, so a Config built by hand behaves like a
// configured worker.
func (c *Config) defaults() {
	d := config.Default()
	if c.BatchMax <= 0 {
		c.BatchMax = 1
	}
	setIfZero(&c.StallAfter, d.Worker.StallThreshold)
	setIfZero(&c.LagInterval, d.Worker.LagInterval)
	setIfZero(&c.ShutdownTimeout, d.Worker.ShutdownTimeout)
	setIfZero(&c.SessionTimeout, d.Kafka.SessionTimeout)
	setIfZero(&c.HeartbeatInterval, d.Kafka.HeartbeatInterval)
	setIfZero(&c.RebalanceTimeout, d.Kafka.RebalanceTimeout)
	setIfZero(&c.MaxWait, d.Kafka.MaxWait)
	setIfZero(&c.MinBytes, d.Kafka.MinBytes)
	setIfZero(&c.MaxBytes, d.Kafka.MaxBytes)
	setIfZero(&c.PartitionWatchInterval, d.Kafka.PartitionWatchInterval)
	setIfZero(&c.CommitInterval, d.Kafka.CommitInterval)
	if c.StartOffset != kafka.LastOffset {
		c.StartOffset = kafka.FirstOffset
	}
}

// setIfZero sets *p to def when *p is zero or negative.
func setIfZero[T int | time.Duration](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Worker consumes the input topic as a member of the consumer group.
type Worker struct {
	cfg     Config
	handler Handler
	metrics *metrics.Metrics
	logger  *slog.Logger

	stats *readerStats

	mu sync.Mutex
	// member is the generation this worker is a member of, from the moment
	// the coordinator handed it out (JoinGroup and SyncGroup answered)
	// until it ends (a heartbeat unanswered or refused, a rebalance, a
	// partition loop that gave up, the group closed); nil while none.
	member     *kafka.Generation
	generation int32 // member's ID; 0 while not a member of a generation
	// confirmedAt is when the coordinator last confirmed the membership:
	// the generation handed out, or a membership probe answered.
	confirmedAt time.Time
	group       groupState
	partitions  map[int]*partitionState
	// assigned wakes the monitor when a partition is assigned, so that its
	// lag is asked for at once.
	assigned chan struct{}
}

// New returns a worker that takes its partitions' messages through p. It
// does not connect until Run.
func New(cfg Config, p Handler, m *metrics.Metrics, logger *slog.Logger) *Worker {
	cfg.defaults()
	return &Worker{
		cfg: cfg, handler: p, metrics: m, logger: logger, stats: newReaderStats(),
		partitions: map[int]*partitionState{}, assigned: make(chan struct{}, 1),
	}
}

// Run consumes until ctx ends, then shuts down gracefully: it stops fetching,
// lets every partition finish its in-flight message and commit it, leaves the
// group, and returns nil. The shutdown is capped at Config.ShutdownTimeout; a
// message still unfinished then is not committed and will be processed again
// by the partition's next owner.
func (w *Worker) Run(ctx context.Context) error {
	// An unreachable coordinator fails every JoinGroupBackoff: its lines
	// back off until a generation is joined.
	groupRepeats := logging.NewSuppressor(w.logger)
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                     w.cfg.GroupID,
		Brokers:                w.cfg.Brokers,
		Dialer:                 w.cfg.Dialer,
		Topics:                 []string{w.cfg.Topic},
		GroupBalancers:         []kafka.GroupBalancer{kafka.RangeGroupBalancer{}},
		HeartbeatInterval:      w.cfg.HeartbeatInterval,
		SessionTimeout:         w.cfg.SessionTimeout,
		RebalanceTimeout:       w.cfg.RebalanceTimeout,
		JoinGroupBackoff:       joinGroupBackoff,
		Timeout:                groupRequestTimeout,
		StartOffset:            w.cfg.StartOffset,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: w.cfg.PartitionWatchInterval,
		Logger:                 kafkaLogger(w.logger, slog.LevelDebug, nil),
		ErrorLogger:            kafkaLogger(w.logger, slog.LevelWarn, groupRepeats),
	})
	if err != nil {
		return fmt.Errorf("create consumer group %s: %w", w.cfg.GroupID, err)
	}

	// The lag and stall metrics, refreshed while the worker runs.
	monitorCtx, stopMonitor := context.WithCancel(context.WithoutCancel(ctx))
	monitored := make(chan struct{})
	go func() { defer close(monitored); w.monitor(monitorCtx) }()
	defer func() { stopMonitor(); <-monitored }()

	// hardStop ends in-flight processing once the shutdown cap has passed.
	hardStop, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	drained := &drainGroup{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			gen, err := cg.Next(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
					return
				}
				w.joinFailed(err)
				const msg = "consumer group: no generation yet"
				if errors.Is(err, kafka.RebalanceInProgress) {
					// Routine: the group is rebalancing; the next
					// attempt joins it.
					w.logger.Debug(msg, "group", w.cfg.GroupID, "error", err.Error())
					continue
				}
				groupRepeats.Log(ctx, slog.LevelWarn, msg+": "+err.Error(), msg, "group", w.cfg.GroupID, "error", err.Error())
				continue
			}
			groupRepeats.Clear(ctx)
			w.startGeneration(ctx, hardStop, gen, drained)
		}
	}()

	<-ctx.Done()
	w.logger.Info("shutting down: finishing in-flight messages", "cap", w.cfg.ShutdownTimeout.String())
	timer := time.AfterFunc(w.cfg.ShutdownTimeout, cancelHard)
	defer timer.Stop()
	waitCh := make(chan struct{})
	go func() { drained.closeAndWait(); close(waitCh) }()
	select {
	case <-waitCh:
	case <-hardStop.Done():
		w.logger.Warn("shutdown cap reached before every partition finished")
	}
	// Closing the group ends the generation and leaves the group.
	if err := cg.Close(); err != nil {
		w.logger.Warn("leave consumer group", "error", err.Error())
	}
	<-done
	w.leave()
	return nil
}

// startGeneration runs one loop per assigned partition for gen's lifetime.
func (w *Worker) startGeneration(stop, hardStop context.Context, gen *kafka.Generation, drained *drainGroup) {
	assigned := gen.Assignments[w.cfg.Topic]
	if !drained.add(len(assigned)) {
		return // shutting down: the group is about to be left
	}
	w.joined(gen)
	// The membership lasts as long as the generation (kafka-go ends it
	// when a heartbeat is refused or goes unanswered, at a rebalance, or
	// when any function started on it returns) and only while the
	// coordinator keeps confirming it (see probeMembership).
	gen.Start(func(genCtx context.Context) {
		w.probeMembership(genCtx, gen)
		w.left(gen)
	})
	w.logger.Info("joined generation", "generation", gen.ID, "member", gen.MemberID, "partitions", len(assigned))
	commits := w.startCommitter(gen, len(assigned))
	for _, a := range assigned {
		gen.Start(func(genCtx context.Context) {
			defer commits.loops.Done() // then the committer flushes
			pc := &partitionConsumer{w: w, gen: gen, commits: commits.offsetCommitter, partition: a.ID, start: a.Offset}
			pc.run(genCtx, stop, hardStop, drained)
		})
	}
}

// drainGroup counts partition loops that have not yet finished their
// in-flight work. Once shutdown has begun it accepts no more, so a
// generation handed out during shutdown never races the wait.
type drainGroup struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	closing bool
}

func (d *drainGroup) add(n int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	d.wg.Add(n)
	return true
}

func (d *drainGroup) done() { d.wg.Done() }

func (d *drainGroup) closeAndWait() {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	d.wg.Wait()
}

// ReaderStats is a Prometheus collector of the partition readers' kafka-go
// statistics (paycb_kafka_reader_*{partition}); register it beside the
// contract's metrics.
func (w *Worker) ReaderStats() prometheus.Collector { return w.stats }

// Ready reports why the worker is not ready: not a member of a live
// generation of the group (before the first join, from the moment a
// generation ends until the next is joined, and while the coordinator has
// not confirmed the membership for longer than a probe interval plus 6s;
// the error says since when and the last attempt's error), or a partition holding an unfinished message
// without advancing for longer than Config.StallAfter (the error names the
// partition, the offset, how long and why: the last error its attempts
// met). A member assigned no partition (more instances than partitions)
// is ready: it stands by.
func (w *Worker) Ready() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if !w.memberNow(now) {
		return w.notMember(now)
	}
	var stalled []int
	for p, st := range w.partitions {
		if st.stalled(now) > w.cfg.StallAfter {
			stalled = append(stalled, p)
		}
	}
	if len(stalled) == 0 {
		return nil
	}
	slices.Sort(stalled)
	// The longest stall first: the others are usually its consequence.
	worst := slices.MaxFunc(stalled, func(a, b int) int {
		return cmp.Compare(w.partitions[a].stalled(now), w.partitions[b].stalled(now))
	})
	err := w.partitions[worst].stallError(worst, now)
	if len(stalled) > 1 {
		others := make([]string, 0, len(stalled)-1)
		for _, p := range stalled {
			if p != worst {
				others = append(others, strconv.Itoa(p))
			}
		}
		err = fmt.Errorf("%w; also stalled: partition %s", err, strings.Join(others, ", "))
	}
	return err
}

// Committed returns the offsets this worker's partitions advanced to in
// its current generation, by partition: the next offset to read, committed
// or offered for the committer's next request, at most CommitInterval away
// (-1 for a partition it owns and has handled nothing on).
func (w *Worker) Committed() map[int]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int]int64, len(w.partitions))
	for p, st := range w.partitions {
		out[p] = st.committed
	}
	return out
}

// kafkaLogger is logging.KafkaLogger, the one adapter of kafka-go's
// loggers to slog.
var kafkaLogger = logging.KafkaLogger
