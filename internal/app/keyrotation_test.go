package app_test

import (
	"context"
	"fmt"
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

func TestCallbacksEncryptedWithTheOldAndTheNewKeySettleDuringARotation(t *testing.T) {
	const (
		newKey   = "NNNNNNNNNNNNNNNNnnnnnnnnnnnnnnnn"
		oldKey   = "OOOOOOOOOOOOOOOOoooooooooooooooo"
		strayKey = "SSSSSSSSSSSSSSSSssssssssssssssss"
		trades   = 12
	)
	h := newHarness(t, 2)

	// Tenant 1001 is rotating: its callbacks are encrypted with the new key
	// and the old one, interleaved, payments and refunds alike. Tenant 1002
	// keeps the default key.
	var msgs []demo.Message
	for i := range trades {
		trade := channelstest.NewTrade(channels.WeChat, i+1)
		payKey, refundKey := newKey, oldKey
		if i%2 == 1 {
			payKey, refundKey = oldKey, newKey
		}
		key := []byte("WECHAT:" + trade.TradeNo)
		msgs = append(msgs,
			demo.Message{Key: key, Value: channelstest.WeChatPayment(trade, channelstest.Delivery{APIv3Key: payKey})},
			demo.Message{Key: key, Value: channelstest.WeChatRefund(trade,
				channelstest.Refund{No: fmt.Sprintf("RF-%d", i+1), Amount: 1000}, "SUCCESS", channelstest.Delivery{APIv3Key: refundKey})})
	}
	other := channelstest.NewTrade(channels.WeChat, 100)
	other.TenantID = 1002
	msgs = append(msgs, demo.Message{Key: []byte("WECHAT:" + other.TradeNo), Value: channelstest.WeChatPayment(other, channelstest.Delivery{})})
	stray := channelstest.NewTrade(channels.WeChat, 200)
	strayValue := channelstest.WeChatPayment(stray, channelstest.Delivery{APIv3Key: strayKey})
	msgs = append(msgs, demo.Message{Key: []byte("WECHAT:" + stray.TradeNo), Value: strayValue})
	h.produce(msgs)

	w := h.start(func(m *app.Main) {
		m.Config.WeChat.APIv3Key = config.Secret(channelstest.APIv3Key)
		m.Config.WeChat.APIv3Keys = map[int64]config.Keys{1001: {config.Secret(newKey), config.Secret(oldKey)}}
	})
	h.waitConsumed(time.Minute)

	// Every callback of the rotating tenant settled, whichever key it came with.
	ctx := context.Background()
	var settled, posted int
	require.NoError(t, h.db.NewRaw(`SELECT COUNT(*), COALESCE(SUM(settle_outcome = 'POSTED'), 0) FROM ss_channel_idempotent
		WHERE tenant_id = 1001 AND status = 'SETTLED'`).Scan(ctx, &settled, &posted))
	assert.Equal(t, 2*trades, settled, "each payment and refund of tenant 1001 settled")
	assert.Equal(t, 2*trades, posted)
	entries, err := h.db.NewSelect().Table("ss_ledger_entry").Where("tenant_id = 1001").Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4*trades), entries, "two postings per payment and per refund")
	entries, err = h.db.NewSelect().Table("ss_ledger_entry").Where("tenant_id = 1002").Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), entries, "the default key still serves the other tenant")

	// The one callback no key opens is the one dead letter.
	dls := h.deadLetters()
	require.Len(t, dls, 1)
	assert.Equal(t, "decrypt_failed", header(dls[0], deadletters.HeaderErrorKind))
	reason := header(dls[0], deadletters.HeaderError)
	assert.Contains(t, reason, "tenant 1001 failed authentication with each of its 2 keys")
	for _, k := range []string{newKey, oldKey, strayKey, channelstest.APIv3Key} {
		assert.NotContains(t, reason, k)
	}
	assert.Equal(t, strayValue, dls[0].Value)
	entries, err = h.db.NewSelect().Table("ss_ledger_entry").Where("channel_trade_no = ?", stray.TradeNo).Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, entries)

	// The metric shows both keys in use for the rotating tenant, and the
	// single-key tenant without a tenant label.
	const family = "paycb_wechat_decrypt_key_total"
	assert.InDelta(t, float64(trades), counted(t, w.main, family, map[string]string{"position": "1", "tenant": "1001"}), 0)
	assert.InDelta(t, float64(trades), counted(t, w.main, family, map[string]string{"position": "2", "tenant": "1001"}), 0)
	assert.InDelta(t, 1.0, counted(t, w.main, family, map[string]string{"position": "1", "tenant": ""}), 0)
	assert.InDelta(t, float64(2*trades+1), counted(t, w.main, family, nil), 0, "failed decryptions are not counted")
	assert.InDelta(t, 1.0, counted(t, w.main, "paycb_dead_letters_total", map[string]string{"kind": "decrypt_failed"}), 0)
}
