package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// OrphanSettler settles a claim from its stored canonical event through
// the settle fence; *settlement.Service is the implementation.
type OrphanSettler interface {
	SettleStored(ctx context.Context, rec idempotent.Record) (settlement.Result, error)
}

// Orphan is a claim still ACQUIRED past the threshold, as listed for
// operators.
type Orphan struct {
	Record idempotent.Record
	// Age is how long ago the claim was made.
	Age time.Duration
	// Settled is filled by SettleOrphans: what settling did.
	Settled *settlement.Result
	// Err is filled by SettleOrphans when settling failed.
	Err error
}

// orphanPage is how many orphans are read per query.
const orphanPage = 200

// ListOrphans returns every claim still ACQUIRED that was made more than
// olderThan ago, oldest first, with its age. Errors are database errors.
func ListOrphans(ctx context.Context, claims *idempotent.Store, olderThan time.Duration) ([]Orphan, error) {
	now := claims.Now()
	cutoff := now.Add(-olderThan)
	var out []Orphan
	var cur idempotent.OrphanCursor
	for {
		recs, next, err := claims.Orphans(ctx, cutoff, cur, orphanPage)
		if err != nil {
			return out, fmt.Errorf("list orphans: %w", err)
		}
		for _, r := range recs {
			out = append(out, Orphan{Record: r, Age: r.Age(now)})
		}
		if next == (idempotent.OrphanCursor{}) {
			return out, nil
		}
		cur = next
	}
}

// SettleOrphans settles each orphan through the fence from its stored event
// and records the result (or error) on it. A claim another settler won
// meanwhile is a FenceLost result, not an error. It returns how many failed;
// the others were all tried.
func SettleOrphans(ctx context.Context, s OrphanSettler, orphans []Orphan) (failed int) {
	for i := range orphans {
		o := &orphans[i]
		res, err := s.SettleStored(ctx, o.Record)
		if err != nil {
			o.Err = fmt.Errorf("settle %s: %w", o.Record.Key, err)
			failed++
			continue
		}
		o.Settled = &res
	}
	return failed
}
