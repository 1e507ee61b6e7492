package querybudget

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/pkg/dberr"
)

// Merchant names one bucket: the merchant a query is sent for, as the
// merchant binding names it, of one tenant and channel.
type Merchant struct {
	TenantID   int64
	Channel    string
	MerchantID string
}

// String returns tenant/channel/merchant, for logs.
func (m Merchant) String() string {
	return fmt.Sprintf("%d/%s/%s", m.TenantID, m.Channel, m.MerchantID)
}

// maxAttempts bounds the runs of one transaction that lost to a concurrent
// one (a deadlock, a certification failure, the row's concurrent first
// insert).
const maxAttempts = 10

// retryPause is the longest pause before a transaction runs again after
// losing; each pause is drawn at random up to it, doubling per attempt
// from a millisecond, so contenders that collided do not collide again in
// step.
const retryPause = 64 * time.Millisecond

// Store is the shared budget of every merchant. It is safe for concurrent
// use, and any number of Stores (one per querier) may share one database.
type Store struct {
	db     *bun.DB
	budget queryplan.Budget
	// clock is the time of the bucket: the database's on the MySQL
	// family, the process's on SQLite (one process owns the file).
	clock func(ctx context.Context, tx bun.IDB) (time.Time, error)

	// engineMu guards engineKnown and tidb, learnt from the server on the
	// first update (a failed question is asked again: never a guess).
	engineMu    sync.Mutex
	engineKnown bool
	// tidb: the server is TiDB, whose optimistic mode takes no lock for
	// SELECT … FOR UPDATE and fails the loser of a race for the bucket row
	// at COMMIT; every querier takes from the same row, so there the
	// transaction is begun BEGIN PESSIMISTIC, which locks as InnoDB does
	// whatever the cluster's mode.
	tidb bool
}

// New returns the budget store of db with budget b. It fails when b does
// not validate.
func New(db *bun.DB, b queryplan.Budget) (*Store, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, budget: b, clock: databaseClock}
	if db.Dialect().Name() == dialect.SQLite {
		s.clock = func(context.Context, bun.IDB) (time.Time, error) { return time.Now().UTC(), nil }
		s.engineKnown = true
	}
	return s, nil
}

func databaseClock(ctx context.Context, tx bun.IDB) (time.Time, error) {
	var now time.Time
	if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return now.UTC(), nil
}

// Take spends one of m's tokens. It returns true and the time of the
// spend when a query may be sent now; otherwise false and the earliest
// time worth trying again (a token's refill or the back-off's end). An
// error means no query may be sent.
func (s *Store) Take(ctx context.Context, m Merchant) (ok bool, at time.Time, err error) {
	err = s.update(ctx, m, func(st queryplan.BucketState, now time.Time) (queryplan.BucketState, bool) {
		var next queryplan.BucketState
		next, ok, at = s.budget.Take(st, now)
		return next, ok
	})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("take a query token of %s: %w", m, err)
	}
	return ok, at, nil
}

// Throttled records that a channel answered a query for m with a rate
// limit: m is not asked, by any querier, until the returned time.
func (s *Store) Throttled(ctx context.Context, m Merchant) (until time.Time, err error) {
	err = s.update(ctx, m, func(st queryplan.BucketState, now time.Time) (queryplan.BucketState, bool) {
		next := s.budget.Throttled(st, now)
		until = next.BackoffUntil
		return next, true
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("back off %s: %w", m, err)
	}
	return until, nil
}

// update runs change on m's bucket in one transaction, writing the state
// it returns when it says so (a Take refused writes nothing). A
// transaction that lost to a concurrent one runs again on the committed
// state.
func (s *Store) update(ctx context.Context, m Merchant, change func(queryplan.BucketState, time.Time) (queryplan.BucketState, bool)) error {
	tidb, err := s.onTiDB(ctx)
	if err != nil {
		return err
	}
	for attempt := range maxAttempts {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return err
			}
		}
		if tidb {
			err = s.runPessimistic(ctx, func(ctx context.Context, tx bun.IDB) error {
				return s.updateOnce(ctx, tx, m, change)
			})
		} else {
			err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				return s.updateOnce(ctx, tx, m, change)
			})
		}
		if err == nil || (!dberr.IsRetryableConflict(err) && !errors.Is(err, dberr.ErrDuplicateKey)) {
			return err
		}
	}
	return fmt.Errorf("%d attempts lost to concurrent ones: %w", maxAttempts, err)
}

// pause waits a random time up to 2^(attempt-1) ms, at most retryPause,
// or until ctx ends.
func pause(ctx context.Context, attempt int) error {
	longest := min(time.Millisecond<<(attempt-1), retryPause)
	t := time.NewTimer(rand.N(longest) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// onTiDB reports whether the server is TiDB, asking it once.
func (s *Store) onTiDB(ctx context.Context) (bool, error) {
	s.engineMu.Lock()
	defer s.engineMu.Unlock()
	if !s.engineKnown {
		info, err := dbengine.Detect(ctx, s.db)
		if err != nil {
			return false, fmt.Errorf("query budget: %w", err)
		}
		s.tidb, s.engineKnown = info.Engine == dbengine.TiDB, true
	}
	return s.tidb, nil
}

// runPessimistic runs fn in a TiDB pessimistic transaction on one
// connection of the pool: committed when fn returns nil, rolled back
// otherwise.
func (s *Store) runPessimistic(ctx context.Context, fn func(ctx context.Context, tx bun.IDB) error) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "BEGIN PESSIMISTIC"); err != nil {
		return fmt.Errorf("begin a pessimistic transaction: %w", err)
	}
	if err := fn(ctx, conn); err != nil {
		// A rollback that fails leaves the connection's transaction to the
		// server, which ends it with the connection; the caller's error is
		// fn's either way.
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *Store) updateOnce(ctx context.Context, tx bun.IDB, m Merchant, change func(queryplan.BucketState, time.Time) (queryplan.BucketState, bool)) error {
	now, err := s.clock(ctx, tx)
	if err != nil {
		return err
	}
	var (
		st      queryplan.BucketState
		backoff sql.NullTime
	)
	q := "SELECT milli_tokens, updated_at, backoff_until, backoffs FROM ss_query_budget " +
		"WHERE tenant_id = ? AND channel_code = ? AND merchant_id = ?"
	if tx.Dialect().Name() != dialect.SQLite {
		q += " FOR UPDATE"
	}
	err = tx.QueryRowContext(ctx, q, m.TenantID, []byte(m.Channel), []byte(m.MerchantID)).
		Scan(&st.MilliTokens, &st.UpdatedAt, &backoff, &st.Backoffs)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read the bucket: %w", err)
	}
	if backoff.Valid {
		st.BackoffUntil = backoff.Time
	}
	next, write := change(st, now)
	if !write && found {
		return nil
	}
	var until any
	if !next.BackoffUntil.IsZero() {
		until = next.BackoffUntil.UTC()
	}
	if !found {
		_, err = tx.ExecContext(ctx, "INSERT INTO ss_query_budget (tenant_id, channel_code, merchant_id, milli_tokens, updated_at, backoff_until, backoffs) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?)", m.TenantID, []byte(m.Channel), []byte(m.MerchantID), next.MilliTokens, next.UpdatedAt.UTC(), until, next.Backoffs)
		if err != nil {
			// Another querier created the bucket first: run again on its row.
			return fmt.Errorf("create the bucket: %w", dberr.ClassifyDuplicate(err))
		}
		return nil
	}
	_, err = tx.ExecContext(ctx, "UPDATE ss_query_budget SET milli_tokens = ?, updated_at = ?, backoff_until = ?, backoffs = ? "+
		"WHERE tenant_id = ? AND channel_code = ? AND merchant_id = ?",
		next.MilliTokens, next.UpdatedAt.UTC(), until, next.Backoffs, m.TenantID, []byte(m.Channel), []byte(m.MerchantID))
	if err != nil {
		return fmt.Errorf("write the bucket: %w", err)
	}
	return nil
}
