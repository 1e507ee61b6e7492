package querybudget_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/querybudget"
	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/schema"
)

var merchant = querybudget.Merchant{TenantID: 1001, Channel: "WECHAT", MerchantID: "1900000100"}

// TestTakeSpendsTheBurstThenWaits: a new merchant has its burst; then a
// Take is refused with the time the next token comes; another merchant,
// and the same merchant id in another case (ids compare byte for byte),
// have buckets of their own.
func TestTakeSpendsTheBurstThenWaits(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) {
		t.Helper()
		ctx := context.Background()
		s, err := querybudget.New(db, queryplan.Budget{PerSecond: 0.001, Burst: 3, Backoff: time.Minute, MaxBackoff: time.Hour})
		require.NoError(t, err)
		for i := range 3 {
			ok, _, err := s.Take(ctx, merchant)
			require.NoError(t, err)
			require.True(t, ok, "token %d of the burst", i+1)
		}
		ok, at, err := s.Take(ctx, merchant)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.WithinDuration(t, time.Now().Add(1000*time.Second), at, 10*time.Second, "a token every 1000 s")

		other := merchant
		other.MerchantID = "1900000101"
		ok, _, err = s.Take(ctx, other)
		require.NoError(t, err)
		assert.True(t, ok)
		cased := querybudget.Merchant{TenantID: 1001, Channel: "WECHAT", MerchantID: "MCH-a"}
		upper := querybudget.Merchant{TenantID: 1001, Channel: "WECHAT", MerchantID: "MCH-A"}
		for range 3 {
			ok, _, err = s.Take(ctx, cased)
			require.NoError(t, err)
			require.True(t, ok)
		}
		ok, _, err = s.Take(ctx, upper)
		require.NoError(t, err)
		assert.True(t, ok, "MCH-A is not MCH-a")
	})
}

// TestThrottledBacksOffEveryQuerier: a rate-limit answer recorded by one
// store stops the merchant's queries through another store on the same
// database until the back-off ends.
func TestThrottledBacksOffEveryQuerier(t *testing.T) {
	ctx := context.Background()
	dsn := sqldbtest.NewDatabase(t)
	a, b := openStores(t, dsn, queryplan.DefaultBudget())
	until, err := a.Throttled(ctx, merchant)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Minute), until, 10*time.Second)
	ok, at, err := b.Take(ctx, merchant)
	require.NoError(t, err)
	assert.False(t, ok, "the other querier sees the back-off")
	assert.True(t, at.Equal(until), "it may try again when the back-off ends: %s, %s", at, until)
}

// TestQueriersTogetherNeverExceedTheBudget: two queriers (two pools on one
// MariaDB database), eight goroutines each, take tokens of one merchant as
// fast as they can; the grants, timed by the database's clock, never
// exceed the burst plus the rate in any window, and none is lost to an
// error.
func TestQueriersTogetherNeverExceedTheBudget(t *testing.T) {
	ctx := context.Background()
	budget := queryplan.Budget{PerSecond: 40, Burst: 5, Backoff: time.Minute, MaxBackoff: time.Hour}
	dsn := sqldbtest.NewDatabase(t)
	a, b := openStores(t, dsn, budget)
	var (
		mu      sync.Mutex
		granted []time.Time
		wg      sync.WaitGroup
	)
	const want = 45
	for g := range 16 {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(granted) >= want
				mu.Unlock()
				if done {
					return
				}
				ok, at, err := s.Take(ctx, merchant)
				if err != nil {
					t.Errorf("take: %v", err)
					return
				}
				if ok {
					mu.Lock()
					granted = append(granted, at)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, len(granted), want)
	sort.Slice(granted, func(i, j int) bool { return granted[i].Before(granted[j]) })
	for _, w := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		limit := budget.Burst + int(w.Seconds()*budget.PerSecond)
		j := 0
		for i := range granted {
			for granted[i].Sub(granted[j]) >= w {
				j++
			}
			require.LessOrEqual(t, i-j+1, limit, "%d queries within %s (burst %d, %v a second)", i-j+1, w, budget.Burst, budget.PerSecond)
		}
	}
	span := granted[len(granted)-1].Sub(granted[0])
	assert.GreaterOrEqual(t, span, time.Duration(float64(len(granted)-budget.Burst-1)/budget.PerSecond*float64(time.Second)),
		"%d grants in %s", len(granted), span)
}

func openStores(t *testing.T, dsn string, budget queryplan.Budget) (*querybudget.Store, *querybudget.Store) {
	t.Helper()
	var stores []*querybudget.Store
	for i := range 2 {
		db, err := sqldb.OpenMySQL(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		if i == 0 {
			_, err = schema.Migrate(context.Background(), db)
			require.NoError(t, err)
		}
		s, err := querybudget.New(db, budget)
		require.NoError(t, err)
		stores = append(stores, s)
	}
	return stores[0], stores[1]
}

func TestNewRefusesABudgetThatCannotBeKept(t *testing.T) {
	_, err := querybudget.New(sqldbtest.MustSQLite(t), queryplan.Budget{})
	assert.Error(t, err)
}
