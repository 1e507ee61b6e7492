package sqb_test

import (
	"strings"
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// TestSQBBodyWithARepeatedMemberIsMalformed: a Shouqianba body that names
// a member twice, exactly or in another case, at any depth, is refused:
// encoding/json would take the last total_amount (999900 where the
// receiver may have checked 101) and the last terminal_sn.
func TestSQBBodyWithARepeatedMemberIsMalformed(t *testing.T) {
	apiResponse := `{"result_code":"200","biz_response":{"result_code":"REFUND_SUCCESS","data":` + sqbDocPayment + `}}`
	mustDecode(t, envelope(channels.SQB, apiResponse))
	for _, tt := range []struct{ name, body, repeated string }{
		{"total_amount twice", channelstest.WithMembers(sqbDocPayment, `"total_amount":"999900"`), "total_amount"},
		{"total_amount in upper case", channelstest.WithMembers(sqbDocPayment, `"TOTAL_AMOUNT":"999900"`), "TOTAL_AMOUNT"},
		{"total_amount escaped", channelstest.WithMembers(sqbDocPayment, `"total\u005famount":"999900"`), "total_amount"},
		{"terminal_sn twice", channelstest.WithMembers(sqbDocPayment, `"terminal_sn":"999900"`), "terminal_sn"},
		{"a member the decoder does not read", channelstest.WithMembers(sqbDocPayment, `"Payway":"999900"`), "Payway"},
		{"in payment_list", strings.Replace(sqbDocPayment, `"amount_total":"1"}`, `"amount_total":"1","AMOUNT_TOTAL":"999900"}`, 1), "AMOUNT_TOTAL"},
		{"in biz_response.data", strings.Replace(apiResponse, `"net_amount":"101"`, `"net_amount":"101","Net_Amount":"999900"`, 1), "Net_Amount"},
		{"biz_response twice", channelstest.WithMembers(apiResponse, `"BIZ_RESPONSE":{"data":{"total_amount":"999900"}}`), "BIZ_RESPONSE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			channelstest.RequireRepeatRefused(t, testDecoder(), envelope(channels.SQB, tt.body), tt.repeated, "999900")
		})
	}
}
