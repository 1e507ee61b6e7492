package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

func TestAChannelLeftOutOfTheSettingIsDeadLetteredUnknownChannel(t *testing.T) {
	h := newHarness(t, 1)
	wechat := channelstest.NewTrade(channels.WeChat, 1)
	alipay := channelstest.NewTrade(channels.Alipay, 2)
	sqb := channelstest.NewTrade(channels.SQB, 3)
	alipayValue := channelstest.AlipayPayment(alipay, channelstest.Delivery{})
	h.produce([]demo.Message{
		{Key: []byte("WECHAT:" + wechat.TradeNo), Value: channelstest.WeChatPayment(wechat, channelstest.Delivery{})},
		{Key: []byte("ALIPAY:" + alipay.TradeNo), Value: alipayValue},
		{Key: []byte("SQB:" + sqb.TradeNo), Value: channelstest.SQBPayment(sqb, channelstest.Delivery{})},
	})

	w := h.start(func(m *app.Main) { m.Config.Worker.Channels = []string{"WECHAT", "SQB"} })
	h.waitConsumed(time.Minute)

	dls := h.deadLetters()
	require.Len(t, dls, 1)
	assert.Equal(t, "unknown_channel", header(dls[0], deadletters.HeaderErrorKind))
	assert.Equal(t, "unknown_channel: channel ALIPAY is not accepted by this instance (PAYCB_CHANNELS=WECHAT,SQB)",
		header(dls[0], deadletters.HeaderError))
	assert.Equal(t, alipayValue, dls[0].Value, "the original value, unchanged")

	// Counted under its own (bounded) channel, not UNKNOWN.
	assert.InDelta(t, 1.0, counted(t, w.main, "paycb_events_total", map[string]string{"channel": "ALIPAY", "outcome": "dead_lettered"}), 0)
	assert.InDelta(t, 0.0, counted(t, w.main, "paycb_events_total", map[string]string{"channel": "UNKNOWN", "outcome": "dead_lettered"}), 0)
	assert.InDelta(t, 1.0, counted(t, w.main, "paycb_dead_letters_total", map[string]string{"kind": "unknown_channel"}), 0)

	// The accepted channels settled; the refused one moved no money.
	ctx := context.Background()
	for _, tc := range []struct {
		trade channelstest.Trade
		want  int64
	}{{wechat, 2}, {sqb, 2}, {alipay, 0}} {
		n, err := h.db.NewSelect().Table("ss_ledger_entry").Where("channel_trade_no = ?", tc.trade.TradeNo).Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, tc.want, n, string(tc.trade.Channel))
	}
}
