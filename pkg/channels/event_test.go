package channels_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

func TestEventJSONRoundTrip(t *testing.T) {
	for _, ch := range channels.Codes() {
		trade := channelstest.NewTrade(ch, 31)
		for name, v := range map[string][]byte{
			"payment": channelstest.PaymentEnvelope(trade, channelstest.Delivery{}),
			"refund":  channelstest.RefundEnvelope(trade, channelstest.Refund{No: "RF-31", Amount: 300}, channelstest.Delivery{}),
		} {
			t.Run(string(ch)+" "+name, func(t *testing.T) {
				ev := mustDecode(t, v).Event
				b, err := json.Marshal(ev)
				require.NoError(t, err)
				var back channels.Event
				require.NoError(t, json.Unmarshal(b, &back))
				require.Equal(t, ev, back)
				require.NoError(t, back.Validate())
				require.Equal(t, ev.Fingerprint, channels.Fingerprint(back))
			})
		}
	}
}

func TestFingerprint(t *testing.T) {
	base := channels.Event{
		Type: eventkey.RefundSucceeded, OrderTotal: 2580, RefundAmount: 1000,
		Currency: "CNY", MerchantOrderNo: "POS1",
	}
	fp := channels.Fingerprint(base)
	require.Regexp(t, hexFingerprint, fp)

	t.Run("ignores everything but the payload", func(t *testing.T) {
		e := base
		e.TenantID, e.Channel, e.TradeNo, e.RefundNo, e.RawStatus = 9, channels.WeChat, "T", "R", "SUCCESS"
		e.Key, e.Fingerprint = "X", "Y"
		e.OccurredAt = e.OccurredAt.AddDate(1, 0, 0)
		require.Equal(t, fp, channels.Fingerprint(e))
	})
	t.Run("covers each payload field", func(t *testing.T) {
		for name, mut := range map[string]func(*channels.Event){
			"type":       func(e *channels.Event) { e.Type = eventkey.PaymentReceived },
			"total":      func(e *channels.Event) { e.OrderTotal++ },
			"refund":     func(e *channels.Event) { e.RefundAmount++ },
			"cumulative": func(e *channels.Event) { e.CumulativeRefunded = 1 },
			"currency":   func(e *channels.Event) { e.Currency = "USD" },
			"order no":   func(e *channels.Event) { e.MerchantOrderNo = "POS2" },
			"amounts swapped": func(e *channels.Event) {
				e.RefundAmount, e.CumulativeRefunded = 0, 1000
			},
		} {
			e := base
			mut(&e)
			require.NotEqual(t, fp, channels.Fingerprint(e), name)
		}
	})
	t.Run("unambiguous string boundaries", func(t *testing.T) {
		a, b := base, base
		a.Currency, a.MerchantOrderNo = "CNY", "1POS"
		b.Currency, b.MerchantOrderNo = "CNY1", "POS"
		require.NotEqual(t, channels.Fingerprint(a), channels.Fingerprint(b))
	})
}

func TestEventValidate(t *testing.T) {
	good := mustDecode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 41), channelstest.Delivery{})).Event
	for name, mut := range map[string]func(*channels.Event){
		"stale fingerprint": func(e *channels.Event) { e.OrderTotal++ },
		"key of other trade": func(e *channels.Event) {
			e.TradeNo = "other"
		},
		"refund fields on payment": func(e *channels.Event) { e.CumulativeRefunded = 5; e.Fingerprint = channels.Fingerprint(*e) },
		"bad type":                 func(e *channels.Event) { e.Type = "X" },
		"no tenant":                func(e *channels.Event) { e.TenantID = 0 },
		"non-UTC time":             func(e *channels.Event) { e.OccurredAt = e.OccurredAt.In(channelstest.Beijing) },
	} {
		t.Run(name, func(t *testing.T) {
			e := good
			mut(&e)
			err := e.Validate()
			_, typed := channels.KindOf(err)
			require.True(t, typed, "err %v", err)
		})
	}
}

func TestKindOf(t *testing.T) {
	err := fmt.Errorf("settle: %w", &channels.Error{Kind: channels.KindOverRefund, Err: errors.New("too much")})
	kind, ok := channels.KindOf(err)
	require.True(t, ok)
	require.Equal(t, channels.KindOverRefund, kind)
	require.Equal(t, "settle: over_refund: too much", err.Error())
	_, ok = channels.KindOf(errors.New("plain"))
	require.False(t, ok)
	_, ok = channels.KindOf(nil)
	require.False(t, ok)
	for _, k := range []channels.ErrorKind{"malformed", "unknown_channel", "decrypt_failed", "no_key", "conflict", "over_refund", "invalid_amount", "unsupported", "tenant_mismatch"} {
		require.True(t, k.Valid(), k)
	}
	require.False(t, channels.ErrorKind("timeout").Valid())
}

func TestStaticKeys(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef"
	other := "ffffffffffffffffffffffffffffffff"
	older := "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
	keys := channels.StaticKeys{Default: secret, Tenants: map[int64][]string{1002: {other}, 1001: {other, older}}}
	require.NoError(t, keys.Validate())

	require.Equal(t, [][]byte{[]byte(other), []byte(older)}, keys.APIv3Keys(1001), "own keys, current first")
	require.Equal(t, [][]byte{[]byte(other)}, keys.APIv3Keys(1002))
	require.Equal(t, [][]byte{[]byte(secret)}, keys.APIv3Keys(5), "default for a tenant without keys")
	require.Empty(t, channels.StaticKeys{}.APIv3Keys(5))
	require.Empty(t, channels.StaticKeys{Tenants: map[int64][]string{5: {""}}}.APIv3Keys(5))

	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "keys", keys)
	for _, s := range []string{
		keys.String(), fmt.Sprint(keys), fmt.Sprintf("%v %+v %#v %s", keys, keys, keys, &keys), logged.String(),
	} {
		require.NotContains(t, s, secret)
		require.NotContains(t, s, other)
		require.NotContains(t, s, older)
	}
	require.Equal(t, "StaticKeys{Default: ******, Tenants: [1001:2 1002:1]}", keys.String())

	tests := []struct {
		name string
		keys channels.StaticKeys
		want string
	}{
		{"short default", channels.StaticKeys{Default: "short"}, "default wechat apiv3 key: 5 bytes"},
		{"short tenant key", channels.StaticKeys{Tenants: map[int64][]string{7: {secret, "0123456789abcdef0123456789abcde"}}}, "key 2 of tenant 7: 31 bytes"},
		{"tenant not positive", channels.StaticKeys{Tenants: map[int64][]string{-1: {secret}}}, "tenant -1"},
		{"tenant without key", channels.StaticKeys{Tenants: map[int64][]string{8: {}}}, "tenant 8: no key"},
		{"repeated key", channels.StaticKeys{Tenants: map[int64][]string{9: {secret, other, secret}}}, "key 3 of tenant 9 repeats"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.keys.Validate()
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "0123456789abcdef")
			require.NotContains(t, err.Error(), "ffffffff")
		})
	}
}

func TestChannel(t *testing.T) {
	require.True(t, channels.Alipay.Cumulative())
	require.True(t, channels.SQB.Cumulative())
	require.False(t, channels.WeChat.Cumulative())
	require.False(t, channels.Channel("wechat").Valid())
	require.Equal(t, channels.ContentTypeForm, channels.Alipay.ContentType())
}
