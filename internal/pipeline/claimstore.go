package pipeline

import (
	"context"
	"time"

	"github.com/paycallback/paycallback/pkg/idempotent"
)

// ClaimStore is what the pipeline uses of the claim store
// (ss_channel_idempotent), whose unique index alone decides "already
// handled"; *idempotent.Store is the implementation.
type ClaimStore interface {
	// MaxStatementBytes is the largest statement the server accepts, which
	// bounds a run of money events (see Pipeline.Handle).
	MaxStatementBytes(ctx context.Context) (int, error)
	// LookupMany reads the claims of keys with one statement; a key not
	// claimed is absent from the map.
	LookupMany(ctx context.Context, keys []idempotent.TenantKey) (map[idempotent.TenantKey]idempotent.Record, error)
	// AcquireMany claims with one insert, committed before any business
	// work, which the unique index decides row by row; results[n] is
	// claims[n]'s. Only a duplicate key makes a result not Acquired; any
	// error means nothing is known (the insert may have committed).
	AcquireMany(ctx context.Context, claims []idempotent.Claim) ([]idempotent.Result, error)
	// Get reads one claim, its stored event included.
	Get(ctx context.Context, tenantID int64, key idempotent.Key) (idempotent.Record, error)
	// RecordFailure keeps a settle error on the claim for operators.
	RecordFailure(ctx context.Context, tenantID int64, key idempotent.Key, cause error) error
	// MarkDeadLettered records that the claim's over-refund dead letter
	// was written.
	MarkDeadLettered(ctx context.Context, tenantID int64, key idempotent.Key) error
}

// OrphanStore is what the Sweeper uses of the claim store: the claims
// left ACQUIRED and the mark of a dead letter written; *idempotent.Store is
// the implementation.
type OrphanStore interface {
	// Now is the store's clock, against which claims' ages are measured.
	Now() time.Time
	// Orphans returns a page of at most limit claims still ACQUIRED that
	// were made before olderThan, oldest first, after the cursor, and the
	// cursor of the next page (the zero cursor after the last).
	Orphans(ctx context.Context, olderThan time.Time, after idempotent.OrphanCursor, limit int) ([]idempotent.Record, idempotent.OrphanCursor, error)
	// CountOrphans counts the claims ACQUIRED before olderThan.
	CountOrphans(ctx context.Context, olderThan time.Time) (int, error)
	// MarkDeadLettered records that the claim's over-refund dead letter
	// was written.
	MarkDeadLettered(ctx context.Context, tenantID int64, key idempotent.Key) error
}

var (
	_ ClaimStore  = (*idempotent.Store)(nil)
	_ OrphanStore = (*idempotent.Store)(nil)
)
