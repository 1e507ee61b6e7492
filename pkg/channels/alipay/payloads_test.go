package alipay_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// TestPayloadFiles decodes the realistic bodies kept in testdata/payloads
// (WeChat ones are encrypted with the channelstest key).
func TestPayloadFiles(t *testing.T) {
	tests := []struct {
		file       string
		ch         channels.Channel
		typ        eventkey.EventType // "" = ignored
		refundNo   string
		cumulative int64
	}{
		{"alipay_payment.form", channels.Alipay, eventkey.PaymentReceived, "", 0},
		{"alipay_partial_refund.form", channels.Alipay, eventkey.RefundSucceeded, "RF-1", 1000},
		{"alipay_full_refund.form", channels.Alipay, eventkey.RefundSucceeded, "RF-2", 2580},
		{"alipay_unpaid_close.form", channels.Alipay, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "payloads", tt.file))
			require.NoError(t, err)
			res := mustDecode(t, envelope(tt.ch, strings.TrimSpace(string(b))))
			if tt.typ == "" {
				require.True(t, res.Ignored)
				return
			}
			require.False(t, res.Ignored, res.IgnoreReason)
			require.Equal(t, tt.typ, res.Event.Type)
			require.Equal(t, tt.refundNo, res.Event.RefundNo)
			require.Equal(t, tt.cumulative, res.Event.CumulativeRefunded)
			require.Equal(t, int64(2580), res.Event.OrderTotal)
		})
	}
}
