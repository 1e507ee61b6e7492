package demo_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
)

// TestGenerateWithChannelsPrefixAndKey: the chosen channels only, every
// trade number prefixed, WeChat resources under the given key (readable
// with it, not with the default test key).
func TestGenerateWithChannelsPrefixAndKey(t *testing.T) {
	const key = "abcdefabcdefabcdefabcdefabcdef12"
	s := demo.Generate(demo.StreamOptions{
		Seed: 3, Trades: 30, Tenants: []int64{42}, NoTraps: true,
		Channels: []channels.Channel{channels.WeChat, channels.SQB}, TradePrefix: "TEST3",
		WeChatKey: func(tenant int64) string {
			assert.Equal(t, int64(42), tenant)
			return key
		},
	})
	dec := channels.NewDecoder(channels.StaticKeys{Default: key})
	seen := map[channels.Channel]bool{}
	for _, m := range s.Messages {
		res, err := dec.Decode(m.Value)
		require.NoError(t, err, m.Note)
		seen[res.Event.Channel] = true
		assert.True(t, strings.HasPrefix(res.Event.TradeNo, "TEST3"), res.Event.TradeNo)
		if m.Key != nil {
			assert.True(t, bytes.HasPrefix(m.Key, []byte(string(res.Event.Channel)+":TEST3")), string(m.Key))
		}
	}
	assert.Equal(t, map[channels.Channel]bool{channels.WeChat: true, channels.SQB: true}, seen)
}

// TestGenerateDefaultsUnchanged: the options added for publishing change
// nothing when left empty.
func TestGenerateDefaultsUnchanged(t *testing.T) {
	a := demo.Generate(demo.StreamOptions{Seed: 9, Trades: 20})
	b := demo.Generate(demo.StreamOptions{Seed: 9, Trades: 20, Channels: channels.Codes()})
	assert.Equal(t, a, b)
}

func TestTestStreamRefusals(t *testing.T) {
	_, _, err := demo.TestStream(demo.TestOptions{TenantID: 1, Channels: []channels.Channel{channels.WeChat}})
	require.ErrorIs(t, err, demo.ErrNoWeChatKey)
	_, _, err = demo.TestStream(demo.TestOptions{TenantID: 1, Channels: []channels.Channel{"PAYPAL"}})
	require.Error(t, err)
	_, _, err = demo.TestStream(demo.TestOptions{Channels: []channels.Channel{channels.SQB}})
	require.Error(t, err, "a tenant is required")
	s, prefix, err := demo.TestStream(demo.TestOptions{TenantID: 5, Channels: []channels.Channel{channels.Alipay}, Seed: 12})
	require.NoError(t, err)
	assert.Equal(t, "TEST12-", prefix)
	assert.Equal(t, 10, s.Trades, "ten trades by default")
	assert.Zero(t, s.Conflicts+s.Malformed, "no traps")
}
