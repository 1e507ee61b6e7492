package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/invariant"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels/sample"
)

// Topic names the simulation uses.
const (
	Topic = "channel-events"
	Group = "settlement-consumer"
	DLQ   = Topic + ".dlq"
)

// Plan returns what seed decides: the stream and the fault schedule.
func Plan(seed uint64) (demo.Stream, Schedule) {
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	sch := Schedule{
		Seed:       seed,
		Trades:     30 + rng.IntN(41),
		Partitions: 2 + rng.IntN(7),
		Workers:    1 + rng.IntN(2),
		BatchMax:   []int{1, 1, 4, 16}[rng.IntN(4)],
	}
	sch.OrphanAfter = 2 * time.Minute
	if rng.IntN(2) == 0 {
		sch.OrphanAfter = 500 * time.Millisecond
	}
	stream := demo.Generate(demo.StreamOptions{Seed: seed, Trades: sch.Trades})
	return stream, newSchedule(seed, len(stream.Messages), sch)
}

// Env is the world one run plays in: a fresh kfake cluster with Topic
// (Schedule.Partitions partitions) and DLQ, and a fresh migrated database
// reached through Proxy. NewEnv builds one for a test.
type Env struct {
	Cluster *kfake.Cluster
	Brokers []string
	// DB is the checker's own pool, not through the proxy.
	DB *bun.DB
	// Proxy sits between the workers and the database; ProxiedDSN goes
	// through it.
	Proxy      *sqldbtest.Proxy
	ProxiedDSN string
	Logger     *slog.Logger
}

// Result is what a run did and found.
type Result struct {
	Schedule Schedule
	// Injected counts the faults that took effect, by kind (a crash armed
	// for a point the rest of the stream never reached does not count).
	Injected map[FaultKind]int
	// Workers is how many workers ran in all.
	Workers int
	// Report is the invariant checker's report.
	Report  invariant.Report
	Elapsed time.Duration
}

// Faults sums Injected.
func (r Result) Faults() int {
	n := 0
	for _, v := range r.Injected {
		n += v
	}
	return n
}

// member is one running worker.
type member struct {
	id     int
	main   *app.Main
	cancel context.CancelFunc
	done   chan error
	// stopped is set once Run has returned (guarded by runner.mu).
	stopped bool
}

// runner plays one schedule.
type runner struct {
	env    Env
	sch    Schedule
	stream demo.Stream
	// ctx is Run's: workers live in it, not in a wait's shorter one.
	ctx context.Context

	mu       sync.Mutex
	crashes  []*Fault // armed crashes, in arming order
	crashed  chan *member
	members  []*member
	regs     []prometheus.Gatherer
	nextID   int
	injected map[FaultKind]int

	brokerFaultsOn atomic.Bool
	commitErrs     atomic.Int64
	fetchErrs      atomic.Int64
	downTimers     []*time.Timer
}

// Run plays sch over stream in env until quiescence: every message
// committed, every worker stopped, orphans swept; then it checks the
// invariants. An error means the run could not finish (a worker that never
// drained its partitions within the time limits is one: liveness is an
// invariant too); broken invariants are in Result.Report.
func Run(ctx context.Context, env Env, stream demo.Stream, sch Schedule) (Result, error) {
	start := time.Now()
	r := &runner{ctx: ctx, env: env, sch: sch, stream: stream, crashed: make(chan *member, 16), injected: map[FaultKind]int{}}
	res := Result{Schedule: sch}
	r.brokerFaultsOn.Store(true)
	defer func() { _ = r.stopAll() }()

	for range sch.Workers {
		if err := r.startWorker(); err != nil {
			return res, err
		}
	}
	for i := range sch.Chunks {
		end := len(stream.Messages)
		if i+1 < len(sch.Chunks) {
			end = sch.Chunks[i+1]
		}
		if err := r.produce(ctx, stream.Messages[sch.Chunks[i]:end]); err != nil {
			return res, err
		}
		if err := r.waitConsumed(ctx, 2*time.Minute); err != nil {
			return res, fmt.Errorf("chunk %d: %w", i, err)
		}
		if i < len(sch.Steps) {
			if err := r.apply(ctx, sch.Steps[i]); err != nil {
				return res, fmt.Errorf("step %d: %w", i, err)
			}
		}
	}
	// Quiescence: no more faults, every message committed, workers stopped.
	r.mu.Lock()
	r.crashes = nil
	timers := r.downTimers
	r.mu.Unlock()
	for _, t := range timers {
		t.Stop()
	}
	env.Proxy.Up()
	if err := r.waitConsumed(ctx, 2*time.Minute); err != nil {
		return res, fmt.Errorf("final: %w", err)
	}
	r.brokerFaultsOn.Store(false)
	if err := r.stopAll(); err != nil {
		return res, err
	}
	if _, err := invariant.SweepOrphans(ctx, env.DB); err != nil {
		return res, err
	}

	r.mu.Lock()
	res.Injected = r.injected
	res.Workers = r.nextID
	regs := r.regs
	r.mu.Unlock()
	res.Injected[CommitErrors] = int(r.commitErrs.Load())
	res.Injected[FetchErrors] = int(r.fetchErrs.Load())
	res.Injected[CutCommit] = int(env.Proxy.CommitsCut())
	for k, v := range res.Injected {
		if v == 0 {
			delete(res.Injected, k)
		}
	}
	opts := []invariant.Option{invariant.WithMetrics(regs...)}
	if res.Injected[Crash]+res.Injected[Join]+res.Injected[Leave] == 0 {
		// Only a crash or a generation's end makes a worker handle a
		// message twice.
		opts = append(opts, invariant.Exact())
	}
	rep, err := invariant.Check(ctx, env.DB, env.Brokers, DLQ, stream, opts...)
	res.Report = rep
	res.Elapsed = time.Since(start)
	return res, err
}

func (r *runner) config() config.Config {
	cfg := config.Default()
	cfg.Kafka.Brokers = r.env.Brokers
	cfg.Kafka.Topic = Topic
	cfg.Kafka.Group = Group
	cfg.Kafka.SessionTimeout = 6 * time.Second
	cfg.Kafka.HeartbeatInterval = 300 * time.Millisecond
	cfg.Kafka.RebalanceTimeout = 6 * time.Second
	cfg.Kafka.MaxWait = 100 * time.Millisecond
	cfg.DB.DSN = config.DSN(r.env.ProxiedDSN)
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.WeChat.APIv3Key = config.Secret(sample.APIv3Key)
	cfg.Worker.RetryBackoffMin = 10 * time.Millisecond
	cfg.Worker.RetryBackoffMax = 100 * time.Millisecond
	cfg.Worker.SweepInterval = 200 * time.Millisecond
	cfg.Worker.OrphanAfter = r.sch.OrphanAfter
	// Tiny: a stopped worker commits only what was already finished, so a
	// crash is a crash for every partition it owned.
	cfg.Worker.ShutdownTimeout = 100 * time.Millisecond
	cfg.Worker.BatchMax = r.sch.BatchMax
	cfg.Finalize()
	return cfg
}

func (r *runner) startWorker() error {
	cfg := r.config()
	if err := cfg.ValidateFor("run", app.FileChecks()); err != nil {
		return fmt.Errorf("worker config: %w", err)
	}
	r.mu.Lock()
	r.nextID++
	m := &member{id: r.nextID, done: make(chan error, 1)}
	r.mu.Unlock()
	m.main = &app.Main{Config: cfg, Logger: r.env.Logger.With("worker", m.id), Registry: metrics.NewRegistry()}
	m.main.Fault = r.fault(m)
	wctx, cancel := context.WithCancel(r.ctx)
	m.cancel = cancel
	go func() { m.done <- m.main.Run(wctx) }()
	select {
	case <-m.main.Ready():
	case err := <-m.done:
		cancel()
		return fmt.Errorf("worker %d stopped at start: %w", m.id, err)
	case <-time.After(time.Minute):
		cancel()
		return fmt.Errorf("worker %d not wired within a minute", m.id)
	}
	r.mu.Lock()
	r.members = append(r.members, m)
	r.regs = append(r.regs, m.main.Registry)
	r.mu.Unlock()
	return nil
}

// stop stops m (a crash or a leave: the shutdown cap is tiny either way)
// and waits for Run to return.
func (r *runner) stop(m *member) error {
	r.mu.Lock()
	if m.stopped {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	m.cancel()
	select {
	case err := <-m.done:
		r.mu.Lock()
		m.stopped = true
		for i, x := range r.members {
			if x == m {
				r.members = append(r.members[:i], r.members[i+1:]...)
				break
			}
		}
		r.mu.Unlock()
		if err != nil {
			return fmt.Errorf("worker %d: %w", m.id, err)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("worker %d did not stop within a minute", m.id)
	}
}

func (r *runner) stopAll() error {
	r.mu.Lock()
	ms := append([]*member(nil), r.members...)
	r.mu.Unlock()
	var errs error
	for _, m := range ms {
		errs = errors.Join(errs, r.stop(m))
	}
	return errs
}

// fault is m's FaultFunc: it blocks at the armed crash point until m's
// processing context ends, as a process that died there would.
func (r *runner) fault(m *member) pipeline.FaultFunc {
	return func(ctx context.Context, p pipeline.FaultPoint) error {
		r.mu.Lock()
		fire := -1
		for i, c := range r.crashes {
			if c.Point != p {
				continue
			}
			if c.Nth--; c.Nth <= 0 && fire < 0 {
				fire = i
			}
		}
		if fire < 0 {
			r.mu.Unlock()
			return nil
		}
		r.crashes = append(r.crashes[:fire], r.crashes[fire+1:]...)
		r.injected[Crash]++
		r.mu.Unlock()
		r.crashed <- m
		<-ctx.Done()
		return fmt.Errorf("simulated crash of worker %d at %s: %w", m.id, p, ctx.Err())
	}
}

// handleCrash restarts a crashed worker: stops it (unless a Leave already
// did) and starts a fresh one in its place when fewer than Workers remain.
func (r *runner) handleCrash(_ context.Context, m *member) error {
	if err := r.stop(m); err != nil {
		return err
	}
	r.mu.Lock()
	n := len(r.members)
	r.mu.Unlock()
	if n >= r.sch.Workers && n > 0 {
		return nil
	}
	return r.startWorker()
}

func (r *runner) produce(ctx context.Context, msgs []demo.Message) error {
	out := make([]kafkaops.Message, len(msgs))
	for i, m := range msgs {
		out[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
	}
	if err := kafkaops.Produce(ctx, r.env.Brokers, Topic, out); err != nil {
		return fmt.Errorf("produce %d messages: %w", len(msgs), err)
	}
	return nil
}

// waitConsumed polls the group's progress until every partition is committed
// to its end, restarting crashed workers meanwhile.
func (r *runner) waitConsumed(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last []kafkaops.PartitionProgress
	for {
		select {
		case m := <-r.crashed:
			if err := r.handleCrash(ctx, m); err != nil {
				return err
			}
			continue
		default:
		}
		ps, err := kafkaops.Progress(ctx, r.env.Brokers, Group, Topic)
		if err == nil {
			last = ps
			if kafkaops.TotalLag(ps) == 0 && len(r.crashed) == 0 {
				return nil
			}
		}
		select {
		case m := <-r.crashed:
			if err := r.handleCrash(ctx, m); err != nil {
				return err
			}
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("not consumed within %s (progress %+v): %w", limit, last, ctx.Err())
		}
	}
}

// apply puts a step's faults in place.
func (r *runner) apply(_ context.Context, st Step) error {
	for _, f := range st.Faults {
		switch f.Kind {
		case Crash:
			r.mu.Lock()
			c := f
			r.crashes = append(r.crashes, &c)
			r.mu.Unlock()
		case DBDown:
			r.env.Proxy.Down()
			r.mu.Lock()
			r.injected[DBDown]++
			r.downTimers = append(r.downTimers, time.AfterFunc(f.Down, r.env.Proxy.Up))
			r.mu.Unlock()
		case CutCommit:
			r.env.Proxy.CutAfterNextCommit()
		case CommitErrors:
			r.failRequests(kmsg.OffsetCommit, f.Count, f.Code, &r.commitErrs)
		case FetchErrors:
			r.failRequests(kmsg.Fetch, f.Count, f.Code, &r.fetchErrs)
		case Join:
			r.mu.Lock()
			n := len(r.members)
			r.mu.Unlock()
			if n >= 3 {
				continue
			}
			if err := r.startWorker(); err != nil {
				return err
			}
			r.mu.Lock()
			r.injected[Join]++
			r.mu.Unlock()
		case Leave:
			r.mu.Lock()
			var m *member
			if len(r.members) > 1 {
				m = r.members[len(r.members)-1]
			}
			r.mu.Unlock()
			if m == nil {
				continue
			}
			if err := r.stop(m); err != nil {
				return err
			}
			r.mu.Lock()
			r.injected[Leave]++
			r.mu.Unlock()
		}
	}
	return nil
}

// failRequests makes the next count requests of key fail with code, through
// kfake's control hook, while broker faults are on. Fetch faults touch only
// the input topic's partitions.
func (r *runner) failRequests(key kmsg.Key, count int, code int16, fired *atomic.Int64) {
	left := int64(count)
	var mu sync.Mutex
	r.env.Cluster.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if left <= 0 || !r.brokerFaultsOn.Load() {
			return nil, nil, false
		}
		var resp kmsg.Response
		switch q := req.(type) {
		case *kmsg.OffsetCommitRequest:
			resp = commitError(q, code)
		case *kmsg.FetchRequest:
			fr := fetchError(q, code)
			if fr == nil {
				return nil, nil, false
			}
			resp = fr
		default:
			return nil, nil, false
		}
		left--
		fired.Add(1)
		r.env.Cluster.KeepControl()
		return resp, nil, true
	})
}

func commitError(q *kmsg.OffsetCommitRequest, code int16) kmsg.Response {
	resp := q.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range q.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetchError answers a fetch of the input topic with code on every partition
// asked for; nil when the fetch is not for the input topic.
func fetchError(q *kmsg.FetchRequest, code int16) kmsg.Response {
	resp := q.ResponseKind().(*kmsg.FetchResponse)
	ours := false
	for _, t := range q.Topics {
		if t.Topic == Topic {
			ours = true
		}
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if !ours {
		return nil
	}
	return resp
}
