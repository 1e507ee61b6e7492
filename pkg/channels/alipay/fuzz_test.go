package alipay_test

import (
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// The fuzz targets check, for any input: no panic, every failure is a
// typed decoder error, and every money event validates with a parseable key
// and non-negative amounts (checkResult). Seeds live in testdata/fuzz.

func FuzzAlipay(f *testing.F) {
	for _, s := range []string{alipayRealPayment, alipayRealPartialRefund, alipayRealFullRefund} {
		f.Add(s)
	}
	d := testDecoder()
	f.Fuzz(func(t *testing.T, body string) {
		res, err := d.DecodeEnvelope(fuzzEnvelope(channels.Alipay, body))
		checkResult(t, res, err)
	})
}

func fuzzEnvelope(ch channels.Channel, body string) channels.Envelope {
	return channels.Envelope{
		TenantID: 1001, Channel: string(ch), ContentType: ch.ContentType(), Body: body,
		ReceivedAt: time.Date(2024, 6, 1, 4, 0, 6, 0, time.UTC),
	}
}
