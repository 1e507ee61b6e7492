package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// runWorker starts the worker through app.Main and returns a function that
// stops it gracefully and returns its registry.
func runWorker(t *testing.T, cfg config.Config) func() *prometheus.Registry {
	t.Helper()
	m, stop := startMain(t, cfg)
	return func() *prometheus.Registry {
		stop()
		return m.Registry
	}
}

// outcomes sums paycb_events_total by outcome.
func outcomes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestReplayThroughTheWorker replays a consumed stream from the earliest
// offsets: every message that made a claim comes back as redelivered, no
// money moves again, and the books still reconcile.
func TestReplayThroughTheWorker(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 2)
	cfg, db := migratedWorker(t, k)

	stream := demo.Generate(demo.StreamOptions{Seed: 7, Trades: 15, NoTraps: true})
	msgs := make([]kafkaops.Message, len(stream.Messages))
	for i, m := range stream.Messages {
		msgs[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
	}
	require.NoError(t, kafkaops.Produce(ctx, k.Brokers, k.Topic, msgs))
	waitConsumed := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		require.NoError(t, kafkaops.WaitConsumed(wctx, k.Brokers, k.Group, k.Topic, 50*time.Millisecond, nil))
	}

	stop := runWorker(t, cfg)
	waitConsumed()
	first := outcomes(t, stop())
	require.InDelta(t, float64(stream.Events), first["acquired"], 0)
	before, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{})
	require.NoError(t, err)

	eventually(t, 20*time.Second, "the group to be empty", func() bool {
		st, err := k.DescribeGroup(ctx)
		return err == nil && len(st.Members) == 0
	})
	plan, err := ops.PlanReplay(ctx, k, ops.ReplayTarget{Earliest: true})
	require.NoError(t, err)
	require.Equal(t, int64(len(msgs)), plan.TotalReplay())
	require.NoError(t, ops.ApplyReplay(ctx, k, plan))

	stop = runWorker(t, cfg)
	waitConsumed()
	second := outcomes(t, stop())
	assert.Zero(t, second["acquired"], "a replay claims nothing new")
	assert.InDelta(t, float64(stream.Events), second["redelivered"], 0, "each message that made a claim comes back as redelivered")
	assert.InDelta(t, float64(len(msgs)), second["redelivered"]+second["duplicate"]+second["ignored"], 0, "every replayed message counted once")
	after, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.Counts(), after.Counts(), "a replay changes nothing reconcile checks")
	assert.Equal(t, before.Examined, after.Examined, "and adds no rows")
}
