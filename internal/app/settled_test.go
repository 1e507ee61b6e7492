package app_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/internal/settledpub/settledpubtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// settledTopic is the test's settled-event topic (the default,
// <topic>.settled).
func (h *harness) settledTopic() string { return h.name(testTopic + ".settled") }

// produceTrades produces, for n trades, a payment and two cumulative
// refunds each (Alipay and Shouqianba alternately), every trade's
// messages in order under its own key, and returns how many settled
// events they make: one per message.
func (h *harness) produceTrades(n, first int) int {
	h.t.Helper()
	var msgs []kafkaops.Message
	for i := range n {
		ch := channels.Alipay
		if i%2 == 1 {
			ch = channels.SQB
		}
		tr := channelstest.NewTrade(ch, first+i)
		tr.Total = 3000
		key := []byte(string(tr.Channel) + ":" + tr.TradeNo)
		msgs = append(msgs, kafkaops.Message{Key: key, Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{})})
		for r, c := range []int64{500, 1200} {
			msgs = append(msgs, kafkaops.Message{Key: key, Value: channelstest.RefundEnvelope(tr, channelstest.Refund{
				No: fmt.Sprintf("R%d", r+1), Cumulative: c, At: tr.PaidAt.Add(time.Duration(r+1) * time.Hour),
			}, channelstest.Delivery{})})
		}
	}
	require.NoError(h.t, kafkaops.Produce(context.Background(), h.brokers, h.topic(), msgs))
	return len(msgs)
}

func (h *harness) settledPending() int64 {
	h.t.Helper()
	n, _, err := settledpub.Pending(context.Background(), h.db)
	require.NoError(h.t, err)
	return n
}

func (h *harness) outboxRows() int64 {
	h.t.Helper()
	n, err := h.db.NewSelect().Table("ss_settled_outbox").Count(context.Background())
	require.NoError(h.t, err)
	return n
}

// TestSettledEventsPublishedRightAfterCommit: every settlement's events
// are on the settled-event topic well within the sweeper's grace, so by the
// settling worker right after the commit: one per event, each valid
// against the schema, byte for byte its outbox row, each trade's
// trade_seq increasing.
func TestSettledEventsPublishedRightAfterCommit(t *testing.T) {
	h := newHarness(t, 2)
	h.start(func(m *app.Main) { m.SettledSweepGrace = time.Hour }) // the sweeper stays out of it
	events := h.produceTrades(30, 8100)
	h.waitConsumed(time.Minute)
	require.Eventually(t, func() bool { return h.settledPending() == 0 }, 30*time.Second, 20*time.Millisecond,
		"the settling workers publish their events")
	assert.Equal(t, int64(events), h.outboxRows())
	pubs := settledpubtest.Read(t, h.db, h.brokers, h.settledTopic())
	require.Len(t, pubs, events)
	settledpubtest.RequireOrdered(t, pubs)
}

// TestSettledTopicRefused: while the broker refuses the settled-event
// topic the input is still consumed and committed, and the events stay in
// the outbox; once it accepts again the sweeper publishes them, each
// trade in trade_seq order. paycb_settled_pending and
// paycb_settled_oldest_pending_seconds show the backlog, then zero.
func TestSettledTopicRefused(t *testing.T) {
	h := newHarness(t, 2)
	if h.cluster == nil {
		t.Fatal("this test refuses produce requests through kfake's control hook")
	}
	var refuse atomic.Bool
	refuse.Store(true)
	settledpubtest.Refuse(h.cluster, h.settledTopic(), &refuse)
	r := h.start(func(m *app.Main) {
		m.SettledMetricsRefresh = 20 * time.Millisecond
		// A grace short for the test, long enough for a loaded machine:
		// the publisher leaves rows older than a third of it.
		m.SettledSweepInterval, m.SettledSweepGrace = 50*time.Millisecond, 3*time.Second
	})
	events := h.produceTrades(20, 8200)
	h.waitConsumed(time.Minute) // publishing never holds up the input's commits
	assert.Equal(t, int64(events), h.settledPending())
	assert.Empty(t, settledpubtest.Read(t, h.db, h.brokers, h.settledTopic()))
	require.Eventually(t, func() bool {
		return counted(t, r.main, "paycb_settled_pending", nil) == float64(events) &&
			counted(t, r.main, "paycb_settled_oldest_pending_seconds", nil) > 0
	}, 10*time.Second, 10*time.Millisecond, "the backlog shows in the metrics")

	refuse.Store(false)
	require.Eventually(t, func() bool { return h.settledPending() == 0 }, time.Minute, 20*time.Millisecond,
		"the sweeper publishes what the refusal left")
	pubs := settledpubtest.Read(t, h.db, h.brokers, h.settledTopic())
	require.Len(t, pubs, events)
	settledpubtest.RequireOrdered(t, pubs)
	require.Eventually(t, func() bool {
		return counted(t, r.main, "paycb_settled_pending", nil) == 0 &&
			counted(t, r.main, "paycb_settled_oldest_pending_seconds", nil) == 0
	}, 10*time.Second, 10*time.Millisecond, "the metrics follow the backlog down")
}

// TestSettledEventsOff: with PAYCB_SETTLED_TOPIC=none the worker starts
// without the topic, writes no outbox row and publishes nothing.
func TestSettledEventsOff(t *testing.T) {
	h := newHarness(t, 2)
	h.start(func(m *app.Main) { m.Config.Settled.Topic = "none" })
	h.produceTrades(10, 8300)
	h.waitConsumed(time.Minute)
	assert.Zero(t, h.outboxRows())
	assert.Empty(t, settledpubtest.Read(t, h.db, h.brokers, h.settledTopic()))
}
