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
	// Now is the reference time; default time.Now.
	Now func() time.Time
}

// PurgeResult is what Purge did (or, on a dry run, would do).
type PurgeResult struct {
	Floor  time.Duration
	Cutoff time.Time
	Rows   int64
}

// Purge clears event_json and last_error of SETTLED claims created and
// settled before now − max(OlderThan, floor), floor being Retention +
// ReconcileWindow. It never deletes a row and never touches an ACQUIRED
// claim (its stored event is what settles it) or any other table. It refuses
// with ErrBelowFloor when OlderThan is below the floor or the topic keeps
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
	const where = `status = 'SETTLED' AND created_at < ? AND settled_at < ? AND (event_json IS NOT NULL OR last_error IS NOT NULL)`
	if o.DryRun {
		var n int64
		if err := db.NewRaw(`SELECT COUNT(*) FROM ss_channel_idempotent WHERE `+where, res.Cutoff, res.Cutoff).Scan(ctx, &n); err != nil {
			return res, fmt.Errorf("count purgeable claims: %w", err)
		}
		res.Rows = n
		return res, nil
	}
	batch := o.BatchSize
	if batch <= 0 {
		batch = 1000
	}
	for {
		r, err := db.NewRaw(`UPDATE ss_channel_idempotent SET event_json = NULL, last_error = NULL WHERE `+where+` LIMIT ?`,
			res.Cutoff, res.Cutoff, batch).Exec(ctx)
		if err != nil {
			return res, fmt.Errorf("purge claims after %d rows: %w", res.Rows, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return res, fmt.Errorf("purge claims: rows affected: %w", err)
		}
		res.Rows += n
		if n < int64(batch) {
			return res, nil
		}
	}
}
