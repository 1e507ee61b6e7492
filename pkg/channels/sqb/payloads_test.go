package sqb_test

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
		{"sqb_payment.json", channels.SQB, eventkey.PaymentReceived, "", 0},
		{"sqb_partial_refund.json", channels.SQB, eventkey.RefundSucceeded, "RF-1", 1000},
		{"sqb_refund_api_response.json", channels.SQB, eventkey.RefundSucceeded, "RF-1", 1000},
		{"sqb_cancel.json", channels.SQB, eventkey.RefundSucceeded, "CANCEL", 2580},
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
