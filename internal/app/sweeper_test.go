package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

func TestSweeperSettlesAnOrphanWhoseMessageNeverComesBack(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()

	// A claim whose worker died before settling, and whose message the
	// partition's next owner will never see again (its offset was
	// committed past, say by an operator).
	trade := channelstest.NewTrade(channels.Alipay, 77)
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(channelstest.AlipayPayment(trade, channelstest.Delivery{}))
	require.NoError(t, err)
	ev := res.Event
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	store := idempotent.NewStore(h.db, idempotent.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }))
	ar, err := store.Acquire(ctx, idempotent.Claim{
		TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body,
		Source: idempotent.Source{Topic: h.topic(), Partition: 0, Offset: 12345},
	})
	require.NoError(t, err)
	require.Equal(t, idempotent.Acquired, ar.Kind)

	w := h.start(func(m *app.Main) { m.Config.Worker.OrphanAfter = time.Minute })
	require.Eventually(t, func() bool {
		rec, err := store.Get(ctx, ev.TenantID, ev.Key)
		return err == nil && rec.Status == idempotent.StatusSettled
	}, time.Minute, 20*time.Millisecond, "the sweeper settles the orphan")
	rec, err := store.Get(ctx, ev.TenantID, ev.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotent.OutcomePosted, rec.Outcome)
	n, err := h.db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key = ?", string(ev.Key)).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "posted once, balanced")
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_orphan_claims", nil) == 0 &&
			counted(t, w.main, "paycb_settle_total", map[string]string{"outcome": "POSTED"}) == 1
	}, time.Minute, 20*time.Millisecond)
}
