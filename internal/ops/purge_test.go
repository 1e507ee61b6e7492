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
	"github.com/paycallback/paycallback/pkg/settlement"
)

func TestTopicRetentionFromTheBroker(t *testing.T) {
	k := mustKafka(t, 1)
	d, ok, err := k.TopicRetention(context.Background(), testTopic)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 7*24*time.Hour, d, "kfake's default, as Kafka's")
	_, _, err = k.TopicRetention(context.Background(), "no-such-topic")
	require.Error(t, err)
}

func TestPurge(t *testing.T) {
	const day = 24 * time.Hour
	type counts struct{ rows, withEvent, withError int }
	tests := []struct {
		name    string
		opts    ops.PurgeOptions
		wantErr error
		cleared int64
		after   counts
	}{
		{
			name: "below the floor", opts: ops.PurgeOptions{OlderThan: 10 * day, Retention: 7 * day}, wantErr: ops.ErrBelowFloor,
			after: counts{4, 4, 1},
		},
		{
			name: "topic keeps messages forever", opts: ops.PurgeOptions{OlderThan: 1000 * day, RetentionForever: true}, wantErr: ops.ErrBelowFloor,
			after: counts{4, 4, 1},
		},
		{
			name: "dry run", opts: ops.PurgeOptions{OlderThan: 30 * day, Retention: 7 * day, DryRun: true}, cleared: 2,
			after: counts{4, 4, 1},
		},
		{
			name: "old settled claims, in batches of one", opts: ops.PurgeOptions{OlderThan: 30 * day, Retention: 7 * day, BatchSize: 1}, cleared: 2,
			after: counts{4, 2, 1},
		}, // the ACQUIRED claim keeps its event and error
		{
			name: "nothing that old", opts: ops.PurgeOptions{OlderThan: 100 * day, Retention: 7 * day}, cleared: 0,
			after: counts{4, 4, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			w := ledgertest.New(t)
			old1, _ := w.Settle(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.WeChat, 1), channelstest.Delivery{}))
			old2, _ := w.Settle(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 2), channelstest.Delivery{}))
			w.Settle(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 3), channelstest.Delivery{}))
			acquired := w.Acquire(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 4), channelstest.Delivery{}))
			for _, ev := range []channels.Event{old1, old2} {
				w.Exec(`UPDATE ss_channel_idempotent SET created_at = ?, settled_at = ? WHERE idempotent_key = ?`, ledgertest.Ago(40*day), ledgertest.Ago(40*day), string(ev.Key))
			}
			w.Exec(`UPDATE ss_channel_idempotent SET created_at = ?, last_error = 'boom' WHERE idempotent_key = ?`, ledgertest.Ago(40*day), string(acquired.Key))

			res, err := ops.Purge(ctx, w.DB, tt.opts)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.cleared, res.Rows)
			}
			var got counts
			require.NoError(t, w.DB.NewRaw(`SELECT COUNT(*), COUNT(event_json), COUNT(last_error) FROM ss_channel_idempotent`).
				Scan(ctx, &got.rows, &got.withEvent, &got.withError))
			assert.Equal(t, tt.after, got, "rows, stored events, last errors")
			rep, err := settlement.Reconcile(ctx, w.DB, settlement.ReconcileOptions{})
			require.NoError(t, err)
			assert.True(t, rep.OK(), "a purge changes nothing reconcile checks: %+v", rep.Discrepancies)
		})
	}
}

// TestPurgeDeletesOldPublishedSettledEvents: purge deletes the published
// settled events settled before PAYCB_SETTLED_RETENTION, in batches; it
// keeps a younger published one and an unpublished one however old, and a
// dry run counts without deleting. Zero retention deletes none.
func TestPurgeDeletesOldPublishedSettledEvents(t *testing.T) {
	const day = 24 * time.Hour
	ctx := context.Background()
	w := ledgertest.New(t)
	var keys []string
	for i := range 4 {
		ev, _ := w.Settle(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Codes()[i%3], 60+i), channelstest.Delivery{}))
		keys = append(keys, string(ev.Key))
	}
	// Two old and published, one old and never published, one young and published.
	for _, k := range keys[:2] {
		w.Exec(`UPDATE ss_settled_outbox SET settled_at = ?, published = 1, published_at = ? WHERE idempotent_key = ?`, ledgertest.Ago(10*day), ledgertest.Ago(10*day), k)
	}
	w.Exec(`UPDATE ss_settled_outbox SET settled_at = ? WHERE idempotent_key = ?`, ledgertest.Ago(10*day), keys[2])
	w.Exec(`UPDATE ss_settled_outbox SET published = 1, published_at = ? WHERE idempotent_key = ?`, ledgertest.Ago(time.Hour), keys[3])
	left := func() []string {
		var got []string
		require.NoError(t, w.DB.NewRaw(`SELECT idempotent_key FROM ss_settled_outbox ORDER BY idempotent_key`).Scan(ctx, &got))
		return got
	}
	all := left()
	opts := ops.PurgeOptions{OlderThan: 30 * day, Retention: 7 * day, BatchSize: 1}

	res, err := ops.Purge(ctx, w.DB, opts)
	require.NoError(t, err)
	assert.Zero(t, res.SettledRows, "no retention, nothing deleted")

	opts.SettledRetention, opts.DryRun = 7*day, true
	res, err = ops.Purge(ctx, w.DB, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(2), res.SettledRows)
	assert.Equal(t, all, left(), "a dry run deletes nothing")

	opts.DryRun = false
	res, err = ops.Purge(ctx, w.DB, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(2), res.SettledRows)
	assert.ElementsMatch(t, keys[2:], left())
}
