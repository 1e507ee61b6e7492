package invariant_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/invariant"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sim"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// TestCheckerCatchesEveryBrokenInvariant consumes a stream cleanly, checks
// that the checker passes it, then breaks the result one way at a time
// (inside a transaction that is rolled back) and checks that the checker
// says so: a checker that cannot fail proves nothing.
func TestCheckerCatchesEveryBrokenInvariant(t *testing.T) {
	stream, sch := sim.Plan(42)
	sch.Steps, sch.Chunks = nil, []int{0} // no faults: every message handled once
	env := sim.NewEnv(t, sch.Partitions)
	ctx := context.Background()
	res, err := sim.Run(ctx, env, stream, sch)
	require.NoError(t, err)
	require.NoError(t, res.Report.Err())
	assert.Equal(t, len(stream.Messages), int(res.Report.Counted), "fault-free: every message counted once")
	assert.Zero(t, res.Report.Recounted)

	check := func(t *testing.T, db bun.IDB, s demo.Stream, opts ...invariant.Option) invariant.Report {
		t.Helper()
		rep, err := invariant.Check(ctx, db, env.Brokers, sim.DLQ, s, opts...)
		require.NoError(t, err)
		return rep
	}
	tampered := func(t *testing.T, tamper string, args ...any) invariant.Report {
		t.Helper()
		tx, err := env.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		_, err = tx.ExecContext(ctx, tamper, args...)
		require.NoError(t, err)
		return check(t, tx, stream)
	}
	var posted struct {
		TenantID int64  `bun:"tenant_id"`
		Key      string `bun:"idempotent_key"`
	}
	require.NoError(t, env.DB.NewSelect().Table("ss_channel_idempotent").Column("tenant_id", "idempotent_key").
		Where("settle_outcome = 'POSTED'").Limit(1).Scan(ctx, &posted))

	t.Run("claim missing: lost", func(t *testing.T) {
		rep := tampered(t, "DELETE FROM ss_channel_idempotent WHERE tenant_id = ? AND idempotent_key = ?", posted.TenantID, posted.Key)
		assert.Equal(t, 1, rep.Lost)
		assert.False(t, rep.OK())
	})
	t.Run("claim left ACQUIRED", func(t *testing.T) {
		rep := tampered(t, "UPDATE ss_channel_idempotent SET status = 'ACQUIRED', settle_outcome = NULL WHERE tenant_id = ? AND idempotent_key = ?", posted.TenantID, posted.Key)
		assert.Equal(t, 1, rep.Acquired)
		assert.Equal(t, 1, rep.Lost)
	})
	t.Run("posting missing: lost", func(t *testing.T) {
		rep := tampered(t, "DELETE FROM ss_ledger_entry WHERE tenant_id = ? AND idempotent_key = ?", posted.TenantID, posted.Key)
		assert.Equal(t, 1, rep.Lost)
		assert.NotEmpty(t, rep.Reconcile.Discrepancies)
	})
	t.Run("posted twice", func(t *testing.T) {
		rep := tampered(t, `INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, account, direction, amount, currency, created_at)
			SELECT tenant_id, idempotent_key, channel_code, channel_trade_no, CONCAT(account, '#2'), direction, amount, currency, created_at
			FROM ss_ledger_entry WHERE tenant_id = ? AND idempotent_key = ?`, posted.TenantID, posted.Key)
		assert.Equal(t, 1, rep.Doubled)
	})
	t.Run("claim the stream never carried", func(t *testing.T) {
		rep := tampered(t, `INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, settle_outcome, fingerprint, created_at, settled_at)
			VALUES (?, 'SQB:nope:PAYMENT_RECEIVED', 'PAYMENT_RECEIVED', 'SETTLED', 'NO_MONEY', 'x', NOW(6), NOW(6))`, posted.TenantID)
		assert.Equal(t, 1, rep.Unexpected)
	})
	t.Run("dead letter missing", func(t *testing.T) {
		s := stream
		s.Messages = append(append([]demo.Message(nil), stream.Messages...), demo.Message{Value: []byte("not json")})
		s.Malformed++
		rep := check(t, env.DB, s)
		assert.Contains(t, rep.Err().Error(), "dead letter malformed missing")
	})
	t.Run("tenant paid more than the ledger shows", func(t *testing.T) {
		s := stream
		s.Paid = map[int64]int64{}
		for k, v := range stream.Paid {
			s.Paid[k] = v + 1
		}
		assert.False(t, check(t, env.DB, s).OK())
	})
	t.Run("a message counted twice though none was handled twice", func(t *testing.T) {
		extra := prometheus.NewRegistry()
		m, err := metrics.New(extra)
		require.NoError(t, err)
		m.Event("SQB", "PAYMENT_RECEIVED", metrics.OutcomeAcquired)
		regs := []prometheus.Gatherer{extra}
		rep := check(t, env.DB, stream, invariant.WithMetrics(regs...), invariant.Exact())
		// Only the extra registry: every outcome is short but one.
		assert.False(t, rep.OK())
	})
}

func TestSweepOrphansSettlesWhatWasLeftAcquired(t *testing.T) {
	stream, sch := sim.Plan(43)
	sch.Steps, sch.Chunks = nil, []int{0}
	env := sim.NewEnv(t, sch.Partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := sim.Run(ctx, env, stream, sch)
	require.NoError(t, err)

	// One more payment is claimed, as by a worker that died before settling
	// it and whose message was skipped: an orphan only the sweeper settles.
	trade := channelstest.NewTrade(channels.SQB, 9_999_999)
	value := channelstest.PaymentEnvelope(trade, channelstest.Delivery{})
	res, err := channels.NewDecoder(channels.StaticKeys{Default: channelstest.APIv3Key}).Decode(value)
	require.NoError(t, err)
	body, err := json.Marshal(res.Event)
	require.NoError(t, err)
	_, err = idempotent.NewStore(env.DB).Acquire(ctx, idempotent.Claim{
		TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
		Fingerprint: res.Event.Fingerprint, Event: body, Source: idempotent.NoSource,
	})
	require.NoError(t, err)
	withOrphan := stream
	withOrphan.Messages = append(append([]demo.Message(nil), stream.Messages...), demo.Message{Value: value})
	withOrphan.Events++
	withOrphan.Paid = map[int64]int64{}
	for k, v := range stream.Paid {
		withOrphan.Paid[k] = v
	}
	withOrphan.Paid[trade.TenantID] += trade.Total

	rep, err := invariant.Check(ctx, env.DB, env.Brokers, sim.DLQ, withOrphan)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Acquired)
	require.Equal(t, 1, rep.Lost)

	n, err := invariant.SweepOrphans(ctx, env.DB)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	rep, err = invariant.Check(ctx, env.DB, env.Brokers, sim.DLQ, withOrphan)
	require.NoError(t, err)
	assert.NoError(t, rep.Err())
}
