package deadletters

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
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
	// StatusRedriven: it was redriven and the redrive failed again: the
	// dead letter of that failure (its successor) takes its place, so one
	// original message never has more than one open dead letter.
	StatusRedriven Status = "redriven"
	// StatusDuplicate: a second copy in the topic of a dead letter that
	// has its row (a worker died between writing it and recording it, and
	// its retry wrote it again); the copy with the row stands for both.
	StatusDuplicate Status = "duplicate"
)

// RecordID is the ss_dead_letter identity of d: its source coordinates, the
// hash of its key and value, and its kind. For a dead letter whose value
// was omitted the hash is not the original message's.
func (d Message) RecordID() ID {
	return NewID(d.SourceTopic, d.SourcePartition, d.SourceOffset, d.Key, d.Value, d.Kind)
}

// State is a dead letter with its record and what decides its status.
type State struct {
	// ID is the dead letter's stable id (see LetterID).
	ID      string
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
	// Successor is the id of the dead letter its redrive failed again
	// into; set only for StatusRedriven. For StatusDuplicate it is the id
	// of the copy that has the row.
	Successor string
	// duplicateOf is the row of which this is a second copy (0: none).
	duplicateOf int64
}

// RedrivenFrom is the dead letter whose redrive failed again into this
// one (its x-redriven-from, from the message or the row); "" when it was
// no redrive.
func (s State) RedrivenFrom() string {
	if from := headerOf(s.Message.Headers, HeaderRedrivenFrom); from != "" {
		return from
	}
	if s.Record != nil {
		return s.Record.RedrivenFrom
	}
	return ""
}

// WrittenAt is when the dead letter was written: its record's time, or
// else the dead-letter message's timestamp.
func (s State) WrittenAt() time.Time {
	if s.Record != nil {
		return s.Record.CreatedAt
	}
	return s.Message.Time
}

// LetterID is the stable id of a dead letter: the id of its ss_dead_letter
// row ("37") when it has one; "p<P>-<O>" (its partition and offset in the
// dead-letter topic) for a dead letter without a row. A "p" id keeps
// naming its dead letter after a row is made for it (closing or redriving
// it records the position in the row).
func LetterID(rec *Record, d Message) string {
	if rec != nil && rec.RowID > 0 {
		return strconv.FormatInt(rec.RowID, 10)
	}
	return "p" + strconv.Itoa(d.Partition) + "-" + strconv.FormatInt(d.Offset, 10)
}

// LetterRef is a parsed dead-letter id: a row id, or a position in the
// dead-letter topic.
type LetterRef struct {
	RowID int64
	At    *At
}

// ErrBadID is wrapped by ParseID's errors.
var ErrBadID = errors.New("not a dead-letter id")

// ParseID parses a dead letter's id (LetterID): digits, or p<P>-<O>.
func ParseID(s string) (LetterRef, error) {
	if rest, ok := strings.CutPrefix(s, "p"); ok {
		p, o, ok := strings.Cut(rest, "-")
		part, err1 := strconv.Atoi(p)
		off, err2 := strconv.ParseInt(o, 10, 64)
		if !ok || err1 != nil || err2 != nil || part < 0 || off < 0 {
			return LetterRef{}, fmt.Errorf("%w: %q (a row id such as 37, or p<PARTITION>-<OFFSET> such as p0-12)", ErrBadID, s)
		}
		return LetterRef{At: &At{Partition: part, Offset: off}}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return LetterRef{}, fmt.Errorf("%w: %q (a row id such as 37, or p<PARTITION>-<OFFSET> such as p0-12)", ErrBadID, s)
	}
	return LetterRef{RowID: n}, nil
}

// States works out each dead letter's status: closed when its record says
// an operator closed it; redriven when a redrive of it failed again into a
// later dead letter; resolved when the claim of its event (key and
// fingerprint from the record, or else by decoding its value with dec,
// which may be nil) is SETTLED with outcome POSTED or NO_MONEY and settled
// after the dead letter was written; open otherwise. A conflict or an
// over-refund therefore stays open until closed or superseded: its claim
// has another fingerprint, or the outcome OVER_REFUND.
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
	out := match(ds, recs)
	return out, settleStates(ctx, db, dec, out)
}

// match pairs each of ds with its record among recs (by ID, or for a dead
// letter whose value was omitted by source and kind).
func match(ds []Message, recs []Record) []State {
	byID := make(map[ID]Record, len(recs))
	bySource := map[sourceKind][]Record{}
	for _, r := range recs {
		byID[r.ID] = r
		sk := sourceKind{r.SourceTopic, r.SourcePartition, r.SourceOffset, r.Kind}
		bySource[sk] = append(bySource[sk], r)
	}
	out := make([]State, len(ds))
	used := map[int64]bool{}
	for i, d := range ds {
		st := State{Message: d, Status: StatusOpen}
		r, ok := byID[d.RecordID()]
		if !ok && d.ValueOmitted {
			// The hash is of the original value: match by source and kind.
			if rs := bySource[sourceKind{d.SourceTopic, d.SourcePartition, d.SourceOffset, d.Kind}]; len(rs) == 1 {
				r, ok = rs[0], true
			}
		}
		switch {
		case ok && r.RowID > 0 && used[r.RowID]:
			st.duplicateOf = r.RowID
		case ok:
			st.Record = &r
			used[r.RowID] = true
		}
		out[i] = st
	}
	return out
}

// settleStates fills in each state's id, event and status (see States).
func settleStates(ctx context.Context, db *bun.DB, dec *channels.Decoder, out []State) error {
	store := NewStore(db)
	var rowIDs []int64
	var froms []string
	for i := range out {
		st := &out[i]
		d := st.Message
		st.ID = LetterID(st.Record, d)
		if r := st.Record; r != nil {
			st.TenantID, st.Key, st.Fingerprint = r.TenantID, r.Key, r.Fingerprint
			rowIDs = append(rowIDs, r.RowID)
		} else {
			froms = append(froms, d.Position(d.topic))
		}
		if st.Key == "" && dec != nil && !d.ValueOmitted && !d.BodyLost {
			if res, err := dec.Decode(d.Value); err == nil && !res.Ignored {
				st.TenantID, st.Key, st.Fingerprint = res.Event.TenantID, string(res.Event.Key), res.Event.Fingerprint
			}
		}
	}
	byRow, err := store.Successors(ctx, rowIDs)
	if err != nil {
		return err
	}
	byFrom, err := store.SuccessorsByFrom(ctx, froms)
	if err != nil {
		return err
	}
	var keys []idempotent.TenantKey
	for i := range out {
		st := &out[i]
		var next int64
		var ok bool
		if st.Record != nil {
			next, ok = byRow[st.Record.RowID]
		} else {
			next, ok = byFrom[st.Message.Position(st.Message.topic)]
		}
		switch {
		case st.duplicateOf > 0:
			st.Status, st.Successor = StatusDuplicate, strconv.FormatInt(st.duplicateOf, 10)
		case st.Record != nil && st.Record.Closed():
			st.Status = StatusClosed
		case ok:
			st.Status, st.Successor = StatusRedriven, strconv.FormatInt(next, 10)
		case st.Key != "" && st.TenantID > 0:
			keys = append(keys, idempotent.TenantKey{TenantID: st.TenantID, Key: idempotent.Key(st.Key)})
		}
	}
	if len(keys) == 0 {
		return nil
	}
	claims, err := idempotent.NewStore(db).LookupMany(ctx, keys)
	if err != nil {
		return fmt.Errorf("read the dead letters' claims: %w", err)
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
	return nil
}

type sourceKind struct {
	topic     string
	partition int
	offset    int64
	kind      string
}

// lostMessage is the dead letter of r as far as its row tells, for a dead
// letter the topic no longer holds.
func lostMessage(r Record) Message {
	d := Message{
		Partition: -1, Offset: -1, Time: r.CreatedAt, Kind: r.Kind, Error: r.Error,
		SourceTopic: r.SourceTopic, SourcePartition: r.SourcePartition, SourceOffset: r.SourceOffset,
		Source:   Position{Topic: r.SourceTopic, Partition: r.SourcePartition, Offset: r.SourceOffset}.String(),
		BodyLost: true,
	}
	if p := r.Position; p != nil {
		d.Partition, d.Offset, d.topic = p.Partition, p.Offset, p.Topic
	}
	return d
}

// List is every dead letter f selects: the union of the dead-letter
// topic's messages and the ss_dead_letter rows, so that a dead letter
// written before the table existed, or whose row was lost, is listed from
// the topic, and one whose message the topic no longer holds (retention)
// is listed from its row, with Message.BodyLost (only a row of k's topics:
// another deployment's rows in a shared database are left out). Each has its id and
// status (States). With db nil it is the topic's messages alone, without
// status. The order is the time each was written, oldest first.
func List(ctx context.Context, k kafkaops.Kafka, db *bun.DB, dec *channels.Decoder, f Filter) ([]State, error) {
	ds, err := ReadTopic(ctx, k, Filter{})
	if err != nil {
		return nil, err
	}
	if db == nil {
		var out []State
		for _, d := range ds {
			if f.match(d) {
				out = append(out, State{ID: LetterID(nil, d), Message: d})
			}
		}
		return out, nil
	}
	recs, err := NewStore(db).All(ctx)
	if err != nil {
		return nil, err
	}
	states := match(ds, recs)
	held := map[int64]bool{}
	for _, st := range states {
		if st.Record != nil {
			held[st.Record.RowID] = true
		}
	}
	for _, r := range recs {
		if !held[r.RowID] && owns(k, r) {
			r := r
			states = append(states, State{Message: lostMessage(r), Status: StatusOpen, Record: &r})
		}
	}
	selected := states[:0]
	for _, st := range states {
		if f.match(st.Message) {
			selected = append(selected, st)
		}
	}
	if err := settleStates(ctx, db, dec, selected); err != nil {
		return nil, err
	}
	sort.SliceStable(selected, func(i, j int) bool { return selected[i].WrittenAt().Before(selected[j].WrittenAt()) })
	return selected, nil
}

// owns reports whether r is a dead letter of k's topics: written to
// k.DLQTopic when its row records where, else written for a message of
// k.Topic. Deployments with input and dead-letter topics of their own may
// share one database; another's dead letters are not this topic's lost
// ones. With no input topic named, every row is.
func owns(k kafkaops.Kafka, r Record) bool {
	if r.Position != nil {
		return r.Position.Topic == k.DLQTopic
	}
	return k.Topic == "" || r.SourceTopic == k.Topic
}

// ErrNeedsDatabase is wrapped by Find's error for a row id asked for
// without a database.
var ErrNeedsDatabase = errors.New("a dead letter's row id needs the database (PAYCB_DB_DSN)")

// Find returns the dead letter named by ref with its status: a row id's
// row and, while the topic holds it, its message (found by the position
// the row records, else by reading the topic); or the message at a p id's
// position, else the row that records that position. A dead letter the
// topic no longer holds has Message.BodyLost. db may be nil for a p id
// (the state then has no status); a row id without db is an error
// wrapping ErrNeedsDatabase. Naming no dead letter is an error wrapping
// ErrNoDeadLetter or ErrNotFound.
func Find(ctx context.Context, k kafkaops.Kafka, db *bun.DB, dec *channels.Decoder, ref LetterRef) (State, error) {
	if ref.At != nil {
		d, err := ReadAt(ctx, k, *ref.At)
		if err == nil {
			if db == nil {
				return State{ID: LetterID(nil, d), Message: d}, nil
			}
			states, err := States(ctx, db, dec, []Message{d})
			if err != nil {
				return State{}, err
			}
			return states[0], nil
		}
		if !errors.Is(err, ErrNoDeadLetter) || db == nil {
			return State{}, err
		}
		rec, found, rerr := NewStore(db).AtPosition(ctx, Position{Topic: k.DLQTopic, Partition: ref.At.Partition, Offset: ref.At.Offset})
		if rerr != nil {
			return State{}, rerr
		}
		if !found {
			return State{}, err
		}
		return stateOfRow(ctx, k, db, dec, rec)
	}
	if db == nil {
		return State{}, fmt.Errorf("dead letter %d: %w", ref.RowID, ErrNeedsDatabase)
	}
	rec, err := NewStore(db).ByRowID(ctx, ref.RowID)
	if err != nil {
		return State{}, err
	}
	return stateOfRow(ctx, k, db, dec, rec)
}

// stateOfRow is the state of rec's dead letter, with its message when the
// topic still holds it.
func stateOfRow(ctx context.Context, k kafkaops.Kafka, db *bun.DB, dec *channels.Decoder, rec Record) (State, error) {
	var msgs []Message
	if p := rec.Position; p != nil && p.Topic == k.DLQTopic {
		d, err := ReadAt(ctx, k, At{Partition: p.Partition, Offset: p.Offset})
		switch {
		case err == nil:
			msgs = []Message{d}
		case !errors.Is(err, ErrNoDeadLetter):
			return State{}, err
		}
	}
	st, ok := rowIn(msgs, rec)
	if !ok {
		all, err := ReadTopic(ctx, k, Filter{Kind: rec.Kind})
		if err != nil {
			return State{}, err
		}
		if st, ok = rowIn(all, rec); !ok {
			st = State{Message: lostMessage(rec), Status: StatusOpen, Record: &rec}
		}
	}
	out := []State{st}
	if err := settleStates(ctx, db, dec, out); err != nil {
		return State{}, err
	}
	return out[0], nil
}

// rowIn is the state of the message of ds that is rec's dead letter.
func rowIn(ds []Message, rec Record) (State, bool) {
	for _, st := range match(ds, []Record{rec}) {
		if st.Record != nil {
			return st, true
		}
	}
	return State{}, false
}

// CloseMessage records that by (the OS user@host) closed d with note (see
// Close).
func CloseMessage(ctx context.Context, db *bun.DB, dec *channels.Decoder, d Message, by, note string) (Record, bool, error) {
	states, err := States(ctx, db, nil, []Message{d})
	if err != nil {
		return Record{}, false, err
	}
	return Close(ctx, db, dec, states[0], by, note)
}

// Close records that by (the OS user@host) closed st's dead letter with
// note: its ss_dead_letter row gets closed_at, closed_by and close_note (a
// row is inserted first for a dead letter that has none, with the event
// fields dec decodes, dec may be nil, and the letter's position in the
// topic, so that its p id keeps naming it). A dead letter whose body the
// topic lost is closed from its row alike. It returns the record and false,
// changing nothing, when it was already closed. The error wraps
// ErrEmptyNote for a blank note.
func Close(ctx context.Context, db *bun.DB, dec *channels.Decoder, st State, by, note string) (Record, bool, error) {
	if strings.TrimSpace(note) == "" {
		return Record{}, false, ErrEmptyNote
	}
	d := st.Message
	store := NewStore(db)
	var r Record
	if st.Record != nil {
		r = *st.Record
	} else {
		r = recordOfMessage(d, dec)
		rec, err := store.NotePosition(ctx, r, Position{Topic: d.topic, Partition: d.Partition, Offset: d.Offset})
		if err != nil {
			return Record{}, false, fmt.Errorf("close dead letter %s: %w", st.ID, err)
		}
		r = rec
	}
	rec, changed, err := store.Close(ctx, r, by, note)
	if err != nil {
		return Record{}, false, fmt.Errorf("close dead letter %s: %w", st.ID, err)
	}
	return rec, changed, nil
}

// recordOfMessage is the record of a dead letter that has none, from its
// message (event fields as far as dec decodes them; dec may be nil).
func recordOfMessage(d Message, dec *channels.Decoder) Record {
	r := Record{ID: d.RecordID(), Error: d.Error, CreatedAt: d.Time, RedrivenFrom: headerOf(d.Headers, HeaderRedrivenFrom)}
	if dec != nil && !d.ValueOmitted {
		if res, err := dec.Decode(d.Value); err == nil || res.Event.TenantID > 0 {
			ev := res.Event
			r.TenantID, r.Key, r.Fingerprint, r.TradeNo = ev.TenantID, string(ev.Key), ev.Fingerprint, ev.TradeNo
			if ev.Channel.Valid() {
				r.Channel = string(ev.Channel)
			}
		}
	}
	return r
}

// NoteRedriven records, before ds are redriven, each one's position in the
// dead-letter topic in its ss_dead_letter row (inserting the row of one
// that has none, with the event fields dec decodes): a redrive that fails
// again then finds the dead letter it came from by its x-redriven-from and
// supersedes it (StatusRedriven) instead of adding a second open one.
func NoteRedriven(ctx context.Context, db *bun.DB, dec *channels.Decoder, ds []Message) error {
	states, err := States(ctx, db, nil, ds)
	if err != nil {
		return err
	}
	store := NewStore(db)
	for _, st := range states {
		d := st.Message
		r := recordOfMessage(d, dec)
		if st.Record != nil {
			r = *st.Record
		}
		if _, err := store.NotePosition(ctx, r, Position{Topic: d.topic, Partition: d.Partition, Offset: d.Offset}); err != nil {
			return fmt.Errorf("note the redrive of %s: %w", st.ID, err)
		}
	}
	return nil
}
