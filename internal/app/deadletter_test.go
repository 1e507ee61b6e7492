package app_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

func TestMessagesThatCanNeverSucceedAreDeadLetteredAndThePartitionMovesOn(t *testing.T) {
	h := newHarness(t, 1)

	wechat := channelstest.NewTrade(channels.WeChat, 1)
	keyless := channelstest.NewTrade(channels.WeChat, 2)
	keyless.TenantID = 1002 // has no APIv3 key in this test's configuration
	conflicting := channelstest.NewTrade(channels.Alipay, 3)
	changed := conflicting
	changed.Total++
	overRefunded := channelstest.NewTrade(channels.WeChat, 4)
	healthy := channelstest.NewTrade(channels.SQB, 5)

	unknownChannel := channelstest.EnvelopeWith(channels.Envelope{
		TenantID: 1001, Channel: "PAYPAL", ReceivedAt: time.Now(), ContentType: "application/json", Body: `{"id":"x"}`,
	})
	cases := []struct {
		kind  string
		value []byte
	}{
		{"malformed", []byte(`{"tenant_id":1001,"channel":"WECHAT","body":`)},
		{"unknown_channel", unknownChannel},
		{"decrypt_failed", channelstest.WeChatPayment(wechat, channelstest.Delivery{APIv3Key: "ffffffffffffffffffffffffffffffff"})},
		{"no_key", channelstest.WeChatPayment(keyless, channelstest.Delivery{})},
		{"conflict", nil}, // filled below: needs its payment first
		{"over_refund", nil},
	}
	var msgs []demo.Message
	for _, c := range cases {
		switch c.kind {
		case "conflict":
			msgs = append(msgs,
				demo.Message{Key: []byte("ALIPAY:c"), Value: channelstest.AlipayPayment(conflicting, channelstest.Delivery{})},
				demo.Message{Key: []byte("ALIPAY:c"), Value: channelstest.AlipayPayment(changed, channelstest.Delivery{Attempt: 1})})
		case "over_refund":
			msgs = append(msgs,
				demo.Message{Key: []byte("WECHAT:o"), Value: channelstest.WeChatPayment(overRefunded, channelstest.Delivery{})},
				demo.Message{Key: []byte("WECHAT:o"), Value: channelstest.WeChatRefund(overRefunded,
					channelstest.Refund{No: "RF-too-much", Amount: overRefunded.Total + 1}, "SUCCESS", channelstest.Delivery{})})
		default:
			msgs = append(msgs, demo.Message{Key: []byte(c.kind), Value: c.value})
		}
	}
	msgs = append(msgs, demo.Message{Key: []byte("SQB:h"), Value: channelstest.SQBPayment(healthy, channelstest.Delivery{})})
	h.produce(msgs)

	w := h.start(func(m *app.Main) {
		m.Config.WeChat.APIv3Key = ""
		m.Config.WeChat.APIv3Keys = map[int64]config.Keys{1001: {config.Secret(channelstest.APIv3Key)}}
	})
	h.waitConsumed(time.Minute)

	dls := h.deadLetters()
	require.Len(t, dls, len(cases))
	byKind := map[string]int{}
	for _, dl := range dls {
		kind := deadletters.HeaderErrorKind
		byKind[header(dl, kind)]++
		assert.NotEmpty(t, header(dl, deadletters.HeaderError), "a readable reason")
		assert.Equal(t, h.topic(), header(dl, deadletters.HeaderSourceTopic))
		assert.Equal(t, "0", header(dl, deadletters.HeaderSourcePartition))
		off, err := strconv.Atoi(header(dl, deadletters.HeaderSourceOffset))
		require.NoError(t, err)
		require.Less(t, off, len(msgs))
		src := msgs[off]
		assert.Equal(t, src.Key, dl.Key, "the original key, unchanged")
		assert.Equal(t, src.Value, dl.Value, "the original value, unchanged")
	}
	for _, c := range cases {
		assert.Equal(t, 1, byKind[c.kind], c.kind)
		assert.InDelta(t, 1.0, counted(t, w.main, "paycb_dead_letters_total", map[string]string{"kind": c.kind}), 0, c.kind)
	}

	// Counted once each, under the channel the envelope named when it named
	// a known one.
	assert.InDelta(t, 2.0, counted(t, w.main, "paycb_events_total", map[string]string{"channel": "WECHAT", "outcome": "dead_lettered"}), 0,
		"decrypt_failed and no_key are WeChat messages")
	assert.InDelta(t, 2.0, counted(t, w.main, "paycb_events_total", map[string]string{"channel": "UNKNOWN", "outcome": "dead_lettered"}), 0,
		"the malformed and the unknown-channel message")

	// The partition moved on: the healthy payment after them was posted.
	ctx := context.Background()
	n, err := h.db.NewSelect().Table("ss_ledger_entry").Where("channel_trade_no = ?", healthy.TradeNo).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	// The over-refund posted nothing, and its claim remembers its dead letter.
	n, err = h.db.NewSelect().Table("ss_ledger_entry").Where("idempotent_key LIKE ?", "%RF-too-much").Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	var dead int
	require.NoError(t, h.db.NewRaw(`SELECT COUNT(*) FROM ss_channel_idempotent
		WHERE settle_outcome = 'OVER_REFUND' AND dead_lettered_at IS NOT NULL`).Scan(ctx, &dead))
	assert.Equal(t, 1, dead)
}
