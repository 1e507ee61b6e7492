package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/schema"
)

// deadLetterAt is one dead letter a recordingDeadLetterer took.
type deadLetterAt struct {
	Offset int64
	Kind   channels.ErrorKind
}

// recordingDeadLetterer keeps the dead letters written.
type recordingDeadLetterer struct {
	mu  sync.Mutex
	got []deadLetterAt
}

func (d *recordingDeadLetterer) DeadLetter(_ context.Context, msg kafka.Message, kind channels.ErrorKind, _ string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, deadLetterAt{msg.Offset, kind})
	return nil
}

func (d *recordingDeadLetterer) letters() []deadLetterAt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]deadLetterAt(nil), d.got...)
}

// pipelineEnv is a Pipeline on its own MariaDB database.
type pipelineEnv struct {
	db      *bun.DB
	claims  *idempotent.Store
	svc     *settlement.Service
	reg     *prometheus.Registry
	dl      *recordingDeadLetterer
	p       *Pipeline
	batches int
}

func newPipelineEnv(tb testing.TB) *pipelineEnv {
	tb.Helper()
	return newPipelineEnvOn(tb, sqldbtest.MustMySQL(tb))
}

// newPipelineEnvOn is newPipelineEnv on the migrated database db.
func newPipelineEnvOn(tb testing.TB, db *bun.DB) *pipelineEnv {
	tb.Helper()
	claims := idempotent.NewStore(db)
	reg := prometheus.NewRegistry()
	svc, err := settlement.New(db, claims, slog.New(slog.DiscardHandler), reg)
	require.NoError(tb, err)
	met, err := metrics.New(reg)
	require.NoError(tb, err)
	dl := &recordingDeadLetterer{}
	return &pipelineEnv{db: db, claims: claims, svc: svc, reg: reg, dl: dl, p: &Pipeline{
		Decoder: channels.NewDecoder(channelstest.Keys()), Claims: claims, Settler: svc,
		DeadLetterer: dl, Metrics: met, Logger: slog.New(slog.DiscardHandler),
	}}
}

// handle hands values to the pipeline as one batch, at offsets 0, 1, …
// of a topic of its own per call, and returns the states.
func (e *pipelineEnv) handle(t *testing.T, values ...[]byte) []MessageState {
	t.Helper()
	e.batches++
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Topic: "channel-events", Partition: e.batches, Offset: int64(i), Value: v}
	}
	states := make([]MessageState, len(msgs))
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
	for i, st := range states {
		require.True(t, st.done, "message %d done", i)
	}
	return states
}

func (e *pipelineEnv) decode(t *testing.T, v []byte) channels.Event {
	t.Helper()
	res, err := e.p.Decoder.DecodeMessage(v, "")
	require.NoError(t, err)
	return res.Event
}

// claimLeftAcquired claims ev as a message long gone would have, a minute
// ago (past InFlightGrace), and settles nothing: a crash after the claim.
func (e *pipelineEnv) claimLeftAcquired(t *testing.T, ev channels.Event) {
	t.Helper()
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	old := idempotent.NewStore(e.db, idempotent.WithClock(func() time.Time { return time.Now().Add(-time.Minute) }))
	r, err := old.Acquire(context.Background(), idempotent.Claim{
		TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body,
		Source: idempotent.Source{Topic: "channel-events", Partition: 99, Offset: 7},
	})
	require.NoError(t, err)
	require.Equal(t, idempotent.Acquired, r.Kind)
}

func (e *pipelineEnv) claim(t *testing.T, ev channels.Event) idempotent.Record {
	t.Helper()
	rec, err := e.claims.Get(context.Background(), ev.TenantID, ev.Key)
	require.NoError(t, err)
	return rec
}

// TestConflictingCopyFirstStillLetsTheMatchingCopyFinishTheClaim: a batch
// holding a conflicting copy of key K and then a matching channel retry of
// K decides each as it would alone: the conflict is dead-lettered, and the
// matching copy settles K's ACQUIRED claim through the fence, or writes
// the over-refund dead letter K's settlement left pending.
func TestConflictingCopyFirstStillLetsTheMatchingCopyFinishTheClaim(t *testing.T) {
	t.Run("ACQUIRED claim", func(t *testing.T) {
		e := newPipelineEnv(t)
		tr := channelstest.NewTrade(channels.SQB, 501)
		ev := e.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		e.claimLeftAcquired(t, ev)

		other := tr
		other.Total = 9999 // the same key, another amount: a conflict
		e.handle(t,
			channelstest.PaymentEnvelope(other, channelstest.Delivery{}),
			channelstest.PaymentEnvelope(tr, channelstest.Delivery{Attempt: 1}))

		assert.Equal(t, []deadLetterAt{{0, channels.KindConflict}}, e.dl.letters())
		rec := e.claim(t, ev)
		assert.Equal(t, idempotent.StatusSettled, rec.Status, "the matching copy settled the claim")
		assert.Equal(t, idempotent.OutcomePosted, rec.Outcome)
		ord, err := settlement.GetOrder(context.Background(), e.db, tr.TenantID, tr.Channel, tr.TradeNo)
		require.NoError(t, err)
		assert.Equal(t, tr.Total, ord.PaidAmount, "paid with the claimed amount")
	})

	t.Run("pending over-refund dead letter", func(t *testing.T) {
		e := newPipelineEnv(t)
		ctx := context.Background()
		tr := channelstest.NewTrade(channels.WeChat, 502)
		e.handle(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		refund := channelstest.Refund{No: "RF-502", Amount: tr.Total + 1}
		ev := e.decode(t, channelstest.WeChatRefund(tr, refund, "SUCCESS", channelstest.Delivery{}))
		// Claimed and settled OVER_REFUND by a worker that died before
		// its dead letter.
		e.claimLeftAcquired(t, ev)
		res, err := e.svc.Settle(ctx, ev)
		require.NoError(t, err)
		require.Equal(t, idempotent.OutcomeOverRefund, res.Outcome)
		require.Nil(t, e.claim(t, ev).DeadLetteredAt)

		conflicting := refund
		conflicting.Amount = tr.Total + 2
		e.handle(t,
			channelstest.WeChatRefund(tr, conflicting, "SUCCESS", channelstest.Delivery{}),
			channelstest.WeChatRefund(tr, refund, "SUCCESS", channelstest.Delivery{Attempt: 1}))

		assert.Equal(t, []deadLetterAt{{0, channels.KindConflict}, {1, channels.KindOverRefund}}, e.dl.letters())
		assert.NotNil(t, e.claim(t, ev).DeadLetteredAt, "the over-refund dead letter is recorded")
	})
}

// TestRefundStatusUpdatesApplyInOffsetOrder: WeChat REFUND.SUCCESS at
// offset 0 and REFUND.CLOSED of the same refund at offset 1 in one batch
// end as they would one at a time: the success settles and moves the
// registration to SUCCEEDED, and the later CLOSED changes nothing.
func TestRefundStatusUpdatesApplyInOffsetOrder(t *testing.T) {
	e := newPipelineEnv(t)
	ctx := context.Background()
	tr := channelstest.NewTrade(channels.WeChat, 503)
	e.handle(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
	refund := channelstest.Refund{No: "RF-503", Amount: 1000}
	_, err := e.svc.RegisterRefund(ctx, settlement.RefundRequest{
		TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: refund.No, Amount: refund.Amount,
	})
	require.NoError(t, err)

	e.handle(t,
		channelstest.WeChatRefund(tr, refund, "SUCCESS", channelstest.Delivery{}),
		channelstest.WeChatRefund(tr, refund, "CLOSED", channelstest.Delivery{}))

	reg, err := e.svc.GetRegistration(ctx, tr.TenantID, tr.Channel, tr.TradeNo, refund.No)
	require.NoError(t, err)
	assert.Equal(t, settlement.RegistrationSucceeded, reg.Status)
	n, err := testutil.GatherAndCount(e.reg, "paycb_refund_registration_mismatch_total")
	require.NoError(t, err)
	require.Positive(t, n)
	assert.Zero(t, mismatches(t, e.reg, settlement.MismatchClosed), "no refund succeeded on a CLOSED registration")
	assert.Empty(t, e.dl.letters())
}

// mismatches reads paycb_refund_registration_mismatch_total{reason}.
func mismatches(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "paycb_refund_registration_mismatch_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no paycb_refund_registration_mismatch_total{reason=%q}", reason)
	return 0
}

// TestBatchOverMaxAllowedPacketIsSplit: on a server whose
// max_allowed_packet (16 KiB) is far below what a batch of 120 payments'
// statements would take whole, the batch is settled as several runs in
// order, and every event is claimed and posted once.
func TestBatchOverMaxAllowedPacketIsSplit(t *testing.T) {
	srv := sqldbtest.StartServer(t, "--max-allowed-packet=16384")
	db, err := sqldb.OpenMySQL(srv.CreateDatabase(t, "paycb_packet"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	_, err = schema.Migrate(ctx, db)
	require.NoError(t, err)

	e := newPipelineEnvOn(t, db)
	limit, err := e.claims.MaxStatementBytes(ctx)
	require.NoError(t, err)
	require.Less(t, limit, 16384, "read from the server")

	const n = 120
	values := make([][]byte, 0, n)
	var bytes int
	for i := range n {
		tr := channelstest.NewTrade(channels.Codes()[i%len(channels.Codes())], 600+i)
		tr.MerchantOrderNo = fmt.Sprintf("POS-%058d", i) // long fields: big rows
		values = append(values, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		bytes += len(values[i])
	}
	require.Greater(t, bytes, 4*16384, "the batch's rows exceed the packet several times over")
	e.handle(t, values...)

	var claims, ledger int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_channel_idempotent WHERE status = 'SETTLED'").Scan(ctx, &claims))
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_ledger_entry").Scan(ctx, &ledger))
	assert.Equal(t, n, claims)
	assert.Equal(t, 2*n, ledger)
	assert.Empty(t, e.dl.letters())
}

// eventsCounted sums paycb_events_total, of outcome or of every outcome
// ("").
func eventsCounted(t *testing.T, reg *prometheus.Registry, outcome string) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && (outcome == "" || l.GetValue() == outcome) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}
