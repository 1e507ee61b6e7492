package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func TestOrphans(t *testing.T) {
	ctx := context.Background()
	w := ledgertest.New(t)
	old := w.Acquire(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.WeChat, 1), channelstest.Delivery{}))
	purged := w.Acquire(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 2), channelstest.Delivery{}))
	fresh := w.Acquire(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 3), channelstest.Delivery{}))
	w.Exec(`UPDATE ss_channel_idempotent SET created_at = ? WHERE idempotent_key = ?`, ledgertest.Ago(10*time.Minute), string(old.Key))
	w.Exec(`UPDATE ss_channel_idempotent SET created_at = ?, event_json = NULL WHERE idempotent_key = ?`, ledgertest.Ago(5*time.Minute), string(purged.Key))

	tests := []struct {
		name      string
		olderThan time.Duration
		want      []idempotent.Key
	}{
		{"past both", 2 * time.Minute, []idempotent.Key{old.Key, purged.Key}},
		{"past one", 7 * time.Minute, []idempotent.Key{old.Key}},
		{"none that old", time.Hour, nil},
		{"every claim", 0, []idempotent.Key{old.Key, purged.Key, fresh.Key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ops.ListOrphans(ctx, w.Claims, tt.olderThan)
			require.NoError(t, err)
			var keys []idempotent.Key
			for _, o := range got {
				keys = append(keys, o.Record.Key)
				assert.GreaterOrEqual(t, o.Age, tt.olderThan)
				assert.Equal(t, ledgertest.Topic, o.Record.Source.Topic)
			}
			assert.Equal(t, tt.want, keys)
		})
	}

	orphans, err := ops.ListOrphans(ctx, w.Claims, 2*time.Minute)
	require.NoError(t, err)
	require.Len(t, orphans, 2)
	// A settler wins the fence for the first one meanwhile.
	_, err = w.Svc.Settle(ctx, old)
	require.NoError(t, err)
	failed := ops.SettleOrphans(ctx, w.Svc, orphans)
	assert.Equal(t, 1, failed)
	require.NotNil(t, orphans[0].Settled)
	assert.True(t, orphans[0].Settled.FenceLost, "the fence decided: already settled")
	require.ErrorIs(t, orphans[1].Err, settlement.ErrInvalidEvent, "a purged claim cannot be settled from its event")

	// The fresh claim settles through the fence and is gone from the list.
	orphans, err = ops.ListOrphans(ctx, w.Claims, 0)
	require.NoError(t, err)
	var freshOnly []ops.Orphan
	for _, o := range orphans {
		if o.Record.Key == fresh.Key {
			freshOnly = append(freshOnly, o)
		}
	}
	require.Len(t, freshOnly, 1)
	assert.Zero(t, ops.SettleOrphans(ctx, w.Svc, freshOnly))
	assert.Equal(t, idempotent.OutcomePosted, freshOnly[0].Settled.Outcome)
	rec, err := w.Claims.Get(ctx, fresh.TenantID, fresh.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotent.StatusSettled, rec.Status)
	rep, err := settlement.Reconcile(ctx, w.DB, settlement.ReconcileOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep.Discrepancies)
}
