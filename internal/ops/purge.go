package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// DefaultReconcileWindow is added to the input topic's retention to form
// purge's floor: time to reconcile and investigate after the last message
// that could be replayed is gone.
const DefaultReconcileWindow = 7 * 24 * time.Hour

// ErrBelowFloor is returned, wrapped, when a purge asks for an age below
// the safety floor, or when the floor cannot be established (the input
// topic keeps messages forever).
var ErrBelowFloor = errors.New("purge age below the safety floor")

// PurgeOptions say what to purge.
type PurgeOptions struct {
	// OlderThan is the age past which SETTLED claims lose their stored
	// event and last error.
	OlderThan time.Duration
	// Retention is the input topic's retention.ms; RetentionForever when
	// the topic keeps messages forever (then nothing may be purged).
	Retention        time.Duration
	RetentionForever bool
	// ReconcileWindow is added to Retention to form the floor. Default
	// DefaultReconcileWindow.
	ReconcileWindow time.Duration
	// DryRun counts what would be cleared and changes nothing.
	DryRun bool
	// BatchSize bounds the rows one UPDATE touches. Default 1000.
	BatchSize int
	// SettledRetention is how long a published settled event stays in
	// the outbox (PAYCB_SETTLED_RETENTION): older ones are deleted, never
	// an unpublished one. Zero deletes none. The floor does not apply: a
	// published event is on its topic and needed only for republishing.
	SettledRetention time.Duration
	// Now is the reference time; default time.Now.
	Now func() time.Time
}

// PurgeResult is what Purge did (or, on a dry run, would do).
type PurgeResult struct {
	Floor  time.Duration
	Cutoff time.Time
	Rows   int64
	// SettledCutoff and SettledRows: the published settled events settled
	// before SettledCutoff, deleted (counted on a dry run); zero when
	// SettledRetention is.
	SettledCutoff time.Time
	SettledRows   int64
}

// Purge clears event_json and last_error of SETTLED claims created and
// settled before now − max(OlderThan, floor), floor being Retention +
// ReconcileWindow, then deletes the published settled events settled
// before now − SettledRetention. It never
// deletes a claim and never touches an ACQUIRED claim (its stored event is
// what settles it), an unpublished settled event or any other table. It
// refuses with ErrBelowFloor when OlderThan is below the floor or the topic keeps
// messages forever. Rows are updated in batches, each its own statement, so
// a purge can be interrupted and run again.
func Purge(ctx context.Context, db bun.IDB, o PurgeOptions) (PurgeResult, error) {
	window := o.ReconcileWindow
	if window <= 0 {
		window = DefaultReconcileWindow
	}
	if o.RetentionForever {
		return PurgeResult{}, fmt.Errorf("%w: the input topic keeps messages forever (retention.ms=-1), so any claim's message may be replayed", ErrBelowFloor)
	}
	res := PurgeResult{Floor: o.Retention + window}
	if o.OlderThan < res.Floor {
		return res, fmt.Errorf("%w: --older-than %s is below %s (topic retention %s + reconciliation window %s)",
			ErrBelowFloor, o.OlderThan, res.Floor, o.Retention, window)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	res.Cutoff = now().UTC().Add(-o.OlderThan)
	rows, err := purgeClaims(ctx, db, res.Cutoff, o)
	res.Rows = rows
	if err != nil || o.SettledRetention <= 0 {
		return res, err
	}
	res.SettledCutoff = now().UTC().Add(-o.SettledRetention)
	res.SettledRows, err = purgeSettled(ctx, db, res.SettledCutoff, o)
	return res, err
}

// purgeSettled deletes the published settled events settled before
// cutoff (on a dry run, counts them). An unpublished row is never deleted,
// however old: it is an event downstream has not had yet.
func purgeSettled(ctx context.Context, db bun.IDB, cutoff time.Time, o PurgeOptions) (int64, error) {
	const where = `published = 1 AND settled_at < ?`
	if o.DryRun {
		var n int64
		if err := db.NewRaw(`SELECT COUNT(*) FROM ss_settled_outbox WHERE `+where, cutoff).Scan(ctx, &n); err != nil {
			return 0, fmt.Errorf("count purgeable settled events: %w", err)
		}
		return n, nil
	}
	return inBatches(ctx, db, "purge settled events", `DELETE FROM ss_settled_outbox WHERE `+where+` LIMIT ?`, purgeBatch(o), cutoff)
}

// inBatches runs query, whose last placeholder is the LIMIT, with args
// and batch until it touches fewer than batch rows (each its own
// statement, so an interrupted purge can run again), and returns the rows
// touched.
func inBatches(ctx context.Context, db bun.IDB, what, query string, batch int, args ...any) (int64, error) {
	args = append(args, batch)
	var total int64
	for {
		r, err := db.NewRaw(query, args...).Exec(ctx)
		if err != nil {
			return total, fmt.Errorf("%s after %d rows: %w", what, total, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("%s: rows affected: %w", what, err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// purgeClaims clears the claims of Purge settled before cutoff.
func purgeClaims(ctx context.Context, db bun.IDB, cutoff time.Time, o PurgeOptions) (int64, error) {
	const where = `status = 'SETTLED' AND created_at < ? AND settled_at < ? AND (event_json IS NOT NULL OR last_error IS NOT NULL)`
	if o.DryRun {
		var n int64
		if err := db.NewRaw(`SELECT COUNT(*) FROM ss_channel_idempotent WHERE `+where, cutoff, cutoff).Scan(ctx, &n); err != nil {
			return 0, fmt.Errorf("count purgeable claims: %w", err)
		}
		return n, nil
	}
	return inBatches(ctx, db, "purge claims",
		`UPDATE ss_channel_idempotent SET event_json = NULL, last_error = NULL WHERE `+where+` LIMIT ?`,
		purgeBatch(o), cutoff, cutoff)
}

// purgeBatch is o.BatchSize, 1000 when unset.
func purgeBatch(o PurgeOptions) int {
	if o.BatchSize <= 0 {
		return 1000
	}
	return o.BatchSize
}
