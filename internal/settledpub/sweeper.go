package settledpub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
)

// Sweeper defaults (docs/design.md, "Settled events").
const (
	// DefaultSweepInterval is how often an idle Sweeper looks for rows
	// left unpublished; a round that found a full batch runs again at once.
	DefaultSweepInterval = 5 * time.Second
	// DefaultSweepGrace is how old an unpublished row must be before a
	// Sweeper takes it: longer than the Publisher's hot age plus its
	// DefaultPublishTimeout, so the two never race for a row.
	DefaultSweepGrace = 15 * time.Second
	// DefaultLease is how long a Sweeper's claim on its rows holds: no
	// other Sweeper takes them meanwhile.
	DefaultLease = time.Minute
	// DefaultSweepBatch is the most rows one round claims.
	DefaultSweepBatch = 500
)

// Sweeper publishes the settled events left unpublished (a crash between
// the commit and the publish, a broker outage, a full Publisher queue), in
// trade_seq order per trade. Each round claims at most Batch rows older
// than Grace with a lease, publishes those that are publishable, marks them
// and releases the others. Several Sweepers (one per worker) run at once;
// the lease keeps them from publishing one row twice within it.
type Sweeper struct {
	DB     bun.IDB
	Writer Writer
	Logger *slog.Logger
	// Interval, Grace, Lease and Batch default to DefaultSweepInterval,
	// DefaultSweepGrace, DefaultLease and DefaultSweepBatch when zero.
	Interval time.Duration
	Grace    time.Duration
	Lease    time.Duration
	Batch    int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (s *Sweeper) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Microsecond)
	}
	return time.Now().UTC().Truncate(time.Microsecond)
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Run sweeps every Interval until ctx ends, at once again after a round
// that claimed a full batch. A failed round is logged and tried again at
// the next tick. It returns nil when ctx ends.
func (s *Sweeper) Run(ctx context.Context) error {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		claimed, published, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("settled-event sweep failed; trying again", "claimed", claimed, "published", published, "error", err.Error())
		} else if published > 0 {
			log.Info("settled events published by the sweeper", "published", published)
		}
		next := or(s.Interval, DefaultSweepInterval)
		if err == nil && claimed >= or(s.Batch, DefaultSweepBatch) {
			next = 0
		}
		t.Reset(next)
	}
}

// Sweep is one round: it claims up to Batch unpublished rows older than
// Grace whose lease is free, publishes the publishable ones in trade_seq
// order per trade, marks them and releases the rest. It returns how many
// rows it claimed and published. A claim another Sweeper won (a lock wait,
// a write conflict on TiDB, a certification failure on Galera) is an
// error: nothing is published, the next round tries again.
func (s *Sweeper) Sweep(ctx context.Context) (claimed, published int, err error) {
	now := s.now()
	var ids []int64
	err = s.DB.NewSelect().Table(outboxTable).Column("id").
		Where("published = 0").Where("settled_at < ?", now.Add(-or(s.Grace, DefaultSweepGrace))).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("lease_until IS NULL").WhereOr("lease_until < ?", now)
		}).
		// Oldest first, in idx_settled_state's order. A trade's rows
		// need no order here: what is published, and in which order,
		// publishable decides from pendingOf's rows in trade_seq order.
		OrderExpr("settled_at").
		Limit(int64(or(s.Batch, DefaultSweepBatch))).Scan(ctx, &ids)
	if err != nil {
		return 0, 0, fmt.Errorf("find unpublished settled events: %w", err)
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	token, err := newToken()
	if err != nil {
		return 0, 0, err
	}
	if _, err := s.DB.NewUpdate().Table(outboxTable).
		Set("lease_owner = ?", token).Set("lease_until = ?", now.Add(or(s.Lease, DefaultLease))).
		Where("id IN (?)", bun.List(ids)).Where("published = 0").
		WhereGroup(" AND ", func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Where("lease_until IS NULL").WhereOr("lease_until < ?", now)
		}).Exec(ctx); err != nil {
		return 0, 0, fmt.Errorf("claim %d unpublished settled events: %w", len(ids), err)
	}
	var mine []row
	if err := s.DB.NewSelect().Table(outboxTable).
		Column("id", "tenant_id", "channel_code", "channel_trade_no").
		Where("id IN (?)", bun.List(ids)).Where("lease_owner = ?", token).Where("published = 0").
		Scan(ctx, &mine); err != nil {
		return 0, 0, fmt.Errorf("read the claimed settled events: %w", err)
	}
	if len(mine) == 0 {
		return 0, 0, nil
	}
	own := make(map[int64]bool, len(mine))
	for _, r := range mine {
		own[r.ID] = true
	}
	pending, err := pendingOf(ctx, s.DB, tradesOf(mine, row.trade))
	if err != nil {
		return len(mine), 0, err
	}
	ready, _ := publishable(pending, own)
	// Done well within the lease, so no other Sweeper takes these rows
	// while this one still writes them.
	sctx, cancel := context.WithTimeout(ctx, or(s.Lease, DefaultLease)/2)
	published, err = send(sctx, s.DB, s.Writer, ready, s.now)
	cancel()
	if published < len(mine) {
		// What waits for an earlier event of its trade that another holds,
		// and what the broker refused: free for the next round rather than
		// held for the whole lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, rerr := s.DB.NewUpdate().Table(outboxTable).Set("lease_owner = NULL").Set("lease_until = NULL").
			Where("id IN (?)", bun.List(ids)).Where("lease_owner = ?", token).Where("published = 0").Exec(rctx)
		cancel()
		if rerr != nil && err == nil {
			err = fmt.Errorf("release the unpublished settled events: %w", rerr)
		}
	}
	return len(mine), published, err
}

// newToken is a claiming round's random lease owner.
func newToken() ([]byte, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lease token: %w", err)
	}
	return []byte(hex.EncodeToString(b)), nil
}
