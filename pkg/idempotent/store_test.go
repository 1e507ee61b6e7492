package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

const fp = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func mustKey(tb testing.TB, trade string) idempotent.Key {
	tb.Helper()
	k, err := idempotent.NewPaymentKey("WECHAT", trade)
	require.NoError(tb, err)
	return k
}

func claimFor(key idempotent.Key, tenant int64) idempotent.Claim {
	_, typ, _ := idempotent.ParseKey(string(key))
	return idempotent.Claim{
		TenantID:    tenant,
		Key:         key,
		EventType:   typ,
		Fingerprint: fp,
		Event:       []byte(`{"k":"` + string(key) + `"}`),
		Source:      idempotent.Source{Topic: "channel-events", Partition: 3, Offset: 42},
	}
}

func countClaims(tb testing.TB, db bun.IDB, where string, args ...any) int {
	tb.Helper()
	n, err := db.NewSelect().Table("ss_channel_idempotent").Where(where, args...).Count(context.Background())
	require.NoError(tb, err)
	return int(n)
}

func TestAcquire(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)

		t.Run("first claim is acquired, the retry is a duplicate that names the claim", func(t *testing.T) {
			c := claimFor(mustKey(t, "T1"), 1001)
			res, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, idempotent.Acquired, res.Kind)

			retry := c
			retry.Source = idempotent.Source{Topic: "channel-events", Partition: 3, Offset: 99}
			res, err = store.Acquire(ctx, retry)
			require.NoError(t, err)
			require.Equal(t, idempotent.Duplicate, res.Kind)
			ex := res.Existing
			assert.Equal(t, idempotent.StatusAcquired, ex.Status)
			assert.Empty(t, ex.Outcome)
			assert.Equal(t, c.Source, ex.Source, "the source is the message that made the claim")
			assert.True(t, ex.MadeBy(c.Source))
			assert.False(t, ex.MadeBy(retry.Source))
			assert.Equal(t, c.Event, ex.Event, "the canonical event is stored for later settlement")
			assert.Equal(t, int64(1001), ex.TenantID)
			assert.Equal(t, idempotent.PaymentReceived, ex.EventType)
			assert.GreaterOrEqual(t, ex.Age(time.Now()), time.Duration(0))
			assert.Equal(t, 1, countClaims(t, db, "idempotent_key = ?", string(c.Key)))
		})

		t.Run("same key under two tenants is two claims", func(t *testing.T) {
			k := mustKey(t, "T2")
			for _, tenant := range []int64{1001, 1002} {
				res, err := store.Acquire(ctx, claimFor(k, tenant))
				require.NoError(t, err)
				assert.Equal(t, idempotent.Acquired, res.Kind, "tenant %d", tenant)
			}
		})

		t.Run("refund numbers differing only in case are two claims", func(t *testing.T) {
			for _, rf := range []string{"rf-1", "RF-1", "Rf-1"} {
				k, err := idempotent.NewRefundKey("WECHAT", "T3", rf)
				require.NoError(t, err)
				res, err := store.Acquire(ctx, claimFor(k, 1001))
				require.NoError(t, err)
				assert.Equal(t, idempotent.Acquired, res.Kind, rf)
			}
			assert.Equal(t, 3, countClaims(t, db, "tenant_id = ? AND event_type = ?", 1001, "REFUND_SUCCEEDED"))
		})

		t.Run("a different fingerprint under a claimed key is a conflict", func(t *testing.T) {
			c := claimFor(mustKey(t, "T4"), 1001)
			_, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			other := c
			other.Fingerprint = "0000000000000000000000000000000000000000000000000000000000000000"
			res, err := store.Acquire(ctx, other)
			require.NoError(t, err)
			assert.Equal(t, idempotent.Conflict, res.Kind)
			assert.Equal(t, fp, res.Existing.Fingerprint, "the first claim's fingerprint stands")
		})

		t.Run("a business rollback after acquire leaves the claim", func(t *testing.T) {
			c := claimFor(mustKey(t, "T5"), 1001)
			res, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			require.Equal(t, idempotent.Acquired, res.Kind)
			errBusiness := errors.New("business failed")
			err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				if err := store.Settle(ctx, tx, c.TenantID, c.Key, idempotent.OutcomePosted); err != nil {
					return err
				}
				return errBusiness
			})
			require.ErrorIs(t, err, errBusiness)
			res, err = store.Acquire(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, idempotent.Duplicate, res.Kind)
			assert.Equal(t, idempotent.StatusAcquired, res.Existing.Status, "the rolled-back settle left it ACQUIRED")
		})

		t.Run("invalid claims are refused before the database", func(t *testing.T) {
			c := claimFor(mustKey(t, "T6"), 0)
			_, err := store.Acquire(ctx, c)
			require.ErrorIs(t, err, idempotent.ErrInvalidClaim)
			c = claimFor(mustKey(t, "T6"), 1001)
			c.EventType = idempotent.RefundSucceeded
			_, err = store.Acquire(ctx, c)
			require.ErrorIs(t, err, idempotent.ErrInvalidClaim)
			c = claimFor("WECHAT:T6:PAYMENT_RECEIVED ", 1001)
			_, err = store.Acquire(ctx, c)
			require.ErrorIs(t, err, idempotent.ErrInvalidKey)
			assert.Equal(t, 0, countClaims(t, db, "idempotent_key LIKE ?", "WECHAT:T6%"))
		})

		t.Run("a cancelled context is an error, never a duplicate", func(t *testing.T) {
			c := claimFor(mustKey(t, "T7"), 1001)
			_, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err = store.Acquire(cctx, c)
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, idempotent.ErrDuplicateKey)
		})
	})
}

func TestKeyColumnComparesByteForByte(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		// Written straight into the column, bypassing the builder (which
		// refuses the trailing space): a PAD SPACE or case-insensitive
		// collation would call these duplicates and lose a refund.
		for _, k := range []string{"SQB:1:REFUND_SUCCEEDED:rf-1", "SQB:1:REFUND_SUCCEEDED:rf-1 ", "SQB:1:REFUND_SUCCEEDED:RF-1"} {
			_, err := db.NewRaw(`INSERT INTO ss_channel_idempotent
				(tenant_id, idempotent_key, event_type, status, fingerprint, created_at)
				VALUES (?, ?, 'REFUND_SUCCEEDED', 'ACQUIRED', 'x', ?)`, 1, k, time.Now().UTC()).Exec(ctx)
			require.NoError(t, err, "key %q", k)
		}
		assert.Equal(t, 3, countClaims(t, db, "tenant_id = 1"))
		assert.Equal(t, 1, countClaims(t, db, "idempotent_key = ?", "SQB:1:REFUND_SUCCEEDED:rf-1"),
			"equality finds exactly the stored bytes")
	})
}

func TestConcurrentAcquireHasExactlyOneWinner(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		const n = 64
		db.SetMaxOpenConns(n + 2)
		store := idempotent.NewStore(db)
		c := claimFor(mustKey(t, "RACE"), 1001)

		// Open the connections first so the inserts really race.
		ctx := context.Background()
		conns := make([]bun.Conn, 0, n)
		if db.Dialect().Name().String() == "mysql" {
			for range n {
				conn, err := db.Conn(ctx)
				require.NoError(t, err)
				conns = append(conns, conn)
			}
			for _, conn := range conns {
				require.NoError(t, conn.Close()) // back to the idle pool, still open
			}
		}

		var acquired, duplicate atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := store.Acquire(ctx, c)
				if err != nil {
					errs <- err
					return
				}
				switch res.Kind {
				case idempotent.Acquired:
					acquired.Add(1)
				case idempotent.Duplicate:
					duplicate.Add(1)
				default:
					errs <- fmt.Errorf("unexpected result %v", res.Kind)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		assert.Equal(t, int64(1), acquired.Load())
		assert.Equal(t, int64(n-1), duplicate.Load())
		assert.Equal(t, 1, countClaims(t, db, "tenant_id = ? AND idempotent_key = ?", 1001, string(c.Key)))
	})
}

// insertPosting stands for a business write inside the settle transaction.
func insertPosting(ctx context.Context, tx bun.Tx, key idempotent.Key, account string) error {
	_, err := tx.NewRaw(`INSERT INTO ss_ledger_entry
		(tenant_id, idempotent_key, channel_code, channel_trade_no, account, direction, amount, currency, created_at)
		VALUES (1001, ?, 'WECHAT', 'F', ?, 'DEBIT', 100, 'CNY', ?)`, string(key), account, time.Now().UTC()).Exec(ctx)
	return err
}

func TestSettleFence(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)

		t.Run("settles once, then reports the fence lost", func(t *testing.T) {
			c := claimFor(mustKey(t, "F1"), 1001)
			_, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			settle := func() error {
				return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					return store.Settle(ctx, tx, c.TenantID, c.Key, idempotent.OutcomeNoMoney)
				})
			}
			require.NoError(t, settle())
			require.ErrorIs(t, settle(), idempotent.ErrFenceLost)
			rec, err := store.Get(ctx, c.TenantID, c.Key)
			require.NoError(t, err)
			assert.Equal(t, idempotent.StatusSettled, rec.Status)
			assert.Equal(t, idempotent.OutcomeNoMoney, rec.Outcome)
			require.NotNil(t, rec.SettledAt)
		})

		t.Run("an unknown claim is not found, not a lost fence", func(t *testing.T) {
			err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				return store.Settle(ctx, tx, 1001, mustKey(t, "NOPE"), idempotent.OutcomePosted)
			})
			require.ErrorIs(t, err, idempotent.ErrNotFound)
			assert.NotErrorIs(t, err, idempotent.ErrFenceLost)
		})

		t.Run("a fingerprint other than the claim's does not pass", func(t *testing.T) {
			c := claimFor(mustKey(t, "F3"), 1001)
			_, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			tk := idempotent.TenantKey{TenantID: c.TenantID, Key: c.Key}
			settle := func(fp string) error {
				return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					return store.SettleMany(ctx, tx, map[idempotent.TenantKey]idempotent.Settlement{
						tk: {Outcome: idempotent.OutcomePosted, Fingerprint: fp},
					})
				})
			}
			err = settle("another-event")
			require.ErrorIs(t, err, idempotent.ErrFingerprintMismatch)
			require.NotErrorIs(t, err, idempotent.ErrFenceLost)
			rec, err := store.Get(ctx, c.TenantID, c.Key)
			require.NoError(t, err)
			assert.Equal(t, idempotent.StatusAcquired, rec.Status, "refused whole")

			require.NoError(t, settle(c.Fingerprint))
			require.ErrorIs(t, settle(c.Fingerprint), idempotent.ErrFenceLost)
		})

		t.Run("concurrent settlers: exactly one commits its business writes", func(t *testing.T) {
			const settlers = 16
			c := claimFor(mustKey(t, "F2"), 1001)
			_, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			var won, lost atomic.Int64
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, settlers)
			for i := range settlers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					settle := func() error {
						return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
							if err := store.Settle(ctx, tx, c.TenantID, c.Key, idempotent.OutcomePosted); err != nil {
								return err
							}
							// A distinct account per settler: only the fence, not
							// the ledger's unique key, can stop a second posting.
							return insertPosting(ctx, tx, c.Key, fmt.Sprintf("acct:%d", i))
						})
					}
					err := settle()
					// TiDB's optimistic transactions take no row lock: a
					// settler that lost finds out at COMMIT (a write
					// conflict), and runs again, as the worker does, to
					// meet the fence.
					for attempt := 0; attempt < 20 && idempotent.IsRetryableConflict(err); attempt++ {
						err = settle()
					}
					switch {
					case err == nil:
						won.Add(1)
					case errors.Is(err, idempotent.ErrFenceLost):
						lost.Add(1)
					default:
						errs <- err
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			assert.Equal(t, int64(1), won.Load())
			assert.Equal(t, int64(settlers-1), lost.Load())
			n, err := db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key = ?", string(c.Key)).Count(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "business rows written once")
		})
	})
}

func TestOrphans(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		var now time.Time
		store := idempotent.NewStore(db, idempotent.WithClock(func() time.Time { return now }))
		var keys []idempotent.Key
		for i := range 7 {
			now = base.Add(time.Duration(i) * time.Minute)
			k := mustKey(t, fmt.Sprintf("O%d", i))
			keys = append(keys, k)
			_, err := store.Acquire(ctx, claimFor(k, 1001))
			require.NoError(t, err)
		}
		// Settle O1: it is no orphan.
		require.NoError(t, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			return store.Settle(ctx, tx, 1001, keys[1], idempotent.OutcomePosted)
		}))
		cutoff := base.Add(5*time.Minute + time.Second) // O0..O5 are older

		n, err := store.CountOrphans(ctx, cutoff)
		require.NoError(t, err)
		assert.Equal(t, 5, n)

		var got []idempotent.Key
		var cur idempotent.OrphanCursor
		for page := 0; ; page++ {
			require.Less(t, page, 10, "paging terminates")
			recs, next, err := store.Orphans(ctx, cutoff, cur, 2)
			require.NoError(t, err)
			for _, r := range recs {
				assert.Equal(t, idempotent.StatusAcquired, r.Status)
				got = append(got, r.Key)
			}
			if next == (idempotent.OrphanCursor{}) {
				break
			}
			cur = next
		}
		assert.Equal(t, []idempotent.Key{keys[0], keys[2], keys[3], keys[4], keys[5]}, got, "oldest first, settled and young ones left out")
	})
}

func TestFailureBookkeeping(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)
		c := claimFor(mustKey(t, "B1"), 1001)
		_, err := store.Acquire(ctx, c)
		require.NoError(t, err)

		require.NoError(t, store.RecordFailure(ctx, c.TenantID, c.Key, errors.New("deadlock; try again")))
		require.NoError(t, store.RecordFailure(ctx, c.TenantID, c.Key, errors.New("lost connection")))
		require.NoError(t, store.MarkDeadLettered(ctx, c.TenantID, c.Key))
		rec, err := store.Get(ctx, c.TenantID, c.Key)
		require.NoError(t, err)
		assert.Equal(t, 2, rec.Attempts)
		assert.Equal(t, "lost connection", rec.LastError)
		require.NotNil(t, rec.DeadLetteredAt)
		assert.Equal(t, idempotent.StatusAcquired, rec.Status, "bookkeeping never settles")
	})
}

// TestSettleManyAcrossTenants: one fence settles the claims of several
// tenants at once; a key string claimed by two tenants gets each tenant's
// own outcome and fingerprint check, and a claim that does not qualify in
// one tenant refuses the whole fence, the other tenant's claims included.
func TestSettleManyAcrossTenants(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)
		claim := func(trade string, tenant int64) idempotent.TenantKey {
			c := claimFor(mustKey(t, trade), tenant)
			res, err := store.Acquire(ctx, c)
			require.NoError(t, err)
			require.Equal(t, idempotent.Acquired, res.Kind)
			return idempotent.TenantKey{TenantID: tenant, Key: c.Key}
		}
		fence := func(s map[idempotent.TenantKey]idempotent.Settlement) error {
			return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return store.SettleMany(ctx, tx, s) })
		}
		status := func(k idempotent.TenantKey) (idempotent.Status, idempotent.Outcome) {
			rec, err := store.Get(ctx, k.TenantID, k.Key)
			require.NoError(t, err)
			return rec.Status, rec.Outcome
		}

		// One key string in two tenants, with different outcomes.
		sharedA, sharedB := claim("T-SHARED", 1001), claim("T-SHARED", 1002)
		onlyA, onlyB := claim("T-A", 1001), claim("T-B", 1002)
		require.NoError(t, fence(map[idempotent.TenantKey]idempotent.Settlement{
			sharedA: {Outcome: idempotent.OutcomePosted, Fingerprint: fp},
			sharedB: {Outcome: idempotent.OutcomeNoMoney},
			onlyA:   {Outcome: idempotent.OutcomeOverRefund},
			onlyB:   {Outcome: idempotent.OutcomePosted, Fingerprint: fp},
		}))
		for k, want := range map[idempotent.TenantKey]idempotent.Outcome{
			sharedA: idempotent.OutcomePosted, sharedB: idempotent.OutcomeNoMoney,
			onlyA: idempotent.OutcomeOverRefund, onlyB: idempotent.OutcomePosted,
		} {
			st, out := status(k)
			assert.Equal(t, idempotent.StatusSettled, st, "%d/%s", k.TenantID, k.Key)
			assert.Equal(t, want, out, "%d/%s", k.TenantID, k.Key)
		}

		// A wrong fingerprint in tenant 1002 refuses tenant 1001's claim too.
		goodA, badB := claim("T-GOOD", 1001), claim("T-GOOD", 1002)
		err := fence(map[idempotent.TenantKey]idempotent.Settlement{
			goodA: {Outcome: idempotent.OutcomePosted, Fingerprint: fp},
			badB:  {Outcome: idempotent.OutcomePosted, Fingerprint: "another-event"},
		})
		require.ErrorIs(t, err, idempotent.ErrFingerprintMismatch)
		for _, k := range []idempotent.TenantKey{goodA, badB} {
			st, _ := status(k)
			assert.Equal(t, idempotent.StatusAcquired, st, "refused whole: %d/%s", k.TenantID, k.Key)
		}

		// A claim another settler took in one tenant: the fence is lost,
		// and the other tenant's claim stays ACQUIRED.
		require.NoError(t, fence(map[idempotent.TenantKey]idempotent.Settlement{badB: {Outcome: idempotent.OutcomeNoMoney}}))
		err = fence(map[idempotent.TenantKey]idempotent.Settlement{
			goodA: {Outcome: idempotent.OutcomePosted, Fingerprint: fp},
			badB:  {Outcome: idempotent.OutcomePosted},
		})
		require.ErrorIs(t, err, idempotent.ErrFenceLost)
		st, _ := status(goodA)
		assert.Equal(t, idempotent.StatusAcquired, st)
		st, out := status(badB)
		assert.Equal(t, idempotent.StatusSettled, st)
		assert.Equal(t, idempotent.OutcomeNoMoney, out, "the first settler's outcome stands")
	})
}

// TestAcquireManyReadsBackByTenant: a batch whose insert met claims already
// there reads back, in one statement, which rows it inserted; a key string
// another tenant claimed is not this tenant's duplicate.
func TestAcquireManyReadsBackByTenant(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		store := idempotent.NewStore(db)
		other := claimFor(mustKey(t, "RB-1"), 1002)
		_, err := store.Acquire(ctx, other)
		require.NoError(t, err)
		mineBefore := claimFor(mustKey(t, "RB-2"), 1001)
		_, err = store.Acquire(ctx, mineBefore)
		require.NoError(t, err)

		counter := &sqldbtest.StatementCounter{}
		counted := idempotent.NewStore(db.WithQueryHook(counter))
		res, err := counted.AcquireMany(ctx, []idempotent.Claim{
			claimFor(mustKey(t, "RB-1"), 1001), mineBefore, claimFor(mustKey(t, "RB-3"), 1001),
		})
		require.NoError(t, err)
		assert.Equal(t, int64(2), counter.Count(), "the insert, then one read-back")
		require.Len(t, res, 3)
		assert.Equal(t, idempotent.Acquired, res[0].Kind, "tenant 1002's claim of the same key is not 1001's")
		assert.Equal(t, idempotent.Duplicate, res[1].Kind)
		assert.Equal(t, mineBefore.Source, res[1].Existing.Source)
		assert.Equal(t, idempotent.Acquired, res[2].Kind)
		assert.Equal(t, 2, countClaims(t, db, "idempotent_key = ?", string(mustKey(t, "RB-1"))))
	})
}
