package deadletters

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// Status says whether a dead letter still needs someone.
type Status string

// The statuses of a dead letter.
const (
	// StatusOpen: nothing settled its event since, and nobody closed it.
	StatusOpen Status = "open"
	// StatusResolved: a claim with the same key and fingerprint settled
	// POSTED or NO_MONEY after the dead letter was written (e.g. redriven
	// once its cause was fixed).
	StatusResolved Status = "resolved"
	// StatusClosed: an operator closed it with a note (consumer dlq close).
	StatusClosed Status = "closed"
)

// RecordID is the ss_dead_letter identity of d: its source coordinates, the
// hash of its key and value, and its kind. For a dead letter whose value
// was omitted the hash is not the original message's.
func (d Message) RecordID() ID {
	return NewID(d.SourceTopic, d.SourcePartition, d.SourceOffset, d.Key, d.Value, d.Kind)
}

// State is a dead letter with its record and what decides its
// status.
type State struct {
	Message Message
	Status  Status
	// Record is its ss_dead_letter row; nil when there is none (written
	// before migration 0003, or the record insert never succeeded).
	Record *Record
	// TenantID, Key and Fingerprint are the event's, from the record or
	// else by decoding the dead letter's value now; empty when neither
	// knows them.
	TenantID    int64
	Key         string
	Fingerprint string
	// SettledAt is when the claim that resolved it settled, and Outcome
	// its outcome; set only for StatusResolved.
	SettledAt *time.Time
	Outcome   string
}

// WrittenAt is when the dead letter was written: its record's time, or
// else the dead-letter message's timestamp.
func (s State) WrittenAt() time.Time {
	if s.Record != nil {
		return s.Record.CreatedAt
	}
	return s.Message.Time
}

// States works out each dead letter's status: closed when its
// record says an operator closed it; resolved when the claim of its event
// (key and fingerprint from the record, or else by decoding its value with
// dec, which may be nil) is SETTLED with outcome POSTED or NO_MONEY and
// settled after the dead letter was written; open otherwise. A conflict or
// an over-refund therefore stays open until closed: its claim has another
// fingerprint, or the outcome OVER_REFUND.
func States(ctx context.Context, db *bun.DB, dec *channels.Decoder, ds []Message) ([]State, error) {
	srcs := make([]Source, 0, len(ds))
	seen := map[Source]bool{}
	for _, d := range ds {
		src := Source{Topic: d.SourceTopic, Partition: d.SourcePartition, Offset: d.SourceOffset}
		if !seen[src] {
			seen[src] = true
			srcs = append(srcs, src)
		}
	}
	recs, err := NewStore(db).ForSources(ctx, srcs)
	if err != nil {
		return nil, err
	}
	byID := make(map[ID]Record, len(recs))
	bySource := map[sourceKind][]Record{}
	for _, r := range recs {
		byID[r.ID] = r
		sk := sourceKind{r.SourceTopic, r.SourcePartition, r.SourceOffset, r.Kind}
		bySource[sk] = append(bySource[sk], r)
	}
	out := make([]State, len(ds))
	var keys []idempotent.TenantKey
	for i, d := range ds {
		st := State{Message: d, Status: StatusOpen}
		r, ok := byID[d.RecordID()]
		if !ok && d.ValueOmitted {
			// The hash is of the original value: match by source and kind.
			if rs := bySource[sourceKind{d.SourceTopic, d.SourcePartition, d.SourceOffset, d.Kind}]; len(rs) == 1 {
				r, ok = rs[0], true
			}
		}
		if ok {
			st.Record = &r
			st.TenantID, st.Key, st.Fingerprint = r.TenantID, r.Key, r.Fingerprint
		}
		if st.Key == "" && dec != nil && !d.ValueOmitted {
			if res, err := dec.Decode(d.Value); err == nil && !res.Ignored {
				st.TenantID, st.Key, st.Fingerprint = res.Event.TenantID, string(res.Event.Key), res.Event.Fingerprint
			}
		}
		if st.Record != nil && st.Record.Closed() {
			st.Status = StatusClosed
		} else if st.Key != "" && st.TenantID > 0 {
			keys = append(keys, idempotent.TenantKey{TenantID: st.TenantID, Key: idempotent.Key(st.Key)})
		}
		out[i] = st
	}
	if len(keys) == 0 {
		return out, nil
	}
	claims, err := idempotent.NewStore(db).LookupMany(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("read the dead letters' claims: %w", err)
	}
	for i := range out {
		st := &out[i]
		if st.Status != StatusOpen || st.Key == "" {
			continue
		}
		c, ok := claims[idempotent.TenantKey{TenantID: st.TenantID, Key: idempotent.Key(st.Key)}]
		if !ok || c.Status != idempotent.StatusSettled || c.SettledAt == nil || c.Fingerprint != st.Fingerprint {
			continue
		}
		if c.Outcome != idempotent.OutcomePosted && c.Outcome != idempotent.OutcomeNoMoney {
			continue
		}
		if !c.SettledAt.After(st.WrittenAt()) {
			continue
		}
		st.Status, st.SettledAt, st.Outcome = StatusResolved, c.SettledAt, string(c.Outcome)
	}
	return out, nil
}

type sourceKind struct {
	topic     string
	partition int
	offset    int64
	kind      string
}

// CloseMessage records that by (the OS user@host) closed d with note:
// its ss_dead_letter row gets closed_at, closed_by and close_note (a row
// is inserted first for a dead letter that has none, with the event fields
// dec decodes, dec may be nil). It returns the record and false, changing
// nothing, when d was already closed. The error wraps
// ErrEmptyNote for a blank note.
func CloseMessage(ctx context.Context, db *bun.DB, dec *channels.Decoder, d Message, by, note string) (Record, bool, error) {
	r := Record{ID: d.RecordID(), Error: d.Error, CreatedAt: d.Time}
	if d.ValueOmitted {
		// The record the worker wrote holds the original value's hash.
		states, err := States(ctx, db, nil, []Message{d})
		if err != nil {
			return Record{}, false, err
		}
		if rec := states[0].Record; rec != nil {
			r.ID = rec.ID
		}
	}
	if dec != nil && !d.ValueOmitted {
		if res, err := dec.Decode(d.Value); err == nil || res.Event.TenantID > 0 {
			ev := res.Event
			r.TenantID, r.Key, r.Fingerprint, r.TradeNo = ev.TenantID, string(ev.Key), ev.Fingerprint, ev.TradeNo
			if ev.Channel.Valid() {
				r.Channel = string(ev.Channel)
			}
		}
	}
	rec, changed, err := NewStore(db).Close(ctx, r, by, note)
	if err != nil {
		return Record{}, false, fmt.Errorf("close dead letter at %d:%d: %w", d.Partition, d.Offset, err)
	}
	return rec, changed, nil
}
