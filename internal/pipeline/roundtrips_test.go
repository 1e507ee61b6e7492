package pipeline

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// countedPipeline is a pipeline on MariaDB whose statements are counted.
func countedPipeline(t *testing.T) (*Pipeline, *sqldbtest.StatementCounter, *idempotent.Store) {
	t.Helper()
	counter := &sqldbtest.StatementCounter{}
	db := sqldbtest.MustMySQL(t).WithQueryHook(counter)
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
	// What the pipeline and the service ask the server once (its largest
	// statement, its engine) is asked now, not in the counts.
	warm := kafka.Message{Topic: "warm-up", Value: channelstest.PaymentEnvelope(channelstest.NewTrade(channels.WeChat, 999), channelstest.Delivery{})}
	require.NoError(t, p.Handle(context.Background(), []kafka.Message{warm}, make([]MessageState, 1)))
	return p, counter, claims
}

// TestANewEventAloneCostsItsWritesOnly: at steady load most batches hold
// one new event, often of a trade seen for the first time. Its statements
// are the claim's insert, then one transaction: BEGIN, the read of its
// order row (absent), the row's insert with its final values (no
// read-back, no update), the update that makes the payment registration
// of its merchant order number SUCCEEDED (if there is one: the
// registration and the callback may come in either order, design.md), the
// ledger rows' insert, its settled event's insert into the outbox, the
// fence and COMMIT: 9.
// A Shouqianba payment whose order row the transaction created
// reads no cancel claim: a cancel settled before would have created the
// row.
func TestANewEventAloneCostsItsWritesOnly(t *testing.T) {
	p, counter, _ := countedPipeline(t)
	ctx := context.Background()
	for i, ch := range channels.Codes() {
		tr := channelstest.NewTrade(ch, 700+i)
		msg := kafka.Message{Topic: "channel-events", Partition: 0, Offset: int64(i), Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{})}
		before := counter.Count()
		states := make([]MessageState, 1)
		require.NoError(t, p.Handle(ctx, []kafka.Message{msg}, states))
		require.True(t, states[0].done)
		assert.Equal(t, int64(9), counter.Count()-before, "%s: statements for a new payment of a new trade", ch)
	}
}

// TestAHeldDuplicateIsLookedAtWithOneStatement: a channel retry that finds
// the claim another message made moments ago (being settled right now)
// is held; each later look at it is the claim's lookup alone, not a
// refused insert and a read.
func TestAHeldDuplicateIsLookedAtWithOneStatement(t *testing.T) {
	p, counter, claims := countedPipeline(t)
	ctx := context.Background()
	tr := channelstest.NewTrade(channels.Alipay, 710)
	value := channelstest.PaymentEnvelope(tr, channelstest.Delivery{Attempt: 1})
	res, err := p.Decoder.DecodeMessage(value, "")
	require.NoError(t, err)
	ev := res.Event
	r, err := claims.Acquire(ctx, idempotent.Claim{
		TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint,
		Event: []byte(`{}`), Source: idempotent.Source{Topic: "channel-events", Partition: 5, Offset: 1},
	})
	require.NoError(t, err)
	require.Equal(t, idempotent.Acquired, r.Kind)

	msgs := []kafka.Message{{Topic: "channel-events", Partition: 0, Offset: 0, Value: value}}
	states := make([]MessageState, 1)
	before := counter.Count()
	require.ErrorIs(t, p.Handle(ctx, msgs, states), ErrClaimInFlight)
	assert.Equal(t, int64(2), counter.Count()-before, "the first look: the insert the index refuses, and the claim's read")
	for look := range 3 {
		before = counter.Count()
		require.ErrorIs(t, p.Handle(ctx, msgs, states), ErrClaimInFlight)
		assert.Equal(t, int64(1), counter.Count()-before, "look %d: the lookup alone", look+2)
		assert.False(t, states[0].done)
	}
}
