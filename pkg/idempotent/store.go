package idempotent

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paycallback/paycallback/pkg/textcut"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// Store is the claim store. It holds the connection pool, not a transaction:
// Acquire commits the claim on its own, so no caller can pass it a
// transaction that might roll back. Safe for concurrent use.
//
// On MySQL/MariaDB the pool must count changed rows, not found ones
// (go-sql-driver/mysql's clientFoundRows off, its default, which
// internal/sqldb enforces): AcquireMany reads "inserted" from the
// affected-row count of its upsert.
type Store struct {
	db  *bun.DB
	now func() time.Time

	maxStatementMu sync.Mutex
	maxStatement   int // bytes; 0 until read from the server
}

// Option configures a Store.
type Option func(*Store)

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// NewStore returns a claim store on the pool db.
func NewStore(db *bun.DB, opts ...Option) *Store {
	s := &Store{db: db, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// MaxStatementCap caps MaxStatementBytes: statements stay far below the
// servers' largest packets (and go-sql-driver/mysql's 64 MiB default).
const MaxStatementCap = 16 << 20

// MaxStatementBytes is the size of the largest statement the server
// accepts: MySQL's max_allowed_packet, read once from the server, less 4
// KiB for the protocol's own bytes, at most MaxStatementCap; SQLite's is
// MaxStatementCap. Callers bound their batches by it so that no statement
// is refused for its size. An error means the server could not be asked;
// nothing is cached then.
func (s *Store) MaxStatementBytes(ctx context.Context) (int, error) {
	s.maxStatementMu.Lock()
	defer s.maxStatementMu.Unlock()
	if s.maxStatement > 0 {
		return s.maxStatement, nil
	}
	n := MaxStatementCap
	if s.db.Dialect().Name() != dialect.SQLite {
		var packet int64
		if err := s.db.QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&packet); err != nil {
			return 0, fmt.Errorf("read max_allowed_packet: %w", err)
		}
		n = int(min(max(packet-4096, 1024), MaxStatementCap))
	}
	s.maxStatement = n
	return n, nil
}

// Now is the store's clock, in UTC at microsecond precision (what the
// columns keep).
func (s *Store) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// ErrNotFound is returned when no claim exists for a key.
var ErrNotFound = errors.New("claim not found")

// ErrFenceLost is returned by Settle when the claim is no longer ACQUIRED:
// another settler won. For the caller it is a final, successful outcome: roll
// back the business writes and move on; never retry.
var ErrFenceLost = errors.New("settle fence lost: claim already settled")

// claimRow maps ss_channel_idempotent.
type claimRow struct {
	bun.BaseModel `bun:"table:ss_channel_idempotent"`

	ID              int64      `bun:"id,pk,autoincrement"`
	TenantID        int64      `bun:"tenant_id"`
	IdempotentKey   string     `bun:"idempotent_key"`
	EventType       string     `bun:"event_type"`
	Status          string     `bun:"status"`
	SettleOutcome   *string    `bun:"settle_outcome"`
	Fingerprint     string     `bun:"fingerprint"`
	EventJSON       *string    `bun:"event_json"`
	SourceTopic     string     `bun:"source_topic"`
	SourcePartition int        `bun:"source_partition"`
	SourceOffset    int64      `bun:"source_offset"`
	Attempts        int        `bun:"attempts"`
	LastError       *string    `bun:"last_error"`
	DeadLetteredAt  *time.Time `bun:"dead_lettered_at"`
	OccurredAt      *time.Time `bun:"occurred_at"`
	CreatedAt       time.Time  `bun:"created_at"`
	SettledAt       *time.Time `bun:"settled_at"`
}

func (r *claimRow) record() Record {
	rec := Record{
		ID:             r.ID,
		TenantID:       r.TenantID,
		Key:            Key(r.IdempotentKey),
		EventType:      EventType(r.EventType),
		Status:         Status(r.Status),
		Fingerprint:    r.Fingerprint,
		Source:         Source{Topic: r.SourceTopic, Partition: r.SourcePartition, Offset: r.SourceOffset},
		Attempts:       r.Attempts,
		DeadLetteredAt: utcPtr(r.DeadLetteredAt),
		CreatedAt:      r.CreatedAt.UTC(),
		SettledAt:      utcPtr(r.SettledAt),
	}
	if r.SettleOutcome != nil {
		rec.Outcome = Outcome(*r.SettleOutcome)
	}
	if r.EventJSON != nil {
		rec.Event = []byte(*r.EventJSON)
	}
	if r.LastError != nil {
		rec.LastError = *r.LastError
	}
	return rec
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Acquire claims c.Key for c.TenantID: AcquireMany with one claim, whose
// contract it has.
func (s *Store) Acquire(ctx context.Context, c Claim) (Result, error) {
	res, err := s.AcquireMany(ctx, []Claim{c})
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

// Get reads the claim for (tenantID, key) from the pool, as a statement of
// its own, so it sees the latest committed row. It returns ErrNotFound when
// there is none.
func (s *Store) Get(ctx context.Context, tenantID int64, key Key) (Record, error) {
	return get(ctx, s.db, tenantID, key, false)
}

func get(ctx context.Context, db bun.IDB, tenantID int64, key Key, forUpdate bool) (Record, error) {
	var row claimRow
	q := db.NewSelect().Model(&row).
		Where("tenant_id = ?", tenantID).
		Where("idempotent_key = ?", string(key))
	if forUpdate && db.Dialect().Name() != dialect.SQLite {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Record{}, fmt.Errorf("claim %d/%s: %w", tenantID, key, ErrNotFound)
		}
		return Record{}, fmt.Errorf("read claim %d/%s: %w", tenantID, key, err)
	}
	return row.record(), nil
}

// Settle is the fence for one claim: SettleMany with one key, whose
// contract it has.
func (s *Store) Settle(ctx context.Context, tx bun.Tx, tenantID int64, key Key, outcome Outcome) error {
	return s.SettleMany(ctx, tx, map[TenantKey]Settlement{{TenantID: tenantID, Key: key}: {Outcome: outcome}})
}

// maxLastError bounds the stored last error (the column is VARCHAR(1024)).
const maxLastError = 1000

// RecordFailure counts a failed attempt to settle the claim and keeps the
// error's text for operators. It runs on the pool as a statement of its own
// and never changes the claim's status.
func (s *Store) RecordFailure(ctx context.Context, tenantID int64, key Key, cause error) error {
	msg := textcut.Truncate(cause.Error(), maxLastError)
	_, err := s.db.NewUpdate().Table("ss_channel_idempotent").
		Set("attempts = attempts + 1").
		Set("last_error = ?", msg).
		Where("tenant_id = ?", tenantID).
		Where("idempotent_key = ?", string(key)).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("record failure of %s: %w", key, err)
	}
	return nil
}

// MarkDeadLettered records that the claim's message was written to the
// dead-letter topic (an OVER_REFUND settlement), so a later duplicate knows
// whether it still has to write it. Marking twice keeps the first time.
func (s *Store) MarkDeadLettered(ctx context.Context, tenantID int64, key Key) error {
	_, err := s.db.NewUpdate().Table("ss_channel_idempotent").
		Set("dead_lettered_at = ?", s.Now()).
		Where("tenant_id = ?", tenantID).
		Where("idempotent_key = ?", string(key)).
		Where("dead_lettered_at IS NULL").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("mark %s dead-lettered: %w", key, err)
	}
	return nil
}

// OrphanCursor pages through orphans: pass the zero value for the first page
// and the Next of the previous page after that.
type OrphanCursor struct {
	CreatedAt time.Time
	ID        int64
}

// Orphans lists claims still ACQUIRED that were made before olderThan,
// oldest first, at most limit of them, after cursor. The returned cursor is
// the one for the next page; it is the zero value when this page was the
// last. The (status, created_at) index makes the query cheap.
func (s *Store) Orphans(ctx context.Context, olderThan time.Time, after OrphanCursor, limit int) ([]Record, OrphanCursor, error) {
	if limit <= 0 {
		limit = 100
	}
	var rows []claimRow
	q := s.db.NewSelect().Model(&rows).
		Where("status = ?", string(StatusAcquired)).
		Where("created_at < ?", olderThan.UTC()).
		OrderExpr("created_at ASC, id ASC").
		Limit(int64(limit))
	if after.ID != 0 {
		q = q.Where("(created_at > ? OR (created_at = ? AND id > ?))", after.CreatedAt.UTC(), after.CreatedAt.UTC(), after.ID)
	}
	if err := q.Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, OrphanCursor{}, fmt.Errorf("list orphan claims: %w", err)
	}
	out := make([]Record, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	var next OrphanCursor
	if len(rows) == limit {
		last := out[len(out)-1]
		next = OrphanCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return out, next, nil
}

// CountOrphans counts claims still ACQUIRED that were made before olderThan.
func (s *Store) CountOrphans(ctx context.Context, olderThan time.Time) (int, error) {
	n, err := s.db.NewSelect().Table("ss_channel_idempotent").
		Where("status = ?", string(StatusAcquired)).
		Where("created_at < ?", olderThan.UTC()).
		Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count orphan claims: %w", err)
	}
	return int(n), nil
}
