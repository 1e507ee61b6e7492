package ops_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// whats is the timeline's kinds in order.
func whats(h ops.TradeHistory) []string {
	out := make([]string, len(h.Timeline))
	for i, e := range h.Timeline {
		out[i] = e.What
	}
	return out
}

// TestTradeHistoryThroughTheWorker builds one WeChat trade's history with
// the worker, one round at a time so that the order of events is certain:
// the payment; after refund 1 is pre-registered, refund 1; refund 2 and a
// channel retry of the payment; a payment re-sent with another amount (a
// conflict); a copy encrypted under a key the worker does not have
// (decrypt_failed, found by its Kafka key). Another trade's events are left
// out, and a scan that starts after the dead letters leaves only their
// ss_dead_letter rows.
func TestTradeHistoryThroughTheWorker(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 2)
	cfg := workerConfig(t, k)
	require.NoError(t, migrateDSN(ctx, cfg))
	db, err := sqldb.OpenMySQL(cfg.DB.DSN.Reveal())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, _ = startMain(t, cfg)

	tr := channelstest.NewTrade(channels.WeChat, 901)
	tr.Total = 10000
	other := channelstest.NewTrade(channels.WeChat, 902)
	key := []byte("WECHAT:" + tr.TradeNo)
	round := func(msgs ...kafkaops.Message) {
		t.Helper()
		require.NoError(t, kafkaops.Produce(ctx, k.Brokers, k.Topic, msgs))
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		require.NoError(t, kafkaops.WaitConsumed(wctx, k.Brokers, k.Group, k.Topic, 50*time.Millisecond, nil))
	}
	round(
		kafkaops.Message{Key: key, Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{})},
		kafkaops.Message{Key: []byte("WECHAT:" + other.TradeNo), Value: channelstest.PaymentEnvelope(other, channelstest.Delivery{})},
	)
	svc, err := settlement.New(db, idempotent.NewStore(db), nil, nil)
	require.NoError(t, err)
	_, err = svc.RegisterRefund(ctx, settlement.RefundRequest{TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: "RF-1", Amount: 1000})
	require.NoError(t, err)
	r1 := channelstest.Refund{No: "RF-1", Amount: 1000}
	r2 := channelstest.Refund{No: "RF-2", Amount: 2000, At: tr.PaidAt.Add(2 * time.Hour)}
	round(kafkaops.Message{Key: key, Value: channelstest.RefundEnvelope(tr, r1, channelstest.Delivery{})})
	round(
		kafkaops.Message{Key: key, Value: channelstest.RefundEnvelope(tr, r2, channelstest.Delivery{})},
		kafkaops.Message{Key: key, Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{Attempt: 1})},
	)
	bad := tr
	bad.Total += 100
	round(kafkaops.Message{Key: key, Value: channelstest.PaymentEnvelope(bad, channelstest.Delivery{Attempt: 2})})
	round(kafkaops.Message{Key: key, Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{Attempt: 3, APIv3Key: "fedcba9876543210fedcba9876543210"})})

	q := deadletters.TradeQuery{
		TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, Kafka: &k,
		Since: time.Now().Add(-time.Hour), Decoder: channels.NewDecoder(channelstest.Keys()),
	}
	h, err := ops.Trade(ctx, db, q)
	require.NoError(t, err)

	assert.Equal(t, []string{
		"claim", "order", "ledger", "ledger", "settled_event", // the payment (its retry adds nothing)
		"registration",
		"claim", "ledger", "ledger", "settled_event", // refund 1
		"claim", "ledger", "ledger", "settled_event", // refund 2
		"dead_letter", "dead_letter", // the conflict, the undecryptable copy
	}, whats(h), "timeline:\n%s", timelineText(h))
	for i := 1; i < len(h.Timeline); i++ {
		assert.False(t, h.Timeline[i].At.Before(h.Timeline[i-1].At), "in time order at %d", i)
	}

	payKey := "WECHAT:" + tr.TradeNo + ":PAYMENT_RECEIVED"
	require.Len(t, h.Claims, 3)
	assert.Equal(t, []string{payKey, "WECHAT:" + tr.TradeNo + ":REFUND_SUCCEEDED:RF-1", "WECHAT:" + tr.TradeNo + ":REFUND_SUCCEEDED:RF-2"},
		[]string{h.Claims[0].Key, h.Claims[1].Key, h.Claims[2].Key})
	for _, c := range h.Claims {
		assert.Equal(t, "SETTLED", c.Status)
		require.NotNil(t, c.Outcome)
		assert.Equal(t, "POSTED", *c.Outcome)
		assert.Equal(t, k.Topic, c.SourceTopic)
		assert.NotNil(t, c.SettledAt)
		assert.Len(t, c.Fingerprint, 64)
	}
	require.NotNil(t, h.Order)
	assert.Equal(t, int64(10000), h.Order.Amount)
	assert.Equal(t, int64(3000), h.Order.RefundedAmount)
	assert.Equal(t, "PARTIALLY_REFUNDED", h.Order.Status)
	assert.Len(t, h.Ledger, 6)
	require.Len(t, h.Registrations, 1)
	assert.Equal(t, "SUCCEEDED", h.Registrations[0].Status)

	require.Len(t, h.SettledEvents, 3)
	for i, e := range h.SettledEvents {
		assert.Equal(t, int64(i+1), e.TradeSeq)
		assert.Equal(t, h.Claims[i].Key, e.Key)
	}
	require.Eventually(t, func() bool {
		again, err := ops.Trade(ctx, db, deadletters.TradeQuery{TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo})
		return err == nil && again.SettledEvents[2].PublishedAt != nil
	}, 30*time.Second, 20*time.Millisecond, "the worker publishes the settled events")

	require.Len(t, h.DeadLetters, 2)
	conflict, undecryptable := h.DeadLetters[0], h.DeadLetters[1]
	assert.Equal(t, "conflict", conflict.Kind)
	assert.Equal(t, "event", conflict.MatchedBy)
	assert.Equal(t, payKey, conflict.IdempotentKey)
	assert.NotEqual(t, h.Claims[0].Fingerprint, conflict.Fingerprint, "the conflicting copy's own fingerprint")
	assert.True(t, strings.HasPrefix(conflict.Position, k.DLQTopic+"/"), conflict.Position)
	assert.True(t, conflict.Recorded, "the worker's ss_dead_letter row and the topic's message are one entry")
	assert.Equal(t, "decrypt_failed", undecryptable.Kind)
	assert.Equal(t, "key", undecryptable.MatchedBy)
	assert.Equal(t, string(key), undecryptable.MessageKey)
	for _, e := range h.Timeline {
		assert.NotContains(t, e.Summary, other.TradeNo, "another trade's rows are left out")
	}

	var fromJSON ops.TradeHistory
	b, err := json.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &fromJSON))
	assert.Len(t, fromJSON.Timeline, len(h.Timeline))

	q.Since = time.Now().Add(time.Minute)
	later, err := ops.Trade(ctx, db, q)
	require.NoError(t, err)
	require.NotEmpty(t, later.DeadLetters, "the conflict's row")
	for _, d := range later.DeadLetters {
		assert.True(t, d.Recorded, "the scan starts after every dead letter: only ss_dead_letter rows are left")
		assert.Empty(t, d.Position)
	}
	assert.Len(t, later.Claims, 3)
}

func timelineText(h ops.TradeHistory) string {
	var b strings.Builder
	for _, e := range h.Timeline {
		b.WriteString(e.At.Format(time.RFC3339Nano) + " " + e.What + " " + e.Summary + "\n")
	}
	return b.String()
}

// TestTradeFromTheDatabase reads a trade on both dialects without a
// broker: claims by key range (a trade whose number extends this one's is
// not included), the order, ledger, registration, settled events and a
// closed ss_dead_letter row.
func TestTradeFromTheDatabase(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		claims := idempotent.NewStore(db)
		svc, err := settlement.New(db, claims, nil, nil)
		require.NoError(t, err)
		dec := channels.NewDecoder(channelstest.Keys())
		offset := int64(0)
		settle := func(value []byte) channels.Event {
			t.Helper()
			res, err := dec.Decode(value)
			require.NoError(t, err)
			body, err := json.Marshal(res.Event)
			require.NoError(t, err)
			_, err = claims.Acquire(ctx, idempotent.Claim{
				TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
				Fingerprint: res.Event.Fingerprint, Event: body, Source: idempotent.Source{Topic: testTopic, Offset: offset},
			})
			require.NoError(t, err)
			offset++
			_, err = svc.Settle(ctx, res.Event)
			require.NoError(t, err)
			return res.Event
		}
		tr := channelstest.NewTrade(channels.Alipay, 77)
		tr.TradeNo = "2024060122001439"
		longer := channelstest.NewTrade(channels.Alipay, 78)
		longer.TradeNo = tr.TradeNo + "0" // its keys sort right after tr's
		for _, r := range []channelstest.Trade{tr, longer} {
			_, err = svc.RegisterPayment(ctx, settlement.PaymentRequest{
				TenantID: r.TenantID, Channel: r.Channel, MerchantID: "2088101117955611", MerchantOrderNo: r.MerchantOrderNo,
				Amount: r.Total, Currency: "CNY", CreatedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour),
			})
			require.NoError(t, err)
		}
		settle(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		settle(channelstest.PaymentEnvelope(longer, channelstest.Delivery{}))
		_, err = svc.RegisterRefund(ctx, settlement.RefundRequest{TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: "rf_%1", Amount: 500})
		require.NoError(t, err)
		settle(channelstest.RefundEnvelope(tr, channelstest.Refund{No: "rf_%1", Amount: 500}, channelstest.Delivery{}))
		created := time.Now().UTC().Truncate(time.Microsecond)
		_, err = db.NewRaw(`INSERT INTO ss_dead_letter (source_topic, source_partition, source_offset, message_hash, kind, tenant_id,
			idempotent_key, fingerprint, channel_code, channel_trade_no, error, created_at, closed_at, closed_by, close_note)
			VALUES (?, 0, 9, ?, 'conflict', ?, ?, ?, 'ALIPAY', ?, 'fingerprint differs', ?, ?, 'ops@host', 'checked with the merchant')`,
			testTopic, make([]byte, 32), tr.TenantID, "ALIPAY:"+tr.TradeNo+":PAYMENT_RECEIVED", strings.Repeat("a", 64), tr.TradeNo,
			created, created.Add(time.Minute)).Exec(ctx)
		require.NoError(t, err)

		h, err := ops.Trade(ctx, db, deadletters.TradeQuery{TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo})
		require.NoError(t, err)
		assert.Equal(t, []string{
			"registration", "claim", "order", "ledger", "ledger", "settled_event", "registration", "claim", "ledger", "ledger", "settled_event", "dead_letter",
		}, whats(h), "timeline:\n%s", timelineText(h))
		require.Len(t, h.PaymentRegistrations, 1, "the other trade's registration is left out")
		p := h.PaymentRegistrations[0]
		assert.Equal(t, tr.MerchantOrderNo, p.MerchantOrderNo)
		assert.Equal(t, "SUCCEEDED", p.Status)
		require.NotNil(t, p.TradeNo)
		assert.Equal(t, tr.TradeNo, *p.TradeNo)
		assert.Contains(t, h.Timeline[0].Summary, "payment "+tr.MerchantOrderNo+" registered by merchant 2088101117955611: 2580 CNY")
		require.Len(t, h.SettledEvents, 2, "a trade whose number extends this one's is left out")
		assert.Nil(t, h.SettledEvents[1].PublishedAt)
		require.Len(t, h.Claims, 2)
		assert.Equal(t, "ALIPAY:"+tr.TradeNo+":REFUND_SUCCEEDED:rf_%1", h.Claims[1].Key)
		require.Len(t, h.DeadLetters, 1)
		d := h.DeadLetters[0]
		assert.True(t, d.Recorded)
		require.NotNil(t, d.ClosedAt)
		assert.Equal(t, "checked with the merchant", d.CloseNote)
		assert.Equal(t, testTopic+"/0@9", d.Source)
		assert.Contains(t, h.Timeline[len(h.Timeline)-1].Summary, "closed")

		none, err := ops.Trade(ctx, db, deadletters.TradeQuery{TenantID: tr.TenantID + 1, Channel: tr.Channel, TradeNo: tr.TradeNo})
		require.NoError(t, err)
		assert.True(t, none.Empty(), "another tenant's trade of the same number")
	})
}

func TestTradeRefusesAnInvalidQuery(t *testing.T) {
	db := sqldbtest.MustSQLite(t)
	for name, q := range map[string]deadletters.TradeQuery{
		"no tenant":       {Channel: channels.SQB, TradeNo: "1"},
		"unknown channel": {TenantID: 1, Channel: "PAYPAL", TradeNo: "1"},
		"colon":           {TenantID: 1, Channel: channels.SQB, TradeNo: "1:2"},
		"empty":           {TenantID: 1, Channel: channels.SQB},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ops.Trade(context.Background(), db, q)
			require.ErrorIs(t, err, ops.ErrInvalidTrade)
		})
	}
}
