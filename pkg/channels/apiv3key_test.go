package channels_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// Rotation keys, each 32 bytes: current, previous, and one nobody has.
const (
	keyNew   = "NNNNNNNNNNNNNNNNnnnnnnnnnnnnnnnn"
	keyOld   = "OOOOOOOOOOOOOOOOoooooooooooooooo"
	keyOlder = "PPPPPPPPPPPPPPPPpppppppppppppppp"
	keyStray = "SSSSSSSSSSSSSSSSssssssssssssssss"
)

// rotating is tenant 1001 during a rotation (new key first, then the old
// one) and every other tenant on the channelstest key.
func rotating() channels.StaticKeys {
	return channels.StaticKeys{
		Default: channelstest.APIv3Key,
		Tenants: map[int64][]string{1001: {keyNew, keyOld}},
	}
}

func TestWeChatKeyRotation(t *testing.T) {
	trade := channelstest.NewTrade(channels.WeChat, 1)
	refund := channelstest.Refund{No: "RF-1", Amount: 1000}
	dec := channels.NewDecoder(rotating())

	t.Run("each key decrypts and reports its position", func(t *testing.T) {
		tests := []struct {
			name string
			key  string
			want channels.KeyUse
		}{
			{"current key", keyNew, channels.KeyUse{Position: 1, Keys: 2}},
			{"previous key", keyOld, channels.KeyUse{Position: 2, Keys: 2}},
		}
		var fingerprints []string
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				for _, value := range [][]byte{
					channelstest.WeChatPayment(trade, channelstest.Delivery{APIv3Key: tt.key}),
					channelstest.WeChatRefund(trade, refund, "SUCCESS", channelstest.Delivery{APIv3Key: tt.key, Attempt: 3}),
				} {
					res, err := dec.Decode(value)
					require.NoError(t, err)
					checkResult(t, res, err)
					require.Equal(t, tt.want, res.APIv3Key)
				}
				res, err := dec.Decode(channelstest.WeChatPayment(trade, channelstest.Delivery{APIv3Key: tt.key}))
				require.NoError(t, err)
				fingerprints = append(fingerprints, res.Event.Fingerprint)
			})
		}
		require.Len(t, fingerprints, 2)
		require.Equal(t, fingerprints[0], fingerprints[1], "the key changes nothing in the event")
	})

	t.Run("keys are tried in the configured order", func(t *testing.T) {
		value := channelstest.WeChatPayment(trade, channelstest.Delivery{APIv3Key: keyOld})
		for _, tt := range []struct {
			keys []string
			want channels.KeyUse
		}{
			{[]string{keyOld, keyNew}, channels.KeyUse{Position: 1, Keys: 2}},
			{[]string{keyNew, keyOld}, channels.KeyUse{Position: 2, Keys: 2}},
			{[]string{keyNew, keyOlder, keyOld}, channels.KeyUse{Position: 3, Keys: 3}},
			{[]string{keyOld}, channels.KeyUse{Position: 1, Keys: 1}},
		} {
			d := channels.NewDecoder(channels.StaticKeys{Tenants: map[int64][]string{1001: tt.keys}})
			res, err := d.Decode(value)
			require.NoError(t, err)
			require.Equal(t, tt.want, res.APIv3Key, "keys %d", len(tt.keys))
		}
	})

	t.Run("a tenant on the default key uses position 1 of 1", func(t *testing.T) {
		other := trade
		other.TenantID = 1002
		res, err := dec.Decode(channelstest.WeChatPayment(other, channelstest.Delivery{}))
		require.NoError(t, err)
		require.Equal(t, channels.KeyUse{Position: 1, Keys: 1}, res.APIv3Key)
	})

	t.Run("the default key is not tried for a tenant with keys of its own", func(t *testing.T) {
		res, err := dec.Decode(channelstest.WeChatPayment(trade, channelstest.Delivery{}))
		require.Equal(t, channels.KindDecryptFailed, kindOf(t, err))
		require.Equal(t, channels.KeyUse{}, res.APIv3Key)
	})

	t.Run("decrypt_failed only when every key fails", func(t *testing.T) {
		res, err := dec.Decode(channelstest.WeChatPayment(trade, channelstest.Delivery{APIv3Key: keyStray}))
		require.Equal(t, channels.KindDecryptFailed, kindOf(t, err))
		require.ErrorContains(t, err, "tenant 1001 failed authentication with each of its 2 keys")
		for _, k := range []string{keyNew, keyOld, keyStray, "NNNNNNNN", "OOOOOOOO"} {
			require.NotContains(t, err.Error(), k)
		}
		require.Equal(t, channels.KeyUse{}, res.APIv3Key)
		require.Equal(t, int64(1001), res.Event.TenantID)
		require.Equal(t, channels.WeChat, res.Event.Channel)
	})

	t.Run("a key of the wrong length anywhere in the list is no_key", func(t *testing.T) {
		d := channels.NewDecoder(channels.StaticKeys{Tenants: map[int64][]string{1001: {keyNew, "short-old-key"}}})
		_, err := d.Decode(channelstest.WeChatPayment(trade, channelstest.Delivery{APIv3Key: keyNew}))
		require.Equal(t, channels.KindNoKey, kindOf(t, err))
		require.ErrorContains(t, err, "key 2 of 2 for tenant 1001 is 13 bytes")
		require.NotContains(t, err.Error(), "short-old-key")
	})

	t.Run("a decrypted resource that is refused still reports its key", func(t *testing.T) {
		value := channelstest.WeChatPayment(trade, channelstest.Delivery{
			APIv3Key: keyOld,
			Edit:     func(p map[string]any) { p["amount"].(map[string]any)["total"] = 0 },
		})
		res, err := dec.Decode(value)
		require.Equal(t, channels.KindInvalidAmount, kindOf(t, err))
		require.Equal(t, channels.KeyUse{Position: 2, Keys: 2}, res.APIv3Key)
	})

	t.Run("other channels report no key", func(t *testing.T) {
		res, err := dec.Decode(channelstest.AlipayPayment(channelstest.NewTrade(channels.Alipay, 1), channelstest.Delivery{}))
		require.NoError(t, err)
		require.Equal(t, channels.KeyUse{}, res.APIv3Key)
	})
}

func TestAccept(t *testing.T) {
	wechat := channelstest.WeChatPayment(channelstest.NewTrade(channels.WeChat, 1), channelstest.Delivery{})
	alipay := channelstest.AlipayPayment(channelstest.NewTrade(channels.Alipay, 2), channelstest.Delivery{})
	sqb := channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 3), channelstest.Delivery{})

	t.Run("every channel by default", func(t *testing.T) {
		for _, v := range [][]byte{wechat, alipay, sqb} {
			_, err := testDecoder().Decode(v)
			require.NoError(t, err)
		}
	})

	t.Run("a known channel left out is unknown_channel naming the setting", func(t *testing.T) {
		d := channels.NewDecoder(channelstest.Keys(), channels.Accept("PAYCB_CHANNELS", channels.WeChat, channels.SQB))
		for _, v := range [][]byte{wechat, sqb} {
			_, err := d.Decode(v)
			require.NoError(t, err)
		}
		res, err := d.Decode(alipay)
		require.Equal(t, channels.KindUnknownChannel, kindOf(t, err))
		require.EqualError(t, err, "unknown_channel: channel ALIPAY is not accepted by this instance (PAYCB_CHANNELS=WECHAT,SQB)")
		require.Equal(t, channels.Alipay, res.Event.Channel, "the channel stays a bounded label")
		require.Equal(t, int64(1001), res.Event.TenantID)
	})

	t.Run("a channel left out is refused before its body is read", func(t *testing.T) {
		d := channels.NewDecoder(nil, channels.Accept("PAYCB_CHANNELS", channels.Alipay))
		_, err := d.Decode(wechat)
		require.Equal(t, channels.KindUnknownChannel, kindOf(t, err), "not no_key: the body is never decrypted")
	})

	t.Run("an unknown channel is still unknown_channel", func(t *testing.T) {
		d := channels.NewDecoder(nil, channels.Accept("PAYCB_CHANNELS", channels.Alipay))
		_, err := d.Decode(envelope("PAYPAL", "{}"))
		require.Equal(t, channels.KindUnknownChannel, kindOf(t, err))
	})

	t.Run("accepting none refuses all", func(t *testing.T) {
		d := channels.NewDecoder(channelstest.Keys(), channels.Accept("PAYCB_CHANNELS"))
		for _, v := range [][]byte{wechat, alipay, sqb} {
			_, err := d.Decode(v)
			require.Equal(t, channels.KindUnknownChannel, kindOf(t, err))
		}
	})
}

func TestParseChannels(t *testing.T) {
	chs, err := channels.ParseChannels([]string{"SQB", "WECHAT"})
	require.NoError(t, err)
	require.Equal(t, []channels.Channel{channels.SQB, channels.WeChat}, chs)

	for _, tt := range []struct {
		name  string
		codes []string
		want  string
	}{
		{"empty", nil, "no channel"},
		{"unknown", []string{"WECHAT", "PAYPAL"}, `unknown channel "PAYPAL"`},
		{"lower case", []string{"wechat"}, `unknown channel "wechat"`},
		{"twice", []string{"SQB", "SQB"}, "channel SQB listed twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := channels.ParseChannels(tt.codes)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// kindOf requires err to be a typed decode error and returns its kind.
func kindOf(tb testing.TB, err error) channels.ErrorKind {
	tb.Helper()
	require.Error(tb, err)
	kind, ok := channels.KindOf(err)
	require.True(tb, ok, "untyped error %v", err)
	return kind
}
