package ops_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// world is a migrated MariaDB database with the claim store and settlement
// on it, fed decoded channel callbacks the way the worker feeds them.
type world struct {
	t      *testing.T
	db     *bun.DB
	claims *idempotent.Store
	svc    *settlement.Service
	dec    *channels.Decoder
	offset int64
}

func newWorld(t *testing.T) *world {
	t.Helper()
	db := sqldbtest.MustMySQL(t)
	claims := idempotent.NewStore(db)
	svc, err := settlement.New(db, claims, nil, nil)
	require.NoError(t, err)
	return &world{t: t, db: db, claims: claims, svc: svc, dec: channels.NewDecoder(channelstest.Keys())}
}

// acquire decodes value and makes its claim, as message (topic, 0, next
// offset) would, without settling it.
func (w *world) acquire(value []byte) channels.Event {
	w.t.Helper()
	res, err := w.dec.Decode(value)
	require.NoError(w.t, err)
	require.False(w.t, res.Ignored, res.IgnoreReason)
	body, err := json.Marshal(res.Event)
	require.NoError(w.t, err)
	ar, err := w.claims.Acquire(context.Background(), idempotent.Claim{
		TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
		Fingerprint: res.Event.Fingerprint, Event: body,
		Source: idempotent.Source{Topic: testTopic, Partition: 0, Offset: w.offset},
	})
	require.NoError(w.t, err)
	require.Equal(w.t, idempotent.Acquired, ar.Kind)
	w.offset++
	return res.Event
}

// settle acquires and settles value, returning the outcome.
func (w *world) settle(value []byte) (channels.Event, settlement.Result) {
	w.t.Helper()
	ev := w.acquire(value)
	res, err := w.svc.Settle(context.Background(), ev)
	require.NoError(w.t, err)
	return ev, res
}

func (w *world) exec(query string, args ...any) {
	w.t.Helper()
	_, err := w.db.NewRaw(query, args...).Exec(context.Background())
	require.NoError(w.t, err)
}

// register pre-registers a refund of tr.
func (w *world) register(tr channelstest.Trade, refundNo string, amount int64) {
	w.t.Helper()
	_, err := w.svc.RegisterRefund(context.Background(), settlement.RefundRequest{
		TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: refundNo, Amount: amount,
	})
	require.NoError(w.t, err)
}

func ago(d time.Duration) time.Time { return time.Now().UTC().Add(-d) }
