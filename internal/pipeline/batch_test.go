package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

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
	counter := &sqldbtest.StatementCounter{}
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
	for i, ch := range channels.Codes() {
		tr := channelstest.NewTrade(ch, 300+i)
		refund := channelstest.Refund{No: "R1", Amount: 1000, Cumulative: 1000, At: tr.PaidAt.Add(1 << 40)}
		add(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		add(channelstest.PaymentEnvelope(tr, channelstest.Delivery{Attempt: 1})) // a channel retry
		add(channelstest.RefundEnvelope(tr, refund, channelstest.Delivery{}))
	}
	ctx := context.Background()
	require.NoError(t, p.Handle(ctx, msgs, make([]MessageState, len(msgs))))

	before := counter.Count()
	states := make([]MessageState, len(msgs))
	require.NoError(t, p.Handle(ctx, msgs, states), "the replay")
	assert.Equal(t, int64(1), counter.Count()-before, "one statement for a batch of duplicates")
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

// partialSettler answers SettleBatchFrom with the first event settled and the
// rest left, as a batch whose second transaction failed does, and counts
// the single settlements asked of it.
type partialSettler struct {
	Settler
	single []idempotent.Key
}

func (s *partialSettler) SettleBatchFrom(_ context.Context, evs []channels.Event, _ []settled.Source) ([]settlement.Result, error) {
	res := make([]settlement.Result, len(evs))
	res[0] = settlement.Result{Outcome: idempotent.OutcomePosted, Amount: evs[0].OrderTotal, SettledAt: time.Now()}
	return res, fmt.Errorf("settle batch: %w: busy rows", settlement.ErrBatchIncomplete)
}

func (s *partialSettler) SettleFrom(_ context.Context, ev channels.Event, _ settled.Source) (settlement.Result, error) {
	s.single = append(s.single, ev.Key)
	return settlement.Result{Outcome: idempotent.OutcomePosted, Amount: ev.OrderTotal, SettledAt: time.Now()}, nil
}

func TestSettleFreshKeepsWhatAPartBatchSettled(t *testing.T) {
	dec := channels.NewDecoder(channelstest.Keys())
	var leaders []moneyItem
	for i := range 3 {
		res, err := dec.Decode(channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 400+i), channelstest.Delivery{}))
		require.NoError(t, err)
		leaders = append(leaders, moneyItem{i: i, ev: res.Event})
	}
	s := &partialSettler{}
	p := &Pipeline{Settler: s, Logger: slog.New(slog.DiscardHandler)}
	out := p.settleFresh(context.Background(), leaders, []int{0, 1, 2})
	require.Len(t, out, 3)
	for n, o := range out {
		require.NoError(t, o.err, "event %d", n)
		assert.Equal(t, idempotent.OutcomePosted, o.res.Outcome, "event %d", n)
	}
	assert.Equal(t, []idempotent.Key{leaders[1].ev.Key, leaders[2].ev.Key}, s.single,
		"only the events the batch left are settled one by one")
}
