package sqb_test

import (
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// The fuzz targets check, for any input: no panic, every failure is a
// typed decoder error, and every money event validates with a parseable key
// and non-negative amounts (checkResult). Seeds live in testdata/fuzz.

func FuzzSQB(f *testing.F) {
	f.Add(sqbDocPayment)
	f.Add(`{"result_code":"200","biz_response":{"data":{"sn":"1","client_sn":"c","client_tsn":"c-r","status":"SUCCESS","order_status":"PARTIAL_REFUNDED","total_amount":"100","net_amount":"40","finish_time":"1492506702864"}}}`)
	d := testDecoder()
	f.Fuzz(func(t *testing.T, body string) {
		res, err := d.DecodeEnvelope(fuzzEnvelope(channels.SQB, body))
		checkResult(t, res, err)
	})
}

func fuzzEnvelope(ch channels.Channel, body string) channels.Envelope {
	return channels.Envelope{
		TenantID: 1001, Channel: string(ch), ContentType: ch.ContentType(), Body: body,
		ReceivedAt: time.Date(2024, 6, 1, 4, 0, 6, 0, time.UTC),
	}
}
