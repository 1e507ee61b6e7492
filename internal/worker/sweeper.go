package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// Sweeper settles orphans: claims still ACQUIRED after OrphanAfter whose
// message never came again (its worker died between claim and settle and
// the partition's next owner started past it, or an operator skipped it).
// It settles them through the fence from the stored canonical event, so it
// is safe to run on every instance at once and beside live settlers.
type Sweeper struct {
	Claims      *idempotent.Store
	Settler     Settler
	Metrics     *metrics.Metrics
	Logger      *slog.Logger
	OrphanAfter time.Duration // default 2m
	Interval    time.Duration // default 30s
	PageSize    int           // default 100
}

// Run sweeps every Interval until ctx ends. It returns nil.
func (s *Sweeper) Run(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.SweepOnce(ctx); err != nil && ctx.Err() == nil {
			s.Metrics.ProcessingError(metrics.StageSweep)
			s.Logger.Warn("orphan sweep failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// SweepOnce settles every claim ACQUIRED for longer than OrphanAfter, oldest
// first, and then sets paycb_orphan_claims to what is left. It returns how
// many it settled (fence losses included: someone settled them). A claim
// that fails to settle is left for the next sweep; the first error is
// returned after the others were tried.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	after := s.OrphanAfter
	if after <= 0 {
		after = 2 * time.Minute
	}
	page := s.PageSize
	if page <= 0 {
		page = 100
	}
	cutoff := s.Claims.Now().Add(-after)
	settled := 0
	var firstErr error
	var cur idempotent.OrphanCursor
	for {
		recs, next, err := s.Claims.Orphans(ctx, cutoff, cur, page)
		if err != nil {
			return settled, err
		}
		for _, rec := range recs {
			r, err := s.Settler.SettleStored(ctx, rec)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				s.Logger.Warn("orphan not settled", "tenant", rec.TenantID, "key", string(rec.Key), "error", err.Error())
				continue
			}
			settled++
			if r.FenceLost {
				s.Metrics.Settled(metrics.SettleFenceLost)
				continue
			}
			s.Metrics.Settled(metrics.SettleOutcome(r.Outcome))
			s.Logger.Info("orphan settled", "tenant", rec.TenantID, "key", string(rec.Key),
				"outcome", string(r.Outcome), "age", rec.Age(time.Now()).Round(time.Second).String(), "source", rec.Source.String())
			if r.Outcome == idempotent.OutcomeOverRefund {
				// The original message is not at hand here; the dead letter is
				// written when the message is seen again, and `consumer
				// orphans`/`reconcile` list OVER_REFUND claims without one.
				s.Logger.Error("orphan settled as over-refund; its dead letter is pending", "key", string(rec.Key))
			}
		}
		if next == (idempotent.OrphanCursor{}) {
			break
		}
		cur = next
	}
	left, err := s.Claims.CountOrphans(ctx, cutoff)
	if err != nil {
		return settled, err
	}
	s.Metrics.SetOrphanClaims(left)
	return settled, firstErr
}
