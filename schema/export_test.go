package schema

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// LockForTest claims the migration lock on db with the given claim
// lifetime and renewal interval, and returns the context that ends when the
// claim is lost and the release. The timing is restored at cleanup time by
// the function returned last.
func LockForTest(ctx context.Context, db *bun.DB, ttl, renew time.Duration) (context.Context, func(context.Context) error, func(), error) {
	oldTTL, oldRenew := lockTTL, lockRenew
	lockTTL, lockRenew = ttl, renew
	restore := func() { lockTTL, lockRenew = oldTTL, oldRenew }
	lctx, l, err := lockMigrations(ctx, db, db)
	if err != nil {
		return nil, nil, restore, err
	}
	return lctx, l.release, restore, nil
}
