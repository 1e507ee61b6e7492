package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/internal/settledpub/settledpubtest"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// sourceKeys are the statement keys the source tests sign with.
func sourceKeys(t *testing.T) statementauth.Keys {
	t.Helper()
	keys, err := statementauth.Parse([]byte("k1=0123456789abcdef0123456789abcdef\n"))
	require.NoError(t, err)
	return keys
}

// checkSource holds ev's settled event and claim to src: the outbox row's
// source column and its value's "source" say src, and the claim's stored
// event carries a "source" member only when src is not a callback (a
// callback's claim is stored as before).
func (e *pipelineEnv) checkSource(t *testing.T, ev channels.Event, src settled.Source) {
	t.Helper()
	var row struct {
		Source string `bun:"source"`
		Value  []byte `bun:"value"`
	}
	require.NoError(t, e.db.NewSelect().Table("ss_settled_outbox").Column("source", "value").
		Where("tenant_id = ?", ev.TenantID).Where("idempotent_key = ?", string(ev.Key)).
		Scan(context.Background(), &row), "%s has its settled event", ev.Key)
	got, err := settled.Decode(row.Value)
	require.NoError(t, err)
	assert.Equal(t, []any{string(src), src}, []any{row.Source, got.Source}, "%s", ev.Key)

	var stored map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(e.claim(t, ev).Event, &stored))
	if src == settled.SourceCallback {
		assert.NotContains(t, stored, "source", "%s: a callback's claim is stored as before", ev.Key)
	} else {
		assert.JSONEq(t, `"`+string(src)+`"`, string(stored["source"]), "%s: the claim records its source", ev.Key)
	}
}

// TestSettledEventsNameTheirSource: a statement line's event settled by the
// pipeline says statement, a callback's says callback, on every path the
// pipeline settles by: a batch of many, batches of one, a merged round of
// several partitions, and the orphan sweeper settling a claim left
// ACQUIRED from the source its claim recorded.
func TestSettledEventsNameTheirSource(t *testing.T) {
	keys := sourceKeys(t)
	for _, tc := range []struct {
		name  string
		batch bool
	}{{"one batch", true}, {"batches of one", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPipelineEnv(t)
			e.p.Decoder = channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(keys))
			stmt, stmtEv := statementMessage(t, channelstest.NewTrade(channels.WeChat, 51), 0, &keys)
			stmt2, stmt2Ev := statementMessage(t, channelstest.NewTrade(channels.SQB, 52), 1, &keys)
			cb := channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 53), channelstest.Delivery{})
			msgs := []kafka.Message{stmt, stmt2, {Topic: "channel-events", Offset: 2, Value: cb}}
			if tc.batch {
				require.NoError(t, e.p.Handle(context.Background(), msgs, make([]MessageState, len(msgs))))
			} else {
				for _, m := range msgs {
					require.NoError(t, e.p.Handle(context.Background(), []kafka.Message{m}, make([]MessageState, 1)))
				}
			}
			e.checkSource(t, stmtEv, settled.SourceStatement)
			e.checkSource(t, stmt2Ev, settled.SourceStatement)
			e.checkSource(t, e.decode(t, cb), settled.SourceCallback)
		})
	}

	t.Run("a merged round", func(t *testing.T) {
		s := newMergeSetup(t)
		// The first partition decoded its batch before it entered its
		// claims; the others decode after this.
		s.env.p.Decoder = channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(keys))
		stmt, stmtEv := statementMessage(t, channelstest.NewTrade(channels.Alipay, 61), 0, &keys)
		stmt.Partition = 1
		cbs := s.payments(2, 2)
		parts := []*partition{s.handleAsync(context.Background(), []kafka.Message{stmt})}
		queued(t, s.env.p.merger(), 1)
		parts = append(parts, s.handleAsync(context.Background(), cbs))
		queued(t, s.env.p.merger(), 2)
		close(s.claims.release)
		require.NoError(t, <-s.first)
		for _, pt := range parts {
			require.NoError(t, <-pt.done)
		}
		require.Equal(t, []int{3}, s.gate.mergedSizes(), "the statement event and the callbacks in one merged transaction")
		s.env.checkSource(t, stmtEv, settled.SourceStatement)
		for _, m := range cbs {
			s.env.checkSource(t, s.env.decode(t, m.Value), settled.SourceCallback)
		}
	})

	t.Run("an orphan the sweeper settles", func(t *testing.T) {
		e := newPipelineEnv(t)
		old := idempotent.NewStore(e.db, idempotent.WithClock(func() time.Time { return time.Now().Add(-time.Minute) }))
		orphan := func(ev channels.Event, src settled.Source, offset int64) {
			_, err := old.Acquire(context.Background(), idempotent.Claim{
				TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint,
				Event:  settlement.AppendStoredEvent(nil, ev, src),
				Source: idempotent.Source{Topic: "channel-events", Partition: 98, Offset: offset},
			})
			require.NoError(t, err)
		}
		_, stmtEv := statementMessage(t, channelstest.NewTrade(channels.WeChat, 71), 0, nil)
		cbEv := e.decode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 72), channelstest.Delivery{}))
		orphan(stmtEv, settled.SourceStatement, 0)
		orphan(cbEv, settled.SourceCallback, 1)
		// A claim stored before claims recorded their source reads as a
		// callback's.
		legacy := e.decode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 73), channelstest.Delivery{}))
		e.claimLeftAcquired(t, legacy)

		notified := &recordingNotifier{}
		sw := &Sweeper{
			Claims: e.claims, Settler: e.svc, Metrics: e.p.Metrics, Logger: e.p.Logger,
			OrphanAfter: 30 * time.Second, Settled: notified,
		}
		n, err := sw.SweepOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 3, n)
		e.checkSource(t, stmtEv, settled.SourceStatement)
		e.checkSource(t, cbEv, settled.SourceCallback)
		e.checkSource(t, legacy, settled.SourceCallback)

		// The sweeper told the publisher of each settlement's events at
		// once: each orphan's own, and the Shouqianba payment's cancel key.
		var keys []string
		for _, r := range notified.all() {
			keys = append(keys, r.Key)
		}
		cancel, err := channels.CancelKey(cbEv.Channel, cbEv.TradeNo)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{string(stmtEv.Key), string(cbEv.Key), string(cancel), string(legacy.Key)}, keys)
	})
}

// recordingNotifier records the refs it is told of.
type recordingNotifier struct {
	mu   sync.Mutex
	refs []settledpub.Ref
}

func (r *recordingNotifier) Notify(refs []settledpub.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs = append(r.refs, refs...)
}

func (r *recordingNotifier) all() []settledpub.Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]settledpub.Ref(nil), r.refs...)
}

// TestSettledEventsAtTheFaultPoints: a settlement's settled events exist
// exactly when it committed. A failure after the claims and before the
// settlement (after-acquire) leaves no event and tells the publisher
// nothing; the retry settles, writes one per event and tells it. A failure
// after the settlement's commit (after-settle, the offset not committed)
// leaves the events written and the publisher told once; the retry finds
// the claims settled and neither writes nor tells again. The publisher
// here never publishes (a process that died before its publisher ran):
// the outbox sweeper puts each event on a real topic (kfake) once, byte
// for byte its row. On the batch path and on batches of one.
func TestSettledEventsAtTheFaultPoints(t *testing.T) {
	for _, point := range []FaultPoint{FaultAfterAcquire, FaultAfterSettle} {
		for _, batch := range []bool{true, false} {
			name := string(point) + "/batches of one"
			if batch {
				name = string(point) + "/one batch"
			}
			t.Run(name, func(t *testing.T) {
				e := newPipelineEnv(t)
				k := kafkaopstest.Start(t, map[string]int32{"settled": 2})
				notified := &recordingNotifier{}
				e.p.Settled = notified
				var failing atomic.Bool
				failing.Store(true)
				crash := errors.New("injected: the process died here")
				e.p.Fault = func(_ context.Context, p FaultPoint) error {
					if p == point && failing.Load() {
						return crash
					}
					return nil
				}
				var msgs []kafka.Message
				var evs []channels.Event
				for i, ch := range channels.Codes() {
					v := channelstest.PaymentEnvelope(channelstest.NewTrade(ch, 90+i), channelstest.Delivery{})
					msgs = append(msgs, kafka.Message{Topic: "channel-events", Offset: int64(i), Value: v})
					evs = append(evs, e.decode(t, v))
				}
				groups := [][]kafka.Message{msgs}
				if !batch {
					groups = nil
					for _, m := range msgs {
						groups = append(groups, []kafka.Message{m})
					}
				}
				states := make([][]MessageState, len(groups))
				for i, g := range groups {
					states[i] = make([]MessageState, len(g))
					require.ErrorIs(t, e.p.Handle(context.Background(), g, states[i]), crash)
				}
				want := []string{}
				for _, ev := range evs {
					want = append(want, string(ev.Key))
				}
				cancel, err := channels.CancelKey(channels.SQB, evs[2].TradeNo)
				require.NoError(t, err)
				want = append(want, string(cancel)) // a Shouqianba payment's settlement may write its cancel's event
				told := func() []string {
					var keys []string
					for _, r := range notified.all() {
						keys = append(keys, r.Key)
					}
					return keys
				}
				if point == FaultAfterAcquire {
					assert.Zero(t, e.outboxRows(t), "no event before the settlement")
					assert.Empty(t, told(), "nothing told to the publisher before the settlement")
				} else {
					assert.Equal(t, int64(len(evs)), e.outboxRows(t), "the committed settlement's events")
					assert.ElementsMatch(t, want, told(), "the settlement told the publisher after its commit")
				}

				failing.Store(false)
				for i, g := range groups {
					require.NoError(t, e.p.Handle(context.Background(), g, states[i]), "the retry in place")
				}
				assert.Equal(t, int64(len(evs)), e.outboxRows(t), "one event per settlement, whatever the retries")
				assert.ElementsMatch(t, want, told(), "told once, by the attempt that settled")

				w := settledpub.NewKafkaWriter(k.Brokers, k.Name("settled"), nil, nil, 0)
				t.Cleanup(func() { _ = w.Close() })
				sw := &settledpub.Sweeper{DB: e.db, Writer: w, Grace: time.Nanosecond}
				_, published, err := sw.Sweep(context.Background())
				require.NoError(t, err)
				assert.Equal(t, len(evs), published)
				pubs := settledpubtest.Read(t, e.db, k.Brokers, k.Name("settled"))
				require.Len(t, pubs, len(evs))
				settledpubtest.RequireOrdered(t, pubs)
				for _, ev := range evs {
					e.checkSource(t, ev, settled.SourceCallback)
				}
			})
		}
	}
}

// outboxRows is how many settled events the outbox holds.
func (e *pipelineEnv) outboxRows(t *testing.T) int64 {
	t.Helper()
	n, err := e.db.NewSelect().Table("ss_settled_outbox").Count(context.Background())
	require.NoError(t, err)
	return n
}
