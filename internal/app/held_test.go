package app_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestDuplicateOfAnInFlightClaimHoldsOnlyTheOffset: a channel retry whose
// claim another worker is settling right now does not hold up the
// partition's later messages in the batched pipeline; only the offset
// waits, and is committed past the retry once the claim is settled.
func TestDuplicateOfAnInFlightClaimHoldsOnlyTheOffset(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	dec := channels.NewDecoder(channelstest.Keys())
	var msgs []demo.Message
	var evs []channels.Event
	for i := range 3 {
		tr := channelstest.NewTrade(channels.Alipay, 90+i)
		v := channelstest.AlipayPayment(tr, channelstest.Delivery{Attempt: 1})
		res, err := dec.Decode(v)
		require.NoError(t, err)
		evs = append(evs, res.Event)
		msgs = append(msgs, demo.Message{Key: []byte(tr.TradeNo), Value: v})
	}
	held, later := evs[0], evs[1:]

	w := h.start(func(m *app.Main) { m.Config.Worker.BatchMax = 256 })

	// Another worker has just claimed the first event and is settling it.
	store := idempotent.NewStore(h.db)
	body, err := json.Marshal(held)
	require.NoError(t, err)
	claimedAt := time.Now()
	ar, err := store.Acquire(ctx, idempotent.Claim{
		TenantID: held.TenantID, Key: held.Key, EventType: held.Type, Fingerprint: held.Fingerprint, Event: body,
		Source: idempotent.Source{Topic: h.topic(), Partition: 5, Offset: 1},
	})
	require.NoError(t, err)
	require.Equal(t, idempotent.Acquired, ar.Kind)
	// Its retry reaches this worker's partition first; the two new events
	// come after the worker has taken the retry, so in a later batch.
	h.produce(msgs[:1])
	partition := map[string]string{"partition": "0"}
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_kafka_reader_messages_total", partition) == 1 &&
			counted(t, w.main, "paycb_kafka_reader_queue_length", partition) == 0
	}, time.Minute, time.Millisecond, "the worker takes the retry")
	h.produce(msgs[1:])

	settled := func(ev channels.Event) bool {
		rec, err := store.Get(ctx, ev.TenantID, ev.Key)
		return err == nil && rec.Status == idempotent.StatusSettled
	}
	require.Eventually(t, func() bool { return settled(later[0]) && settled(later[1]) },
		time.Minute, 10*time.Millisecond, "the messages after the retry are handled")
	rec, err := store.Get(ctx, held.TenantID, held.Key)
	require.NoError(t, err)
	require.Equal(t, idempotent.StatusAcquired, rec.Status, "the retry's claim is still being settled elsewhere")
	require.Less(t, time.Since(claimedAt), pipeline.InFlightGrace,
		"settled within the grace, so the worker did not take the claim over")
	assert.Less(t, h.committed()[0], int64(1), "nothing is committed past the retry")

	// The other worker commits its settlement: the retry is a duplicate,
	// and the partition commits to its end.
	svc, err := settlement.New(h.db, store, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)
	_, err = svc.Settle(ctx, held)
	require.NoError(t, err)
	h.waitConsumed(time.Minute)
	assert.Equal(t, int64(3), h.committed()[0])
	assert.InDelta(t, 1, counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "duplicate"}), 0)
	assert.InDelta(t, 2, counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "acquired"}), 0)
	n, err := h.db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key = ?", string(held.Key)).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "posted once, by the claim's maker")
}
