package deadletters

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/textcut"
)

// Hash is the SHA-256 of an input message's key and value: the digest of
// the key's length (8 bytes, big-endian), the key, then the value, so that
// no two different (key, value) pairs share their input.
func Hash(key, value []byte) [32]byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	_, _ = h.Write(n[:])
	_, _ = h.Write(key)
	_, _ = h.Write(value)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// ID names one dead letter: the input message it was written for (its
// coordinates and Hash of its key and value) and its kind; the table's
// unique key.
type ID struct {
	SourceTopic     string
	SourcePartition int
	SourceOffset    int64
	MessageHash     [32]byte
	Kind            string
}

// NewID is the ID of the dead letter of kind for the input message at
// topic/partition@offset with key and value.
func NewID(topic string, partition int, offset int64, key, value []byte, kind string) ID {
	return ID{SourceTopic: topic, SourcePartition: partition, SourceOffset: offset, MessageHash: Hash(key, value), Kind: kind}
}

// String formats the ID as kind topic/partition@offset.
func (id ID) String() string {
	return fmt.Sprintf("%s %s/%d@%d", id.Kind, id.SourceTopic, id.SourcePartition, id.SourceOffset)
}

// Record is one row of ss_dead_letter. The event fields (TenantID, Key,
// Fingerprint, Channel, TradeNo) are empty (zero) when the message did not
// decode that far.
type Record struct {
	ID
	TenantID    int64
	Key         string
	Fingerprint string
	Channel     string
	TradeNo     string
	// Error is the x-error written, at most 1024 bytes.
	Error     string
	CreatedAt time.Time
	// ClosedAt, ClosedBy and CloseNote are set by Close; ClosedAt is nil
	// while the dead letter is not closed.
	ClosedAt  *time.Time
	ClosedBy  string
	CloseNote string
	// RowID is the row's id (the dead letter's stable id); 0 for a record
	// not read from the table.
	RowID int64
	// Position is where the dead letter is in the dead-letter topic, when
	// the row records it (an operator closed or redrove it); nil when not
	// known.
	Position *Position
	// RedrivenFrom is the x-redriven-from header of the message this dead
	// letter was written for (<dlq topic>/<partition>@<offset> of the dead
	// letter whose redrive failed again); empty when it was no redrive.
	RedrivenFrom string
	// RedrivenFromID is the row of the dead letter whose redrive failed
	// again into this one (0: none known). Record works it out from
	// RedrivenFrom; a dead letter has at most one such successor.
	RedrivenFromID int64
}

// Position is a place in a topic.
type Position struct {
	Topic     string
	Partition int
	Offset    int64
}

// String formats p as topic/partition@offset (the x-redriven-from form).
func (p Position) String() string {
	return p.Topic + "/" + strconv.Itoa(p.Partition) + "@" + strconv.FormatInt(p.Offset, 10)
}

// ParsePosition parses topic/partition@offset, the x-redriven-from form.
func ParsePosition(s string) (Position, bool) {
	slash := strings.LastIndexByte(s, '/')
	if slash <= 0 {
		return Position{}, false
	}
	ps, os, ok := strings.Cut(s[slash+1:], "@")
	if !ok {
		return Position{}, false
	}
	p, err1 := strconv.Atoi(ps)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return Position{}, false
	}
	return Position{Topic: s[:slash], Partition: p, Offset: o}, true
}

// Closed reports whether an operator closed the dead letter.
func (r Record) Closed() bool { return r.ClosedAt != nil }

// ErrNotFound is returned (wrapped) when no record matches.
var ErrNotFound = errors.New("dead letter not recorded")

// maxText bounds the error and the close note (VARCHAR(1024)); maxBy
// bounds closed_by (VARCHAR(255)).
const (
	maxText = 1024
	maxBy   = 255
	// maxFrom bounds redriven_from (VARCHAR(512)).
	maxFrom = 512
	// maxLinkAttempts bounds how often Record links again after a
	// concurrent record took the successor place it meant to take.
	maxLinkAttempts = 20
)

// Store reads and writes ss_dead_letter. It is safe for concurrent use.
type Store struct {
	db  bun.IDB
	now func() time.Time
}

// NewStore returns a store on db (MySQL/MariaDB or SQLite, migrated to
// 0003 or later).
func NewStore(db bun.IDB) *Store { return &Store{db: db, now: time.Now} }

// WithClock returns a copy of s whose times come from now, for tests.
func (s *Store) WithClock(now func() time.Time) *Store { c := *s; c.now = now; return &c }

func (s *Store) timeNow() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// row is the table's shape for bun.
type row struct {
	bun.BaseModel `bun:"table:ss_dead_letter"`

	ID              int64      `bun:"id,pk,autoincrement"`
	SourceTopic     string     `bun:"source_topic"`
	SourcePartition int        `bun:"source_partition"`
	SourceOffset    int64      `bun:"source_offset"`
	MessageHash     []byte     `bun:"message_hash"`
	Kind            string     `bun:"kind"`
	TenantID        *int64     `bun:"tenant_id"`
	IdempotentKey   *string    `bun:"idempotent_key"`
	Fingerprint     *string    `bun:"fingerprint"`
	ChannelCode     *string    `bun:"channel_code"`
	ChannelTradeNo  *string    `bun:"channel_trade_no"`
	Error           string     `bun:"error"`
	CreatedAt       time.Time  `bun:"created_at"`
	ClosedAt        *time.Time `bun:"closed_at"`
	ClosedBy        *string    `bun:"closed_by"`
	CloseNote       *string    `bun:"close_note"`
	DLQTopic        *string    `bun:"dlq_topic"`
	DLQPartition    *int       `bun:"dlq_partition"`
	DLQOffset       *int64     `bun:"dlq_offset"`
	RedrivenFrom    *string    `bun:"redriven_from"`
	RedrivenFromID  *int64     `bun:"redriven_from_id"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func value(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (r *row) record() Record {
	out := Record{
		ID:  ID{SourceTopic: r.SourceTopic, SourcePartition: r.SourcePartition, SourceOffset: r.SourceOffset, Kind: r.Kind},
		Key: value(r.IdempotentKey), Fingerprint: value(r.Fingerprint),
		Channel: value(r.ChannelCode), TradeNo: value(r.ChannelTradeNo),
		Error: r.Error, CreatedAt: r.CreatedAt.UTC(),
		ClosedBy: value(r.ClosedBy), CloseNote: value(r.CloseNote),
		RowID: r.ID, RedrivenFrom: value(r.RedrivenFrom),
	}
	if r.RedrivenFromID != nil {
		out.RedrivenFromID = *r.RedrivenFromID
	}
	if r.DLQTopic != nil && r.DLQPartition != nil && r.DLQOffset != nil {
		out.Position = &Position{Topic: *r.DLQTopic, Partition: *r.DLQPartition, Offset: *r.DLQOffset}
	}
	copy(out.MessageHash[:], r.MessageHash)
	if r.TenantID != nil {
		out.TenantID = *r.TenantID
	}
	if r.ClosedAt != nil {
		t := r.ClosedAt.UTC()
		out.ClosedAt = &t
	}
	return out
}

// whereID restricts q to id's row.
func whereID[Q interface {
	Where(string, ...any) Q
}](q Q, id ID) Q {
	return q.Where("source_topic = ?", id.SourceTopic).
		Where("source_partition = ?", id.SourcePartition).
		Where("source_offset = ?", id.SourceOffset).
		Where("message_hash = ?", id.MessageHash[:]).
		Where("kind = ?", id.Kind)
}

// Recorded reports whether the dead letter id was recorded: written and
// acknowledged before, so it must not be written again.
func (s *Store) Recorded(ctx context.Context, id ID) (bool, error) {
	n, err := whereID(s.db.NewSelect().Table("ss_dead_letter"), id).Count(ctx)
	if err != nil {
		return false, fmt.Errorf("look up dead letter %s: %w", id, err)
	}
	return n > 0, nil
}

// Record inserts r (CreatedAt defaults to now; RowID, Position, ClosedAt
// and the rest of the closing are ignored). A record already there for
// r.ID is success: the dead letter is recorded either way. For a dead
// letter of a redriven message (r.RedrivenFrom set) the row is linked to
// the dead letter whose redrive failed again (see Origin), or to that
// one's latest successor, so that every dead letter has at most one
// successor and an original message at most one letter not superseded.
// Any other error is returned.
func (s *Store) Record(ctx context.Context, r Record) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.timeNow()
	}
	rw := &row{
		SourceTopic: r.SourceTopic, SourcePartition: r.SourcePartition, SourceOffset: r.SourceOffset,
		MessageHash: r.MessageHash[:], Kind: r.Kind,
		IdempotentKey: optional(r.Key), Fingerprint: optional(r.Fingerprint),
		ChannelCode: optional(r.Channel), ChannelTradeNo: optional(r.TradeNo),
		Error: textcut.Truncate(r.Error, maxText), CreatedAt: r.CreatedAt.UTC(),
		RedrivenFrom: optional(textcut.Truncate(r.RedrivenFrom, maxFrom)),
	}
	if r.TenantID > 0 {
		rw.TenantID = &r.TenantID
	}
	for attempt := 0; ; attempt++ {
		if r.RedrivenFrom != "" {
			tail, ok, err := s.linkTarget(ctx, r)
			if err != nil {
				return fmt.Errorf("record dead letter %s: %w", r.ID, err)
			}
			rw.RedrivenFromID = nil
			if ok {
				rw.RedrivenFromID = &tail
			}
		}
		_, err := s.db.NewInsert().Model(rw).
			ExcludeColumn("id", "closed_at", "closed_by", "close_note", "dlq_topic", "dlq_partition", "dlq_offset").Exec(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey) {
			return fmt.Errorf("record dead letter %s: %w", r.ID, err)
		}
		// Either this dead letter is recorded already, or another one
		// just became the successor this one was to be linked to: link
		// to that one instead.
		done, rerr := s.Recorded(ctx, r.ID)
		if rerr != nil {
			return rerr
		}
		if done || rw.RedrivenFromID == nil || attempt >= maxLinkAttempts {
			if !done {
				return fmt.Errorf("record dead letter %s: its original keeps gaining successors: %w", r.ID, err)
			}
			return nil
		}
	}
}

// Get returns the record of id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id ID) (Record, error) {
	var rw row
	if err := whereID(s.db.NewSelect().Model(&rw), id).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Record{}, fmt.Errorf("dead letter %s: %w", id, ErrNotFound)
		}
		return Record{}, fmt.Errorf("read dead letter %s: %w", id, err)
	}
	return rw.record(), nil
}

// Source is an input message's coordinates.
type Source struct {
	Topic     string
	Partition int
	Offset    int64
}

// sourcesPerQuery bounds the coordinates one query of ForSources matches.
const sourcesPerQuery = 200

// ForSources returns every record written for a message at one of srcs,
// whatever its hash and kind, in no particular order.
func (s *Store) ForSources(ctx context.Context, srcs []Source) ([]Record, error) {
	var out []Record
	for start := 0; start < len(srcs); start += sourcesPerQuery {
		chunk := srcs[start:min(start+sourcesPerQuery, len(srcs))]
		var rows []row
		q := s.db.NewSelect().Model(&rows).WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			for _, src := range chunk {
				q = q.WhereOr("(source_topic = ? AND source_partition = ? AND source_offset = ?)", src.Topic, src.Partition, src.Offset)
			}
			return q
		})
		if err := q.Scan(ctx); err != nil {
			return nil, fmt.Errorf("read dead letter records: %w", err)
		}
		for i := range rows {
			out = append(out, rows[i].record())
		}
	}
	return out, nil
}

// ErrEmptyNote is returned by Close for a note that is empty or blank.
var ErrEmptyNote = errors.New("a closing note is required")

// Close records that by closed the dead letter of r.ID with note, now. The
// record is inserted first (from r) when there is none, for a dead letter
// written before the table existed. It returns false, changing nothing,
// when the dead letter was already closed, and the record as it is after
// the call.
func (s *Store) Close(ctx context.Context, r Record, by, note string) (Record, bool, error) {
	if strings.TrimSpace(note) == "" {
		return Record{}, false, ErrEmptyNote
	}
	if err := s.Record(ctx, r); err != nil {
		return Record{}, false, err
	}
	now := s.timeNow()
	res, err := whereID(s.db.NewUpdate().Table("ss_dead_letter"), r.ID).
		Set("closed_at = ?", now).
		Set("closed_by = ?", textcut.Truncate(by, maxBy)).
		Set("close_note = ?", textcut.Truncate(note, maxText)).
		Where("closed_at IS NULL").
		Exec(ctx)
	if err != nil {
		return Record{}, false, fmt.Errorf("close dead letter %s: %w", r.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Record{}, false, fmt.Errorf("close dead letter %s: %w", r.ID, err)
	}
	cur, err := s.Get(ctx, r.ID)
	if err != nil {
		return Record{}, false, err
	}
	return cur, n > 0, nil
}

// Open returns the open dead letters of kind read from topic (rows not
// closed and not superseded by the dead letter of their redrive) whose
// channel is one of chans, by row id after afterID, at most limit.
func (s *Store) Open(ctx context.Context, topic, kind string, chans []string, afterID int64, limit int) ([]Record, error) {
	if len(chans) == 0 {
		return nil, nil
	}
	var rows []row
	err := s.db.NewSelect().Model(&rows).
		Where("source_topic = ?", topic).Where("kind = ?", kind).Where("channel_code IN (?)", bun.List(chans)).
		Where("closed_at IS NULL").Where("id > ?", afterID).
		Where("id NOT IN (SELECT redriven_from_id FROM ss_dead_letter WHERE redriven_from_id IS NOT NULL)").
		OrderExpr("id").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("read open %s dead letters of %s: %w", kind, topic, err)
	}
	out := make([]Record, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out, nil
}
