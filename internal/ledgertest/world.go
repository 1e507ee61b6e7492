package ledgertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Topic is the topic the claims a World makes name as their source.
const Topic = "channel-events"

// World is a migrated database with the claim store and settlement on it,
// fed decoded channel callbacks the way the worker feeds them.
type World struct {
	TB     testing.TB
	DB     *bun.DB
	Claims *idempotent.Store
	Svc    *settlement.Service
	Dec    *channels.Decoder
	offset int64
}

// New is a World on a migrated MariaDB database of the test's own
// (sqldbtest.MustMySQL), dropped when the test ends.
func New(tb testing.TB) *World {
	tb.Helper()
	return On(tb, sqldbtest.MustMySQL(tb))
}

// On is a World on db, a migrated database of any dialect.
func On(tb testing.TB, db *bun.DB) *World {
	tb.Helper()
	claims := idempotent.NewStore(db)
	svc, err := settlement.New(db, claims, nil, nil)
	require.NoError(tb, err)
	return &World{TB: tb, DB: db, Claims: claims, Svc: svc, Dec: channels.NewDecoder(sample.Keys())}
}

// NextOffset returns the offset of the next message on partition 0 of
// Topic, as the messages the World's claims come from are numbered, and
// counts it taken.
func (w *World) NextOffset() int64 {
	o := w.offset
	w.offset++
	return o
}

// Acquire decodes value and makes its claim, as message (Topic, 0, next
// offset) would, without settling it.
func (w *World) Acquire(value []byte) channels.Event {
	w.TB.Helper()
	res, err := w.Dec.Decode(value)
	require.NoError(w.TB, err)
	require.False(w.TB, res.Ignored, res.IgnoreReason)
	body, err := json.Marshal(res.Event)
	require.NoError(w.TB, err)
	ar, err := w.Claims.Acquire(context.Background(), idempotent.Claim{
		TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
		Fingerprint: res.Event.Fingerprint, Event: body,
		Source: idempotent.Source{Topic: Topic, Partition: 0, Offset: w.offset},
	})
	require.NoError(w.TB, err)
	require.Equal(w.TB, idempotent.Acquired, ar.Kind)
	w.offset++
	return res.Event
}

// Settle acquires and settles value, returning the outcome.
func (w *World) Settle(value []byte) (channels.Event, settlement.Result) {
	w.TB.Helper()
	ev := w.Acquire(value)
	res, err := w.Svc.Settle(context.Background(), ev)
	require.NoError(w.TB, err)
	return ev, res
}

// Exec runs query on the database; the test fails on an error.
func (w *World) Exec(query string, args ...any) {
	w.TB.Helper()
	_, err := w.DB.NewRaw(query, args...).Exec(context.Background())
	require.NoError(w.TB, err)
}

// Register pre-registers a refund of tr.
func (w *World) Register(tr sample.Trade, refundNo string, amount int64) {
	w.TB.Helper()
	_, err := w.Svc.RegisterRefund(context.Background(), settlement.RefundRequest{
		TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: refundNo, Amount: amount,
	})
	require.NoError(w.TB, err)
}

// Ago is d before now, in UTC.
func Ago(d time.Duration) time.Time { return time.Now().UTC().Add(-d) }
