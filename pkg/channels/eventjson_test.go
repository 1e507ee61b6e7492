package channels_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// TestAppendJSONIsEncodingJSON: the hand-written encoding is
// encoding/json's, byte for byte, for decoded events and for hostile
// strings alike.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	cases := []channels.Event{
		{},
		{
			TenantID: 1001, Channel: channels.WeChat, Type: eventkey.RefundSucceeded, TradeNo: "4200002211",
			MerchantOrderNo: "POS-1", RefundNo: "rf-1", OrderTotal: 2580, RefundAmount: 100, Currency: "CNY",
			OccurredAt: at, ReceivedAt: at.Add(time.Second), RawStatus: "SUCCESS",
			Key: "WECHAT:4200002211:REFUND_SUCCEEDED:rf-1", Fingerprint: "ab12",
		},
		{TenantID: 1001, Channel: channels.SQB, TradeNo: "7894259244067349", BoundMerchant: "1122234-dewls02s2<&>"},
		{TenantID: 1001, Channel: channels.SQB, TradeNo: "7894259244067350", StatementMerchant: "1122234-dewls02s2<&>"},
		{TenantID: -7, RawStatus: "<a href=\"x\">&</a>\\\n\r\t\b\f\x00\x1f\u2028\u2029 \xff\xfe 退款成功 😀", MerchantOrderNo: "\u007f\xc3"},
	}
	for i, ev := range cases {
		want, err := json.Marshal(ev)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(ev.AppendJSON(nil)), "case %d", i)
	}
}

// FuzzAppendJSON holds AppendJSON to encoding/json for any strings.
func FuzzAppendJSON(f *testing.F) {
	f.Add("4200002211", "POS-1", "rf-1", "SUCCESS", int64(2580), int64(1700000000123456789))
	f.Add("<>&\u2028", "\xff", "\"\\", "\x00", int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, trade, merchant, refund, raw string, amount, nanos int64) {
		at := time.Unix(0, nanos).UTC()
		ev := channels.Event{
			TenantID: amount, Channel: channels.Channel(trade), TradeNo: trade, MerchantOrderNo: merchant,
			RefundNo: refund, RawStatus: raw, OrderTotal: amount, Key: eventkey.Key(refund), OccurredAt: at, ReceivedAt: at,
			BoundMerchant: merchant, StatementMerchant: refund,
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Skip("json.Marshal refuses it (a time outside 0–9999)")
		}
		if got := ev.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
		}
	})
}
