package settledpub

import (
	"context"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
)

// Publisher defaults.
const (
	// DefaultQueue is how many settlements' refs Notify holds before it
	// drops (the sweeper publishes what it drops).
	DefaultQueue = 4096
	// DefaultPublishTimeout bounds the Publisher's read of the rows and one
	// produce request of NewKafkaWriter's writer: a third of
	// DefaultSweepGrace.
	DefaultPublishTimeout = DefaultSweepGrace / 3
	// DefaultHotAge is the age past which the Publisher leaves a row to
	// the Sweeper: a third of DefaultSweepGrace, so a publish starts
	// within it of the row's settlement and ends within
	// DefaultPublishTimeout after, before the Sweeper may take the row.
	DefaultHotAge = DefaultSweepGrace / 3
	// maxRefs is the most refs one publish takes from the queue.
	maxRefs = 1024
	// retryWait is how long Run waits, when nothing new comes, before it
	// tries again the events it holds that waited for an earlier event of
	// their trade another worker settled (blocked).
	retryWait = 10 * time.Millisecond
)

// Publisher publishes the settled events of each settlement right after
// its commit: the pipeline calls Notify with the settlement's refs, and
// Run publishes them from one goroutine, in the order notified. Rows older
// than its hot age are left to the Sweeper, so that the two do not race
// for one row. Safe for concurrent use; Run must be running for anything
// to be published.
type Publisher struct {
	db      bun.IDB
	w       Writer
	log     *slog.Logger
	queue   chan []Ref
	hotAge  time.Duration
	timeout time.Duration
	now     func() time.Time
}

// NewPublisher returns a Publisher writing to w the rows of db's outbox,
// for Sweepers of grace grace (zero: DefaultSweepGrace): its hot age and
// its publish timeout are each a third of it (DefaultHotAge,
// DefaultPublishTimeout), and w's own timeout must be at most that
// (NewKafkaWriter's is). A nil logger discards logs.
func NewPublisher(db bun.IDB, w Writer, logger *slog.Logger, grace time.Duration) *Publisher {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	third := or(grace, DefaultSweepGrace) / 3
	return &Publisher{
		db: db, w: w, log: logger, queue: make(chan []Ref, DefaultQueue), hotAge: third, timeout: third,
		now: time.Now,
	}
}

// Notify hands the refs of a committed settlement to Run. It never blocks:
// when the queue is full the refs are dropped, and the Sweeper publishes
// their rows after its grace. A nil Publisher or no refs do nothing.
func (p *Publisher) Notify(refs []Ref) {
	if p == nil || len(refs) == 0 {
		return
	}
	select {
	case p.queue <- refs:
	default:
		p.log.Debug("settled-event queue full; the sweeper publishes them", "events", len(refs))
	}
}

// Run publishes what Notify hands it until ctx ends: each publish takes
// every ref queued (at most maxRefs). A failed publish is logged; its rows
// stay unpublished for the Sweeper. An event that waits for an earlier
// event of its trade that another worker settled (a channel retry on
// another partition settled a trade's payment there) is tried again with
// the next publish, or after retryWait when nothing comes, until it is
// published or older than the hot age, when the Sweeper has it. It
// returns nil when ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	var held []Ref // blocked by an earlier event of their trade
	t := time.NewTimer(retryWait)
	t.Stop()
	defer t.Stop()
	for {
		var refs []Ref
		var retry <-chan time.Time
		if len(held) > 0 {
			t.Reset(retryWait)
			retry = t.C
		}
		select {
		case <-ctx.Done():
			return nil
		case refs = <-p.queue:
		case <-retry:
		}
		refs = append(held, refs...)
	drain:
		for len(refs) < maxRefs {
			select {
			case more := <-p.queue:
				refs = append(refs, more...)
			default:
				break drain
			}
		}
		n, blocked, err := p.publish(ctx, refs)
		held = blocked
		if err != nil && ctx.Err() == nil {
			p.log.Warn("settled events not published; the sweeper publishes them", "events", len(refs),
				"published", n, "error", err.Error())
		}
	}
}

// Publish publishes the unpublished rows of refs that are publishable
// (every earlier trade_seq of their trade published) and younger than the
// hot age, and marks them published; it returns how many it published. The
// others are left to the Sweeper. It reads the refs' trades once (bounded
// by the publish timeout), writes once per maxWriteBytes and marks once.
// The write is bounded by the writer's own timeout, not by ctx's: a write
// its caller stopped waiting for is still sent by kafka-go, so waiting for
// its end is what keeps it from landing after the Sweeper took its rows.
// The age is judged after the read, just before the write.
func (p *Publisher) Publish(ctx context.Context, refs []Ref) (int, error) {
	n, _, err := p.publish(ctx, refs)
	return n, err
}

// publish is Publish, and also returns the refs of the rows it left
// because an earlier event of their trade, not theirs, is unpublished
// (blocked), young enough to be tried again; none after a failed write.
func (p *Publisher) publish(ctx context.Context, refs []Ref) (int, []Ref, error) {
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	pending, err := pendingOf(rctx, p.db, tradesOf(refs, func(r Ref) trade { return trade{r.TenantID, r.Channel, r.TradeNo} }))
	cancel()
	if err != nil || len(pending) == 0 {
		return 0, nil, err
	}
	type event struct {
		tenant int64
		key    string
	}
	want := make(map[event]bool, len(refs))
	for _, r := range refs {
		want[event{r.TenantID, r.Key}] = true
	}
	cutoff := p.now().Add(-p.hotAge)
	own := map[int64]bool{}
	for _, r := range pending {
		if want[event{r.TenantID, r.Key}] && r.SettledAt.After(cutoff) {
			own[r.ID] = true
		}
	}
	ready, blocked := publishable(pending, own)
	n, err := send(ctx, p.db, p.w, ready, p.now)
	if err != nil {
		return n, nil, err
	}
	var held []Ref
	for _, r := range blocked {
		held = append(held, Ref{TenantID: r.TenantID, Channel: r.Channel, TradeNo: r.TradeNo, Key: r.Key})
	}
	return n, held, nil
}
