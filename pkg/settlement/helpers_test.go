package settlement_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"modernc.org/sqlite"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// harness is the worker's per-message pipeline, reduced to what settlement
// needs: decode, claim, settle.
type harness struct {
	db     *bun.DB
	claims *idempotent.Store
	svc    *settlement.Service
	reg    *prometheus.Registry
	dec    *channels.Decoder
}

func newHarness(tb testing.TB, db *bun.DB) *harness {
	tb.Helper()
	reg := prometheus.NewRegistry()
	claims := idempotent.NewStore(db)
	svc, err := settlement.New(db, claims, nil, reg)
	require.NoError(tb, err)
	return &harness{db: db, claims: claims, svc: svc, reg: reg, dec: channels.NewDecoder(channelstest.Keys())}
}

// delivery is what one message did.
type delivery struct {
	ev     channels.Event
	kind   idempotent.ResultKind
	result settlement.Result // zero unless this delivery settled
}

// decode turns an envelope into its canonical event; the test fails on an
// ignored or broken message.
func (h *harness) decode(tb testing.TB, value []byte) channels.Event {
	tb.Helper()
	res, err := h.dec.Decode(value)
	require.NoError(tb, err)
	require.False(tb, res.Ignored, "message is ignored: %s", res.IgnoreReason)
	return res.Event
}

// acquire claims ev as message offset of partition 0.
func (h *harness) acquire(tb testing.TB, ev channels.Event, offset int64) idempotent.Result {
	tb.Helper()
	ctx := context.Background()
	body, err := json.Marshal(ev)
	require.NoError(tb, err)
	var res idempotent.Result
	err = retry(func() error {
		var err error
		res, err = h.claims.Acquire(ctx, idempotent.Claim{
			TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body,
			Source: idempotent.Source{Topic: "channel-events", Partition: 0, Offset: offset},
		})
		return err
	})
	require.NoError(tb, err, "acquire %s", ev.Key)
	return res
}

// deliver runs one message through the pipeline: a new claim is settled
// from the event, a duplicate that finds its claim still ACQUIRED settles
// it from the stored event (as the worker does), a settled one is done.
func (h *harness) deliver(tb testing.TB, value []byte, offset int64) delivery {
	tb.Helper()
	d, err := h.tryDeliver(context.Background(), value, offset)
	require.NoError(tb, err)
	return d
}

// tryDeliver is deliver for goroutines other than the test's: it returns
// what went wrong instead of failing the test.
func (h *harness) tryDeliver(ctx context.Context, value []byte, offset int64) (delivery, error) {
	res, err := h.dec.Decode(value)
	if err != nil {
		return delivery{}, fmt.Errorf("decode: %w", err)
	}
	if res.Ignored {
		return delivery{}, fmt.Errorf("decode: ignored: %s", res.IgnoreReason)
	}
	ev := res.Event
	body, err := json.Marshal(ev)
	if err != nil {
		return delivery{}, err
	}
	var acq idempotent.Result
	err = retry(func() error {
		var err error
		acq, err = h.claims.Acquire(ctx, idempotent.Claim{
			TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body,
			Source: idempotent.Source{Topic: "channel-events", Partition: 0, Offset: offset},
		})
		return err
	})
	if err != nil {
		return delivery{}, fmt.Errorf("acquire %s: %w", ev.Key, err)
	}
	d := delivery{ev: ev, kind: acq.Kind}
	switch {
	case acq.Kind == idempotent.Acquired:
		err = retry(func() error { d.result, err = h.svc.Settle(ctx, ev); return err })
	case acq.Kind == idempotent.Duplicate && acq.Existing.Status == idempotent.StatusAcquired:
		err = retry(func() error { d.result, err = h.svc.SettleStored(ctx, acq.Existing); return err })
	case acq.Kind == idempotent.Conflict:
		err = fmt.Errorf("unexpected conflict on %s", ev.Key)
	}
	if err != nil {
		return delivery{}, fmt.Errorf("settle %s: %w", ev.Key, err)
	}
	return d, nil
}

// deliverBatch runs messages through the batch pipeline: claim each, settle
// the new claims with one SettleBatch (falling back to Settle one by one
// when the batch fails, as the worker does), and settle from the stored
// event a duplicate whose claim another batch left ACQUIRED.
func (h *harness) deliverBatch(tb testing.TB, values [][]byte, offset int64) []delivery {
	tb.Helper()
	ctx := context.Background()
	out := make([]delivery, len(values))
	var fresh []int
	mine := map[idempotent.Key]bool{}
	for i, v := range values {
		ev := h.decode(tb, v)
		acq := h.acquire(tb, ev, offset+int64(i))
		out[i] = delivery{ev: ev, kind: acq.Kind}
		switch {
		case acq.Kind == idempotent.Acquired:
			fresh = append(fresh, i)
			mine[ev.Key] = true
		case acq.Kind == idempotent.Duplicate && acq.Existing.Status == idempotent.StatusAcquired && !mine[ev.Key]:
			err := retry(func() error { var err error; out[i].result, err = h.svc.SettleStored(ctx, acq.Existing); return err })
			require.NoError(tb, err)
		}
	}
	if len(fresh) == 0 {
		return out
	}
	evs := make([]channels.Event, len(fresh))
	for n, i := range fresh {
		evs[n] = out[i].ev
	}
	var res []settlement.Result
	err := retry(func() error { var err error; res, err = h.svc.SettleBatch(ctx, evs); return err })
	if err != nil {
		tb.Logf("batch failed, settling one by one: %v", err)
		for _, i := range fresh {
			err := retry(func() error { var err error; out[i].result, err = h.svc.Settle(ctx, out[i].ev); return err })
			require.NoError(tb, err)
		}
		return out
	}
	require.Len(tb, res, len(fresh))
	for n, i := range fresh {
		out[i].result = res[n]
	}
	return out
}

// retry retries fn on the errors the worker retries in place: deadlocks,
// lock wait timeouts and a busy SQLite database. Bounded.
func retry(fn func() error) error {
	var err error
	for range 50 {
		if err = fn(); err == nil || !transient(err) {
			return err
		}
		retried.Add(1)
	}
	return fmt.Errorf("still failing after 50 attempts: %w", err)
}

// retried counts the transient errors retry met, for the logs.
var retried atomic.Int64

// transient reports the errors the worker would retry in place and a
// test retries too: a transaction rolled back for a concurrent one (a
// deadlock, TiDB's write conflict at COMMIT in optimistic mode), a lock
// wait timeout, TiDB's given-up locking read, SQLite's busy database.
func transient(err error) bool {
	if idempotent.IsRetryableConflict(err) {
		return true
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		// 1105: TiDB's locking read that gave up after its statement
		// retries under heavy contention ("pessimistic lock retry limit
		// reached"); the worker retries it like any error but a duplicate.
		return my.Number == 1205 || my.Number == 1105
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		c := lite.Code() & 0xff
		return c == 5 || c == 6 // SQLITE_BUSY, SQLITE_LOCKED
	}
	return false
}

// mustCheck runs reconciliation's ledger and order checks on db, fails the
// test on any discrepancy, and returns the ledger's totals.
func mustCheck(tb testing.TB, db bun.IDB) settlement.LedgerTotals {
	tb.Helper()
	ctx := context.Background()
	rep, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{Checks: settlement.LedgerChecks})
	require.NoError(tb, err)
	require.NoError(tb, rep.Err())
	totals, err := settlement.Totals(ctx, db)
	require.NoError(tb, err)
	return totals
}

func ledgerRows(tb testing.TB, db bun.IDB, key idempotent.Key) int {
	tb.Helper()
	n, err := db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key = ?", string(key)).Count(context.Background())
	require.NoError(tb, err)
	return int(n)
}

func order(tb testing.TB, db bun.IDB, tr channelstest.Trade) settlement.Order {
	tb.Helper()
	o, err := settlement.GetOrder(context.Background(), db, tr.TenantID, tr.Channel, tr.TradeNo)
	require.NoError(tb, err)
	return o
}

// metric reads a counter of the service from the harness registry: the
// series whose labels include labelPairs (name, value, …); 0 when absent.
func metric(tb testing.TB, h *harness, name string, labelPairs ...string) float64 {
	tb.Helper()
	families, err := h.reg.Gather()
	require.NoError(tb, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labelPairs); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labelPairs[i] && l.GetValue() == labelPairs[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
