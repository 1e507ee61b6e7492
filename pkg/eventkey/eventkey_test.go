package eventkey_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/eventkey"
)

func TestKeyBuilder(t *testing.T) {
	long := strings.Repeat("9", eventkey.MaxKeyLen)
	cases := []struct {
		name    string
		build   func() (eventkey.Key, error)
		want    string
		wantErr string
	}{
		{
			"payment", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("WECHAT", "4200002211") },
			"WECHAT:4200002211:PAYMENT_RECEIVED", "",
		},
		{
			"refund", func() (eventkey.Key, error) { return eventkey.NewRefundKey("ALIPAY", "2023052922", "rf-1") },
			"ALIPAY:2023052922:REFUND_SUCCEEDED:rf-1", "",
		},
		{
			"refund number may hold a colon", func() (eventkey.Key, error) { return eventkey.NewRefundKey("SQB", "789", "a:b") },
			"SQB:789:REFUND_SUCCEEDED:a:b", "",
		},
		{"empty channel", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("", "1") }, "", "empty channel"},
		{"empty trade no", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("SQB", "") }, "", "empty channel trade no"},
		{"empty refund no", func() (eventkey.Key, error) { return eventkey.NewRefundKey("SQB", "1", "") }, "", "empty refund no"},
		{"colon in trade no", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("SQB", "1:2") }, "", "contains ':'"},
		{"colon in channel", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("S:QB", "1") }, "", "contains ':'"},
		{"trailing space", func() (eventkey.Key, error) { return eventkey.NewRefundKey("SQB", "1", "rf-1 ") }, "", "whitespace"},
		{"inner tab", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("SQB", "1\t2") }, "", "whitespace"},
		{"ideographic space", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("SQB", "1\u30002") }, "", "whitespace"},
		{"control character", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("SQB", "1\x002") }, "", "control character"},
		{"invalid utf-8", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("SQB", "1\xff") }, "", "UTF-8"},
		{"over 191 bytes is refused, never truncated", func() (eventkey.Key, error) { return eventkey.NewPaymentKey("SQB", long) }, "", "at most 191"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tc.build()
			if tc.wantErr != "" {
				require.ErrorIs(t, err, eventkey.ErrInvalidKey)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Empty(t, k)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, k.String())
		})
	}
}

func TestKeyExactlyAtLimit(t *testing.T) {
	prefix := "SQB:"
	suffix := ":PAYMENT_RECEIVED"
	trade := strings.Repeat("7", eventkey.MaxKeyLen-len(prefix)-len(suffix))
	k, err := eventkey.NewPaymentKey("SQB", trade)
	require.NoError(t, err)
	assert.Len(t, k.String(), eventkey.MaxKeyLen)
	_, err = eventkey.NewPaymentKey("SQB", trade+"7")
	require.ErrorIs(t, err, eventkey.ErrInvalidKey)
}

func TestKeysDifferingInCaseAreDifferent(t *testing.T) {
	lower, err := eventkey.NewRefundKey("WECHAT", "42", "rf-1")
	require.NoError(t, err)
	upper, err := eventkey.NewRefundKey("WECHAT", "42", "RF-1")
	require.NoError(t, err)
	assert.NotEqual(t, lower, upper)
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in      string
		typ     eventkey.EventType
		wantErr bool
	}{
		{"WECHAT:1:PAYMENT_RECEIVED", eventkey.PaymentReceived, false},
		{"WECHAT:1:REFUND_SUCCEEDED:r:1", eventkey.RefundSucceeded, false},
		{"WECHAT:1:PAYMENT_RECEIVED:x", "", true},
		{"WECHAT:1:REFUND_SUCCEEDED", "", true},
		{"WECHAT:1:SOMETHING", "", true},
		{"WECHAT:1", "", true},
		{"WECHAT::PAYMENT_RECEIVED", "", true},
		{"", "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			k, typ, err := eventkey.ParseKey(tc.in)
			if tc.wantErr {
				require.ErrorIs(t, err, eventkey.ErrInvalidKey)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.in, k.String())
			assert.Equal(t, tc.typ, typ)
		})
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"WECHAT:1:PAYMENT_RECEIVED", "ALIPAY:2:REFUND_SUCCEEDED:a:b", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, typ, err := eventkey.ParseKey(s)
		if err != nil {
			require.ErrorIs(t, err, eventkey.ErrInvalidKey)
			return
		}
		require.Equal(t, s, k.String(), "a valid key parses to itself")
		require.True(t, typ.Valid())
		require.LessOrEqual(t, len(s), eventkey.MaxKeyLen)
		require.NotContains(t, s, " ")
	})
}
