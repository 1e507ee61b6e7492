package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// Sweeper settles orphans: claims still ACQUIRED after OrphanAfter whose
// message never came again (its worker died between claim and settle and
// the partition's next owner started past it, or an operator skipped it).
// It settles them through the fence from the stored canonical event, so it
// is safe to run on every instance at once and beside live settlers.
type Sweeper struct {
	Claims  OrphanStore
	Settler Settler
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Originals and DeadLetterer write the dead letter of an orphan that
	// settles OVER_REFUND: the claim's own message is read back from Kafka
	// by its recorded source. When either is nil, or the message is gone
	// (retention), the dead letter waits for a redelivery and `consumer
	// reconcile` lists the claim.
	Originals    OriginalFetcher
	DeadLetterer DeadLetterer
	OrphanAfter  time.Duration // default 2m
	Interval     time.Duration // default 30s
	PageSize     int           // default 100

	// DeadLetterRecords, when set, records the dead letter written and
	// skips one already recorded (see Pipeline.DeadLetterRecords).
	DeadLetterRecords DeadLetterRecords

	// Settled, when set, hears of the settled events of each orphan it
	// settles POSTED right after the commit, as the pipeline's settlements
	// do (Pipeline.Settled), so they are published at once rather than
	// when the outbox sweeper next looks. Nil: the outbox sweeper
	// publishes them.
	Settled SettledNotifier

	// Merchantless, when set, runs after each sweep: the refunds refused
	// for want of their payment, redriven once it is posted.
	Merchantless *MerchantlessRedrive

	once deadletters.Once
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
		if s.Merchantless != nil {
			if _, err := s.Merchantless.Once(ctx); err != nil && ctx.Err() == nil {
				s.Metrics.ProcessingError(metrics.StageSweep)
				s.Logger.Warn("redrive of refunds refused for want of their payment failed", "error", err.Error())
			}
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
			if r.Outcome == idempotent.OutcomePosted {
				s.notifySettled(rec)
			}
			s.Logger.Info("orphan settled", "tenant", rec.TenantID, "key", string(rec.Key),
				"outcome", string(r.Outcome), "age", rec.Age(time.Now()).Round(time.Second).String(), "source", rec.Source.String())
			if r.Outcome == idempotent.OutcomeOverRefund {
				s.deadLetterOverRefund(ctx, rec)
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

// notifySettled tells s.Settled of the settled events that the settlement
// of rec, POSTED, wrote. rec's stored event, which SettleStored has just
// decoded, names the trade.
func (s *Sweeper) notifySettled(rec idempotent.Record) {
	if s.Settled == nil {
		return
	}
	var ev channels.Event
	if err := json.Unmarshal(rec.Event, &ev); err != nil {
		return // SettleStored refuses such a claim; the outbox sweeper has the row
	}
	s.Settled.Notify(settledRefs(ev))
}

// deadLetterOverRefund writes the dead letter of an orphan settled
// OVER_REFUND from its original message, read back from Kafka. Failures
// are logged: the claim stays without a dead letter, which a redelivery of
// any copy of the event or `consumer reconcile` picks up.
func (s *Sweeper) deadLetterOverRefund(ctx context.Context, rec idempotent.Record) {
	log := s.Logger.With("tenant", rec.TenantID, "key", string(rec.Key), "source", rec.Source.String())
	if s.Originals == nil || s.DeadLetterer == nil || rec.Source.Topic == "" {
		log.Error("orphan settled as over-refund; its dead letter waits for a redelivery")
		return
	}
	msg, err := s.Originals.Original(ctx, rec.Source)
	if err != nil {
		log.Error("orphan settled as over-refund; its message could not be read back for the dead letter", "error", err.Error())
		return
	}
	reason := fmt.Sprintf("refunds would exceed the order total; nothing was posted (settled by the orphan sweeper, claim %s)", rec.Key)
	ev := channels.Event{TenantID: rec.TenantID, Key: rec.Key, Fingerprint: rec.Fingerprint}
	if err := s.once.Write(ctx, s.DeadLetterer, s.DeadLetterRecords, s.Metrics, s.Logger,
		deadletters.Letter{Msg: msg, Kind: channels.KindOverRefund, Reason: reason, Event: ev}); err != nil {
		if !errors.Is(err, deadletters.ErrNotRecorded) {
			log.Error("orphan settled as over-refund; dead letter not written", "error", err.Error())
			return
		}
		// Written: the claim's mark below keeps it from being written again.
		log.Warn("over-refund dead letter written but not recorded in ss_dead_letter", "error", err.Error())
	}
	if err := s.Claims.MarkDeadLettered(ctx, rec.TenantID, rec.Key); err != nil {
		log.Error("over-refund dead letter written but not recorded on the claim", "error", err.Error())
		return
	}
	log.Error("orphan settled as over-refund and dead-lettered")
}

// OriginalFetcher reads back, by its recorded source, the Kafka message
// that made a claim.
type OriginalFetcher interface {
	Original(ctx context.Context, src idempotent.Source) (kafka.Message, error)
}

// KafkaOriginals reads single messages from the brokers by topic,
// partition and offset.
type KafkaOriginals struct {
	Brokers []string
	Dialer  *kafka.Dialer
}

// ErrOriginalGone is returned when the message at a source offset is no
// longer in the topic (retention removed it).
var ErrOriginalGone = errors.New("original message no longer in the topic")

// Original implements OriginalFetcher. It waits at most 10 seconds.
func (k KafkaOriginals) Original(ctx context.Context, src idempotent.Source) (kafka.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: k.Brokers, Topic: src.Topic, Partition: src.Partition, Dialer: k.Dialer,
		MaxWait: 100 * time.Millisecond, MaxBytes: 10 << 20,
	})
	defer r.Close()
	if err := r.SetOffset(src.Offset); err != nil {
		return kafka.Message{}, fmt.Errorf("read back %s: %w", src, err)
	}
	m, err := r.FetchMessage(ctx)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("read back %s: %w", src, err)
	}
	if m.Offset != src.Offset {
		return kafka.Message{}, fmt.Errorf("read back %s: got offset %d: %w", src, m.Offset, ErrOriginalGone)
	}
	return m, nil
}
