package deadletters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
)

// Records is the record of the dead letters written (ss_dead_letter);
// *Store is the implementation.
type Records interface {
	// Recorded reports whether the dead letter id was written and
	// acknowledged before.
	Recorded(ctx context.Context, id ID) (bool, error)
	// RedriveRecorded reports whether the dead letter from names (the
	// x-redriven-from of the message of id) already has a successor
	// recorded: a redrive of it failed again before.
	RedriveRecorded(ctx context.Context, from string, id ID) (bool, error)
	// Record inserts r; a record already there is success.
	Record(ctx context.Context, r Record) error
}

// ErrNotRecorded is wrapped by the error of a dead letter that was written
// and acknowledged but whose record could not be inserted: the message is
// retried, and the retry inserts the record without writing the dead
// letter again.
var ErrNotRecorded = errors.New("dead letter written but not recorded")

// maxUnrecorded bounds how many written-but-unrecorded dead letters a
// writer remembers (a database outage during a storm of dead letters).
const maxUnrecorded = 4096

// recordTimeout bounds the look-up and the insert of one record.
const recordTimeout = 5 * time.Second

// Once writes each dead letter once: before the write it looks the record
// up (written by this or any earlier run, group or instance) and skips the
// write when it is there, or, for a redriven message (x-redriven-from),
// when the dead letter it was redriven from already has a successor; after
// the acknowledged write it inserts the record, linked to the dead letter
// it was redriven from. It remembers the dead letters written whose record insert
// failed, so that the message's retry inserts the record without a second
// write. The zero value is ready to use; it is safe for concurrent use.
type Once struct {
	mu         sync.Mutex
	unrecorded map[ID]struct{}
}

// Letter is one dead letter to write: the input message, its kind and
// reason, and its event as far as it decoded (the zero Event when the
// envelope did not parse; tenant and channel only when the body did not
// decode).
type Letter struct {
	Msg    kafka.Message
	Kind   channels.ErrorKind
	Reason string
	Event  channels.Event
}

// Write writes l through s unless recs holds its record, counts it in
// paycb_dead_letters_total when written, then records it in recs. With recs
// nil it only writes. An error wrapping ErrNotRecorded means the dead
// letter was written but not recorded; any other error means it was not
// written.
func (o *Once) Write(ctx context.Context, s Sender, recs Records, met *metrics.Metrics, logger *slog.Logger, l Letter) error {
	if recs == nil {
		if err := s.DeadLetter(ctx, l.Msg, l.Kind, l.Reason); err != nil {
			return err
		}
		met.DeadLetter(metrics.DeadLetterKind(l.Kind))
		return nil
	}
	id := NewID(l.Msg.Topic, l.Msg.Partition, l.Msg.Offset, l.Msg.Key, l.Msg.Value, string(l.Kind))
	from := headerOf(l.Msg.Headers, HeaderRedrivenFrom)
	if !o.pending(id) {
		lctx, cancel := context.WithTimeout(ctx, recordTimeout)
		found, err := recs.Recorded(lctx, id)
		if err == nil && !found && from != "" {
			found, err = recs.RedriveRecorded(lctx, from, id)
		}
		cancel()
		if err != nil {
			return err
		}
		if found {
			logger.Debug("dead letter already written for this message; not written again",
				"kind", string(l.Kind), "topic", l.Msg.Topic, "partition", l.Msg.Partition, "offset", l.Msg.Offset)
			return nil
		}
		if err := s.DeadLetter(ctx, l.Msg, l.Kind, l.Reason); err != nil {
			return err
		}
		met.DeadLetter(metrics.DeadLetterKind(l.Kind))
		o.remember(id)
	}
	// The dead letter is written: record it even when ctx ends now.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := recs.Record(rctx, recordOf(id, l)); err != nil {
		return fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	o.forget(id)
	return nil
}

// recordOf is the record of dead letter id: its event fields as far as
// the message decoded.
func recordOf(id ID, l Letter) Record {
	r := Record{ID: id, Error: l.Reason, RedrivenFrom: headerOf(l.Msg.Headers, HeaderRedrivenFrom)}
	ev := l.Event
	if ev.TenantID > 0 {
		r.TenantID = ev.TenantID
	}
	if ev.Channel.Valid() {
		r.Channel = string(ev.Channel)
	}
	r.Key, r.Fingerprint, r.TradeNo = string(ev.Key), ev.Fingerprint, ev.TradeNo
	return r
}

func (o *Once) pending(id ID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.unrecorded[id]
	return ok
}

func (o *Once) remember(id ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.unrecorded == nil {
		o.unrecorded = map[ID]struct{}{}
	}
	if len(o.unrecorded) >= maxUnrecorded {
		for old := range o.unrecorded { // forget one: at worst written twice
			delete(o.unrecorded, old)
			break
		}
	}
	o.unrecorded[id] = struct{}{}
}

func (o *Once) forget(id ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.unrecorded, id)
}

// headerOf is the value of the header key in hs, "" when there is none.
func headerOf(hs []kafka.Header, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
