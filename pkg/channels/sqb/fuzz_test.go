package sqb_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/stretchr/testify/require"
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

// FuzzSQBQueryAnswer checks the query answer decoder for any body: no
// panic; a failure is typed; an answer has an outcome, a raw state and a
// detail, and events only when settled, each valid with a fresh
// fingerprint, of the target's order.
func FuzzSQBQueryAnswer(f *testing.F) {
	f.Add([]byte(`{"result_code":"200","biz_response":{"result_code":"SUCCESS","data":{"terminal_sn":"T1","sn":"1","client_sn":"c","client_tsn":"c-r","status":"SUCCESS","order_status":"PARTIAL_REFUNDED","total_amount":"100","net_amount":"40","refunded_amount":"60","finish_time":"1492506702864"}}}`))
	f.Add([]byte(`{"result_code":"200","biz_response":{"result_code":"FAIL","error_code":"UPAY_ORDER_NOT_EXISTS"}}`))
	f.Add([]byte(`{"result_code":"400","error_code":"ILLEGAL_SIGN"}`))
	// The published answers and query vectors are seeds too.
	for _, pattern := range []string{"testdata/published/sqb/*.json", "testdata/query/*query*.json"} {
		files, err := filepath.Glob(pattern)
		require.NoError(f, err)
		require.NotEmpty(f, files, pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			require.NoError(f, err)
			f.Add(b)
		}
	}
	target := channels.QueryTarget{
		TenantID: 1001, Channel: sqb.Code, Kind: channels.QueryRefund, MerchantID: "T1",
		TradeNo: "1", MerchantOrderNo: "c", RefundNo: "r",
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ans, err := sqb.DecodeQueryAnswer(target, channels.QueryResponse{StatusCode: 200, Body: body, ReceivedAt: time.Unix(1717214405, 0)})
		if err != nil {
			_, ok := channels.KindOf(err)
			require.True(t, ok, "untyped error %v", err)
			require.Equal(t, channels.QueryAnswer{}, ans)
			return
		}
		require.NotEmpty(t, ans.Outcome)
		require.NotEmpty(t, ans.RawState)
		require.NotEmpty(t, ans.Detail)
		if ans.Outcome != channels.QuerySettled {
			require.Empty(t, ans.Events)
		}
		for _, ev := range ans.Events {
			require.NoError(t, ev.Validate())
			require.Equal(t, channels.Fingerprint(ev), ev.Fingerprint)
			require.Equal(t, target.TradeNo, ev.TradeNo)
			require.Equal(t, target.MerchantOrderNo, ev.MerchantOrderNo)
		}
	})
}
