package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// The Shouqianba terminal channelstest's callbacks name, bound to tenant
// 1001 in these tests.
const sqbTestTerminal = "01939202039923029"

// merchantlessEnv is a pipeline on its own MariaDB database with a merchant
// binding that gives tenant 1001 the channelstest Shouqianba terminal.
type merchantlessEnv struct {
	*pipelineEnv
	dl      *reasonDeadLetterer
	path    string
	binding *merchantbinding.File
	offset  int64
}

func newMerchantlessEnv(t *testing.T) *merchantlessEnv {
	t.Helper()
	e := &merchantlessEnv{pipelineEnv: newPipelineEnv(t), dl: &reasonDeadLetterer{}}
	e.p.DeadLetterer = e.dl
	e.path = filepath.Join(t.TempDir(), "merchants")
	writeBinding(t, e.path, "1001 SQB "+sqbTestTerminal+"\n")
	f, err := merchantbinding.Load(e.path)
	require.NoError(t, err)
	e.binding = f
	e.p.Merchants = f
	return e
}

// rebind replaces the binding's contents and re-reads it.
func (e *merchantlessEnv) rebind(t *testing.T, contents string) {
	t.Helper()
	writeBinding(t, e.path, contents)
	_, err := e.binding.Refresh()
	require.NoError(t, err)
}

// messages makes Kafka messages of values at the next offsets.
func (e *merchantlessEnv) messages(values ...[]byte) []kafka.Message {
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Topic: "channel-events", Partition: 0, Offset: e.offset, Value: v}
		e.offset++
	}
	return msgs
}

// handleAll hands values to the pipeline as one batch and requires every
// message done.
func (e *merchantlessEnv) handleAll(t *testing.T, values ...[]byte) {
	t.Helper()
	msgs := e.messages(values...)
	states := make([]MessageState, len(msgs))
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
	for i, st := range states {
		require.True(t, st.done, "message %d done", i)
	}
}

// published reads a published Shouqianba answer and wraps it, as the
// receiver forwards it, in an envelope of tenant.
func published(t *testing.T, name string, tenant int64) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "pkg", "channels", "sqb", "testdata", "published", "sqb", name))
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body))
	_, hasTerminal := body["biz_response"].(map[string]any)["data"].(map[string]any)["terminal_sn"]
	require.False(t, hasTerminal, "the published answer names no terminal")
	return channelstest.Envelope(tenant, channels.SQB, string(raw), channelstest.BaseTime)
}

// forwardedRefund is the refund answer of r of tr as the receiver forwards
// it: biz_response.data, without terminal_sn.
func forwardedRefund(tr channelstest.Trade, r channelstest.Refund) []byte {
	return channelstest.SQBRefund(tr, r, channelstest.Delivery{
		SQB: channelstest.SQBAPIResponse, Edit: func(m map[string]any) { delete(m, "terminal_sn") },
	})
}

func (e *merchantlessEnv) order(t *testing.T, tr channelstest.Trade) settlement.Order {
	t.Helper()
	ord, err := settlement.GetOrder(context.Background(), e.db, tr.TenantID, tr.Channel, tr.TradeNo)
	require.NoError(t, err)
	return ord
}

func (e *merchantlessEnv) claimCount(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.NewRaw("SELECT COUNT(*) FROM ss_channel_idempotent").Scan(context.Background(), &n))
	return n
}

// TestMerchantlessSQBRefundOfABoundPayment: with a merchant binding, a
// Shouqianba refund or cancel answer forwarded without terminal_sn (the
// published shapes) settles when its trade's payment was checked and bound
// to the tenant, which the order row records; the check is not weakened:
// a trade whose payment was checked for a merchant now bound elsewhere, or
// never checked, is still refused tenant_mismatch, nothing claimed.
func TestMerchantlessSQBRefundOfABoundPayment(t *testing.T) {
	// The published refund answer: sn 7894259244067218, client_sn
	// 12345677767776, REFUNDED, total_amount 1, net_amount 0.
	refunded := channelstest.Trade{
		TenantID: 1001, Channel: channels.SQB, TradeNo: "7894259244067218",
		MerchantOrderNo: "12345677767776", Total: 1,
	}

	t.Run("the published refund answer after its checked payment settles", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		e.handleAll(t, channelstest.SQBPayment(refunded, channelstest.Delivery{}))
		assert.Equal(t, sqbTestTerminal, e.order(t, refunded).BoundMerchantID, "the order row records the merchant checked")
		e.handleAll(t, published(t, "core_refund_success_response.json", 1001))
		assert.Empty(t, e.dl.letters())
		ord := e.order(t, refunded)
		assert.Equal(t, int64(1), ord.RefundedAmount)
		assert.Equal(t, settlement.OrderRefunded, ord.Status)
	})

	t.Run("the published cancel answer, before and after its payment, nets the trade to zero", func(t *testing.T) {
		// sn 7894259244064831, client_sn 22345677767776, CANCELED, total 1.
		cancelled := channelstest.Trade{
			TenantID: 1001, Channel: channels.SQB, TradeNo: "7894259244064831",
			MerchantOrderNo: "22345677767776", Total: 1,
		}
		for _, cancelFirst := range []bool{true, false} {
			e := newMerchantlessEnv(t)
			cancel, pay := published(t, "core_cancel_success_response.json", 1001), channelstest.SQBPayment(cancelled, channelstest.Delivery{})
			if cancelFirst {
				e.handleAll(t, cancel) // no payment posted: posts nothing, remembered by its claim
				e.handleAll(t, pay)
			} else {
				e.handleAll(t, pay)
				e.handleAll(t, cancel)
			}
			assert.Empty(t, e.dl.letters(), "cancel first: %v", cancelFirst)
			ord := e.order(t, cancelled)
			assert.Equal(t, int64(1), ord.PaidAmount, "cancel first: %v", cancelFirst)
			assert.Equal(t, int64(1), ord.RefundedAmount, "cancel first: %v", cancelFirst)
			assert.Equal(t, sqbTestTerminal, ord.BoundMerchantID)
		}
	})

	t.Run("a payment checked for a merchant now bound to another tenant", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		e.handleAll(t, channelstest.SQBPayment(refunded, channelstest.Delivery{}))
		e.rebind(t, "2002 SQB "+sqbTestTerminal+"\n")
		e.handleAll(t, published(t, "core_refund_success_response.json", 1001))
		assert.Equal(t, []string{"tenant_mismatch: the SQB refund 1 of trade 7894259244067218 (tenant 1001) names no merchant " +
			"(terminal_sn: a forwarded refund or cancel answer), and its payment was checked for merchant " + sqbTestTerminal +
			", which " + e.path + " now binds to tenant 2002"}, e.dl.letters())
		assert.Zero(t, e.order(t, refunded).RefundedAmount, "nothing posted")
		assert.Equal(t, 1, e.claimCount(t), "only the payment is claimed")
	})

	t.Run("a payment rebuilt from its statement line records the line's terminal", func(t *testing.T) {
		for _, bound := range []bool{true, false} {
			e := newMerchantlessEnv(t)
			terminal := sqbTestTerminal
			if !bound {
				terminal = "01939202039923030" // bound to no tenant: nothing recorded
			}
			e.handleSigned(t, statementPayment(t, refunded, terminal))
			ord := e.order(t, refunded)
			require.Equal(t, int64(1), ord.PaidAmount)
			e.handleAll(t, published(t, "core_refund_success_response.json", 1001))
			if !bound {
				assert.Empty(t, ord.BoundMerchantID)
				require.Len(t, e.dl.letters(), 1)
				assert.Contains(t, e.dl.letters()[0], "the trade's payment was posted without a merchant check")
				continue
			}
			assert.Equal(t, sqbTestTerminal, ord.BoundMerchantID, "the statement line's terminal, checked at import")
			assert.Empty(t, e.dl.letters(), "the refund is checked against the rebuilt payment's terminal")
			assert.Equal(t, int64(1), e.order(t, refunded).RefundedAmount)
		}
	})

	t.Run("a payment posted without a merchant check", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		e.p.Merchants = nil // settled before the binding
		e.handleAll(t, channelstest.SQBPayment(refunded, channelstest.Delivery{}))
		assert.Empty(t, e.order(t, refunded).BoundMerchantID)
		e.p.Merchants = e.binding
		e.handleAll(t, published(t, "core_refund_success_response.json", 1001))
		letters := e.dl.letters()
		require.Len(t, letters, 1)
		assert.Contains(t, letters[0], "tenant_mismatch: the SQB refund 1 of trade 7894259244067218 (tenant 1001) names no merchant")
		assert.Contains(t, letters[0], "the trade's payment was posted without a merchant check")
		assert.Zero(t, e.order(t, refunded).RefundedAmount)
	})

	t.Run("another tenant's envelope of the refund answer", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		e.p.MerchantlessHold = time.Nanosecond
		e.handleAll(t, channelstest.SQBPayment(refunded, channelstest.Delivery{}))
		msgs := e.messages(published(t, "core_refund_success_response.json", 2002))
		states := make([]MessageState, 1)
		require.ErrorIs(t, e.p.Handle(context.Background(), msgs, states), ErrClaimInFlight, "held: tenant 2002 has no such payment yet")
		require.NoError(t, e.p.Handle(context.Background(), msgs, states))
		letters := e.dl.letters()
		require.Len(t, letters, 1)
		assert.Contains(t, letters[0], "tenant_mismatch: the SQB refund 1 of trade 7894259244067218 (tenant 2002) names no merchant")
		assert.Zero(t, e.order(t, refunded).RefundedAmount, "tenant 1001's order is untouched")
		assert.Equal(t, 1, e.claimCount(t), "nothing of tenant 2002 is claimed")
	})
}

// TestMerchantlessSQBRefundBeforeItsPayment: a merchant-less refund that
// overtakes its payment is held, nothing claimed and the partition going
// on, and settles once the payment is in, ending in the same rows as in
// order; held past MerchantlessHold it is dead-lettered, never posted,
// and a redrive after the payment settles it.
func TestMerchantlessSQBRefundBeforeItsPayment(t *testing.T) {
	tr := channelstest.NewTrade(channels.SQB, 961)
	refund := forwardedRefund(tr, channelstest.Refund{No: "R1", Cumulative: 1000})
	pay := channelstest.SQBPayment(tr, channelstest.Delivery{})

	inOrder := newMerchantlessEnv(t)
	inOrder.handleAll(t, pay)
	inOrder.handleAll(t, refund)
	want := inOrder.order(t, tr)
	require.Equal(t, int64(1000), want.RefundedAmount)

	t.Run("in one batch, the refund first", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		msgs := e.messages(refund, pay)
		states := make([]MessageState, 2)
		err := e.p.Handle(context.Background(), msgs, states)
		require.ErrorIs(t, err, ErrClaimInFlight, "the refund waits for its payment")
		assert.Contains(t, err.Error(), "held up to 30s")
		assert.False(t, states[0].done)
		assert.True(t, states[1].done, "the payment behind it is not held up")
		require.NoError(t, e.p.Handle(context.Background(), msgs, states), "the payment is in: the refund settles")
		assert.True(t, states[0].done)
		got := e.order(t, tr)
		assert.Equal(t, want.PaidAmount, got.PaidAmount)
		assert.Equal(t, want.RefundedAmount, got.RefundedAmount)
		assert.Equal(t, want.Status, got.Status)
		assert.Empty(t, e.dl.letters())
	})

	t.Run("held past the hold, dead-lettered, then redriven", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		e.p.MerchantlessHold = time.Nanosecond
		msgs := e.messages(refund)
		states := make([]MessageState, 1)
		require.ErrorIs(t, e.p.Handle(context.Background(), msgs, states), ErrClaimInFlight)
		assert.Zero(t, e.claimCount(t), "nothing claimed while held")
		require.NoError(t, e.p.Handle(context.Background(), msgs, states))
		assert.Equal(t, []string{"tenant_mismatch: the SQB refund R1 of trade " + tr.TradeNo + " (tenant 1001) names no merchant " +
			"(terminal_sn: a forwarded refund or cancel answer), and no payment of the trade checked and bound to the tenant was posted " +
			"within 1ns; " + e.path + " binds merchants to tenants, so it is not posted: the worker redrives it once the payment is posted"}, e.dl.letters())
		assert.Zero(t, e.claimCount(t), "nothing claimed")

		e.handleAll(t, pay)
		e.handleAll(t, refund) // the redrive
		got := e.order(t, tr)
		assert.Equal(t, want.RefundedAmount, got.RefundedAmount)
		assert.Equal(t, want.Status, got.Status)
	})

	t.Run("held past the hold, dead-lettered, then redriven by the worker once its payment is posted", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		e.p.MerchantlessHold = time.Nanosecond
		store := deadletters.NewStore(e.db)
		e.p.DeadLetterRecords = store
		// Another trade's refund naming a terminal bound to another tenant:
		// a tenant_mismatch the redrive must leave alone, though its
		// trade's payment is posted and bound.
		other := channelstest.NewTrade(channels.SQB, 962)
		e.handleAll(t, channelstest.SQBPayment(other, channelstest.Delivery{}))
		e.rebind(t, "1001 SQB "+sqbTestTerminal+"\n2002 SQB 01939202039923030\n")
		foreign := channelstest.SQBRefund(other, channelstest.Refund{No: "R9", Cumulative: 100}, channelstest.Delivery{
			Edit: func(m map[string]any) { m["terminal_sn"] = "01939202039923030" },
		})
		msgs := e.messages(refund, foreign)
		states := make([]MessageState, 2)
		require.ErrorIs(t, e.p.Handle(context.Background(), msgs, states), ErrClaimInFlight)
		require.NoError(t, e.p.Handle(context.Background(), msgs, states))
		require.Len(t, e.dl.letters(), 2)
		originals := &mapOriginals{msgs: msgs}
		redrive := &MerchantlessRedrive{
			Pipeline: e.p, Topic: "channel-events", Letters: store, Originals: originals, Logger: slog.New(slog.DiscardHandler),
		}

		n, err := redrive.Once(context.Background())
		require.NoError(t, err)
		assert.Zero(t, n, "no payment of the trade yet")
		assert.Zero(t, originals.reads, "nothing read back before the payment")

		e.handleAll(t, pay)
		n, err = redrive.Once(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got := e.order(t, tr)
		assert.Equal(t, want.RefundedAmount, got.RefundedAmount)
		assert.Equal(t, want.Status, got.Status)
		assert.Equal(t, 1, originals.reads, "only the merchant-less refund is read back")
		assert.Len(t, e.dl.letters(), 2, "no dead letter written again")
		recs, err := store.All(context.Background())
		require.NoError(t, err)
		require.Len(t, recs, 2)
		for _, rec := range recs {
			if rec.Key == string(e.decode(t, refund).Key) {
				require.NotNil(t, rec.ClosedAt, "the refund's dead letter is closed")
				assert.Equal(t, ClosedByWorker, rec.ClosedBy)
				assert.Contains(t, rec.CloseNote, "checked for merchant "+sqbTestTerminal+" bound to tenant 1001")
			} else {
				assert.Nil(t, rec.ClosedAt, "the other tenant_mismatch stays open: %s", rec.Error)
			}
		}

		n, err = redrive.Once(context.Background())
		require.NoError(t, err)
		assert.Zero(t, n, "a closed letter is not redriven again")
		assert.Equal(t, 1, originals.reads)
		assert.Equal(t, int64(1000), e.order(t, tr).RefundedAmount, "posted once")
	})

	t.Run("a payment settled from its stored claim records its merchant", func(t *testing.T) {
		e := newMerchantlessEnv(t)
		ev := e.decode(t, pay)
		ev.BoundMerchant = sqbTestTerminal // as the worker stored it before it crashed
		e.claimLeftAcquired(t, ev)
		settled, err := e.svc.SettleStored(context.Background(), e.claim(t, ev))
		require.NoError(t, err)
		require.Equal(t, idempotent.OutcomePosted, settled.Outcome)
		assert.Equal(t, sqbTestTerminal, e.order(t, tr).BoundMerchantID)
		e.handleAll(t, refund)
		assert.Equal(t, int64(1000), e.order(t, tr).RefundedAmount)
	})
}

// TestMerchantlessIgnoredAnswerIsIgnored: under a merchant binding, an SQB
// answer that moves no money (REFUND_ERROR) and names no terminal is
// ignored, not dead-lettered tenant_mismatch (whose alert is critical);
// the same answer naming another tenant's terminal is still refused.
func TestMerchantlessIgnoredAnswerIsIgnored(t *testing.T) {
	e := newMerchantlessEnv(t)
	tr := channelstest.NewTrade(channels.SQB, 31)
	noTerminal := channelstest.SQBState(tr, "REFUND_ERROR", "SUCCESS", channelstest.Delivery{
		SQB: channelstest.SQBAPIResponse, Edit: func(m map[string]any) { delete(m, "terminal_sn") },
	})
	e.handleAll(t, noTerminal)
	assert.Empty(t, e.dl.letters(), "nothing to refuse: it moves no money and names no merchant")
	assert.Zero(t, e.claimCount(t), "an ignored answer claims nothing")

	e.rebind(t, "1002 SQB "+sqbTestTerminal+"\n")
	e.handleAll(t, channelstest.SQBState(tr, "REFUND_ERROR", "SUCCESS", channelstest.Delivery{}))
	require.Len(t, e.dl.letters(), 1, "another tenant's terminal is refused even on an answer that moves nothing")
}

// statementPayment is the signed statement event of tr's payment as
// publish-missing builds it from a statement line naming terminal.
func statementPayment(t *testing.T, tr channelstest.Trade, terminal string) kafka.Message {
	t.Helper()
	ev, err := channels.NewStatementEvent(channels.Event{
		TenantID: tr.TenantID, Channel: tr.Channel, Type: idempotent.PaymentReceived, TradeNo: tr.TradeNo,
		MerchantOrderNo: tr.MerchantOrderNo, OrderTotal: tr.Total, OccurredAt: channelstest.BaseTime,
		ReceivedAt: channelstest.BaseTime, RawStatus: "PAID", StatementMerchant: terminal,
	})
	require.NoError(t, err)
	value, err := channels.StatementEnvelope(ev, channelstest.BaseTime)
	require.NoError(t, err)
	sig, err := testStatementKeys(t).Sign(value)
	require.NoError(t, err)
	return kafka.Message{Value: value, Headers: []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}}}
}

// testStatementKeys is the statement key the merchant-less env's decoder
// verifies with.
func testStatementKeys(t *testing.T) statementauth.Keys {
	t.Helper()
	keys, err := statementauth.Parse([]byte("k1=0123456789abcdef0123456789abcdef\n"))
	require.NoError(t, err)
	return keys
}

// handleSigned hands m, at the next offset, to a pipeline whose decoder
// verifies statement events, and requires it done.
func (e *merchantlessEnv) handleSigned(t *testing.T, m kafka.Message) {
	t.Helper()
	e.p.Decoder = channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(testStatementKeys(t)))
	m.Topic, m.Offset = "channel-events", e.offset
	e.offset++
	states := make([]MessageState, 1)
	require.NoError(t, e.p.Handle(context.Background(), []kafka.Message{m}, states))
	require.True(t, states[0].done)
}

// mapOriginals reads back the messages a test handed to the pipeline, by
// offset, counting the reads.
type mapOriginals struct {
	msgs  []kafka.Message
	reads int
}

func (o *mapOriginals) Original(_ context.Context, src idempotent.Source) (kafka.Message, error) {
	o.reads++
	for _, m := range o.msgs {
		if m.Topic == src.Topic && m.Partition == src.Partition && m.Offset == src.Offset {
			return m, nil
		}
	}
	return kafka.Message{}, ErrOriginalGone
}
