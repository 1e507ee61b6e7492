package app_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func TestSweeperDeadLettersAnOrphanThatSettlesAsOverRefund(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	trade := channelstest.NewTrade(channels.WeChat, 88)
	pay := channelstest.WeChatPayment(trade, channelstest.Delivery{})
	tooMuch := channelstest.WeChatRefund(trade, channelstest.Refund{No: "RF-x", Amount: trade.Total + 1}, "SUCCESS", channelstest.Delivery{})
	h.produce([]demo.Message{{Key: []byte("k"), Value: pay}, {Key: []byte("k"), Value: tooMuch}}) // offsets 0 and 1

	// The payment was settled; the refund's worker claimed it an hour ago
	// and died, and its message never came back.
	dec := channels.NewDecoder(channelstest.Keys())
	old := idempotent.NewStore(h.db, idempotent.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }))
	reg := metrics.NewRegistry()
	met, err := metrics.New(reg)
	require.NoError(t, err)
	svc, err := settlement.New(h.db, old, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	for offset, value := range [][]byte{pay, tooMuch} {
		res, err := dec.Decode(value)
		require.NoError(t, err)
		body, err := json.Marshal(res.Event)
		require.NoError(t, err)
		ar, err := old.Acquire(ctx, idempotent.Claim{
			TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
			Fingerprint: res.Event.Fingerprint, Event: body,
			Source: idempotent.Source{Topic: h.topic(), Partition: 0, Offset: int64(offset)},
		})
		require.NoError(t, err)
		require.Equal(t, idempotent.Acquired, ar.Kind)
		if offset == 0 {
			_, err = svc.Settle(ctx, res.Event)
			require.NoError(t, err)
		}
	}

	dlq := deadletters.NewKafkaWriter(h.brokers, h.dlq(), 0)
	defer dlq.Close()
	sw := &pipeline.Sweeper{
		Claims: idempotent.NewStore(h.db), Settler: svc, Metrics: met, Logger: slog.New(slog.DiscardHandler),
		OrphanAfter: time.Minute, Originals: pipeline.KafkaOriginals{Brokers: h.brokers}, DeadLetterer: dlq,
	}
	n, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	res, err := dec.Decode(tooMuch)
	require.NoError(t, err)
	rec, err := old.Get(ctx, res.Event.TenantID, res.Event.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotent.OutcomeOverRefund, rec.Outcome)
	assert.NotNil(t, rec.DeadLetteredAt, "the claim records its dead letter")

	dls := h.deadLetters()
	require.Len(t, dls, 1)
	assert.Equal(t, "over_refund", header(dls[0], deadletters.HeaderErrorKind))
	assert.Equal(t, tooMuch, dls[0].Value, "the original value, read back from the topic")
	assert.Equal(t, strconv.Itoa(1), header(dls[0], deadletters.HeaderSourceOffset))
}
