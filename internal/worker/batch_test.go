package worker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// queryCounter counts the statements a bun.DB sends.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	c.n.Add(1)
	return ctx
}

func (*queryCounter) AfterQuery(context.Context, *bun.QueryEvent) {}

// noDeadLetters fails the test on any dead letter.
type noDeadLetters struct{ t *testing.T }

func (d noDeadLetters) DeadLetter(_ context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error {
	d.t.Errorf("unexpected dead letter at offset %d: %s: %s", msg.Offset, kind, reason)
	return nil
}

// TestReplayedBatchCostsOneRoundTrip: a batch whose every message is a
// duplicate of a settled claim (a replay after an offset reset) costs one
// database statement, the claim lookup, and is counted as redelivered or
// duplicate.
func TestReplayedBatchCostsOneRoundTrip(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	counter := &queryCounter{}
	db = db.WithQueryHook(counter)
	claims := idempotent.NewStore(db)
	reg := prometheus.NewRegistry()
	svc, err := settlement.New(db, claims, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	met, err := metrics.New(reg)
	require.NoError(t, err)
	p := &Pipeline{
		Decoder: channels.NewDecoder(channelstest.Keys()), Claims: claims, Settler: svc,
		DeadLetterer: noDeadLetters{t}, Metrics: met, Logger: slog.New(slog.DiscardHandler),
	}

	var msgs []kafka.Message
	add := func(v []byte) {
		msgs = append(msgs, kafka.Message{Topic: "channel-events", Partition: 0, Offset: int64(len(msgs)), Value: v})
	}
	for i, ch := range []channels.Channel{channels.WeChat, channels.Alipay, channels.SQB} {
		tr := channelstest.NewTrade(ch, 300+i)
		refund := channelstest.Refund{No: "R1", Amount: 1000, Cumulative: 1000, At: tr.PaidAt.Add(1 << 40)}
		add(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		add(channelstest.PaymentEnvelope(tr, channelstest.Delivery{Attempt: 1})) // a channel retry
		add(channelstest.RefundEnvelope(tr, refund, channelstest.Delivery{}))
	}
	ctx := context.Background()
	require.NoError(t, p.HandleBatch(ctx, msgs, make([]MessageState, len(msgs))))

	before := counter.n.Load()
	states := make([]MessageState, len(msgs))
	require.NoError(t, p.HandleBatch(ctx, msgs, states), "the replay")
	assert.Equal(t, int64(1), counter.n.Load()-before, "one statement for a batch of duplicates")
	for i, st := range states {
		assert.True(t, st.done, "message %d", i)
	}
	outcomes := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					outcomes[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	assert.InDelta(t, 6, outcomes["acquired"], 0, "the first pass: six events")
	assert.InDelta(t, 6, outcomes["redelivered"], 0, "the replay: each event's own message again")
	assert.InDelta(t, 3+3, outcomes["duplicate"], 0, "the channel retries, in both passes")
}
