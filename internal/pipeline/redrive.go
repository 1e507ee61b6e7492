package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// namesNoMerchant is the words of checkMerchantless's refusals that tell
// them from every other tenant_mismatch, early in the reason so that the
// dead letter's recorded error (cut at 1024 bytes) always keeps them.
const namesNoMerchant = "names no merchant"

// ClosedByWorker is who a dead letter the worker itself closed says closed
// it (ss_dead_letter.closed_by).
const ClosedByWorker = "worker"

// OpenLetters is what MerchantlessRedrive needs of the dead-letter records;
// *deadletters.Store implements it.
type OpenLetters interface {
	// Open returns the open dead letters of kind read from topic whose
	// channel is one of chans, by row id after afterID, at most limit.
	Open(ctx context.Context, topic, kind string, chans []string, afterID int64, limit int) ([]deadletters.Record, error)
	// Close closes r, saying by whom and why.
	Close(ctx context.Context, r deadletters.Record, by, note string) (deadletters.Record, bool, error)
}

// MerchantlessRedrive brings back, by itself, a refund that names no
// merchant which checkMerchantless held for its payment and then refused
// (tenant_mismatch) because none came within the hold, once the trade's
// payment is posted checked and bound to the refund's tenant: it reads the
// message back from the input topic by its recorded source, checks it is
// the very message of the dead letter (its hash), hands it to the pipeline
// as its partition would, and closes the dead letter when its claim is
// there. Before, it waited for an operator's redrive.
//
// Nothing is decided here that the pipeline does not decide again: the
// message passes the same merchant check, and the unique index judges its
// claim, so several workers running it at once, or a redrive by hand
// beside it, settle the refund once. A letter whose message the pipeline
// refuses again, or whose message is gone from the topic, is not tried
// again by this process (it is logged; `consumer dlq redrive` still
// works). Not safe for concurrent use: the sweeper runs it.
type MerchantlessRedrive struct {
	// Pipeline handles the message; its Merchants, Settler and Claims
	// decide. Without a merchant binding nothing is refused this way, and
	// Once does nothing.
	Pipeline *Pipeline
	// Topic is the input topic: only its dead letters are looked at (one
	// database may serve several deployments).
	Topic     string
	Letters   OpenLetters
	Originals OriginalFetcher
	Logger    *slog.Logger
	PageSize  int // default 100

	// tried holds the rows this process handed back once and that did not
	// settle, or whose message is gone: not tried again.
	tried map[int64]bool
}

// merchantlessChannels are the registered channels whose refunds may name
// no merchant (channels.Spec.RefundMayNameNoMerchant).
func merchantlessChannels() []string {
	var out []string
	for _, spec := range channels.All() {
		if spec.RefundMayNameNoMerchant {
			out = append(out, string(spec.Code))
		}
	}
	return out
}

// Once looks at every open dead letter of the kind checkMerchantless
// writes and redrives those whose payment is now posted and bound. It
// returns how many settled; a letter that fails is left for the next call,
// and the first error is returned after the others were tried.
func (r *MerchantlessRedrive) Once(ctx context.Context) (int, error) {
	p := r.Pipeline
	chans := merchantlessChannels()
	if p == nil || p.Merchants == nil || len(chans) == 0 {
		return 0, nil
	}
	trades, ok := p.Settler.(TradeMerchants)
	if !ok {
		return 0, nil
	}
	if r.tried == nil {
		r.tried = map[int64]bool{}
	}
	page := r.PageSize
	if page <= 0 {
		page = 100
	}
	var settled int
	var first error
	for after := int64(0); ; {
		recs, err := r.Letters.Open(ctx, r.Topic, string(metrics.KindTenantMismatch), chans, after, page)
		if err != nil {
			return settled, err
		}
		for _, rec := range recs {
			after = rec.RowID
			if r.tried[rec.RowID] || !strings.Contains(rec.Error, namesNoMerchant) || rec.Key == "" || rec.TradeNo == "" {
				continue
			}
			done, err := r.redrive(ctx, trades, rec)
			if err != nil {
				first = cmp.Or(first, fmt.Errorf("redrive dead letter %d: %w", rec.RowID, err))
			}
			if done {
				settled++
			}
		}
		if len(recs) < page || ctx.Err() != nil {
			return settled, first
		}
	}
}

// redrive hands rec's message back to the pipeline when its trade's
// payment is posted bound to its tenant, and reports whether it settled.
func (r *MerchantlessRedrive) redrive(ctx context.Context, trades TradeMerchants, rec deadletters.Record) (bool, error) {
	p := r.Pipeline
	ch := channels.Channel(rec.Channel)
	merchant, _, err := trades.TradeMerchant(ctx, rec.TenantID, ch, rec.TradeNo)
	if err != nil {
		return false, err
	}
	if merchant == "" {
		return false, nil // no payment bound yet: the next call looks again
	}
	if owner, ok := p.Merchants.Current().TenantOf(ch, merchant); !ok || owner != rec.TenantID {
		return false, nil // the pipeline would refuse it again
	}
	src := idempotent.Source{Topic: rec.SourceTopic, Partition: rec.SourcePartition, Offset: rec.SourceOffset}
	m, err := r.Originals.Original(ctx, src)
	if errors.Is(err, ErrOriginalGone) {
		r.tried[rec.RowID] = true
		r.Logger.Warn("a refund's payment is now posted, but its dead letter's message is gone from the input topic: redrive it by hand (consumer dlq redrive)",
			"dead_letter", rec.RowID, "source", src.String(), "key", rec.Key)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if deadletters.Hash(m.Key, m.Value) != rec.MessageHash {
		r.tried[rec.RowID] = true
		r.Logger.Warn("a refund's payment is now posted, but the input topic holds another message at its dead letter's source (the topic was recreated?): redrive it by hand",
			"dead_letter", rec.RowID, "source", src.String(), "key", rec.Key)
		return false, nil
	}
	if err := p.Handle(ctx, []kafka.Message{m}, make([]MessageState, 1)); err != nil {
		return false, err
	}
	key := idempotent.TenantKey{TenantID: rec.TenantID, Key: idempotent.Key(rec.Key)}
	claims, err := p.Claims.LookupMany(ctx, []idempotent.TenantKey{key})
	if err != nil {
		return false, err
	}
	if _, ok := claims[key]; !ok {
		r.tried[rec.RowID] = true
		r.Logger.Warn("a refund handed back once its payment was posted was refused again; it stays a dead letter",
			"dead_letter", rec.RowID, "key", rec.Key)
		return false, nil
	}
	note := fmt.Sprintf("its trade's payment was posted, checked for merchant %s bound to tenant %d: the worker handled the message again and it was claimed",
		merchant, rec.TenantID)
	if _, _, err := r.Letters.Close(ctx, rec, ClosedByWorker, note); err != nil {
		return true, err
	}
	r.Logger.Info("a refund dead-lettered for want of its payment settled once the payment was posted",
		"dead_letter", rec.RowID, "key", rec.Key, "tenant", rec.TenantID)
	return true, nil
}
