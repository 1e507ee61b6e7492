package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// TestClaimsKeepTheChannelTime: every claim the pipeline makes, alone or
// in a batch, records the channel's own time of the event.
func TestClaimsKeepTheChannelTime(t *testing.T) {
	e := newPipelineEnv(t)
	var values [][]byte
	var events []channels.Event
	for i, ch := range channels.Codes() {
		v := channelstest.PaymentEnvelope(channelstest.NewTrade(ch, 700+i), channelstest.Delivery{})
		values = append(values, v)
		events = append(events, e.decode(t, v))
	}
	e.handle(t, values[0])     // a batch of one
	e.handle(t, values[1:]...) // a batch
	for _, ev := range events {
		require.False(t, ev.OccurredAt.IsZero())
		var got struct {
			OccurredAt *time.Time `bun:"occurred_at"`
		}
		require.NoError(t, e.db.NewSelect().Table("ss_channel_idempotent").Column("occurred_at").
			Where("tenant_id = ?", ev.TenantID).Where("idempotent_key = ?", string(ev.Key)).Scan(context.Background(), &got))
		require.NotNil(t, got.OccurredAt, "%s", ev.Key)
		assert.True(t, got.OccurredAt.Equal(ev.OccurredAt), "%s: %s, want %s", ev.Key, got.OccurredAt, ev.OccurredAt)
	}
}
