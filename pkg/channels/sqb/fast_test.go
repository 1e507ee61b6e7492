package sqb

import (
	"reflect"
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
)

// FuzzFastSQB holds the one-pass Shouqianba body decoder to the standard
// path (channels.DecodeJSON), repeated member names included.
func FuzzFastSQB(f *testing.F) {
	f.Add([]byte(`{"sn":"7893259273495827","client_sn":"POS20240601000123","client_tsn":"POS20240601000123","order_status":"PAID","status":"SUCCESS","total_amount":"2580","net_amount":"2580","finish_time":"1717214405000","channel_finish_time":"1717214404000","payway":"3","subject":"\u5496\u5561"}`))
	f.Add([]byte(`{"result_code":"200","biz_response":{"result_code":"REFUND_SUCCESS","data":{"sn":"789","client_sn":"POS1","order_status":"PARTIAL_REFUNDED","status":"SUCCESS","total_amount":"2580","net_amount":"1580","refund_request_no":"RF-1","finish_time":"1717225812000"}}}`))
	f.Add([]byte(`{"biz_response":{"data":null}}`))
	f.Add([]byte(`{"biz_response":{}}`))
	f.Add([]byte(`{"SN":"x","sn":"y"}`))
	f.Add([]byte(`{"total_amount":2580}`))
	f.Add([]byte(`{"terminal_sn":"01939202039923029","sn":"1","biz_response":{"data":{"terminal_sn":"100000000000000001"}}}`))
	f.Add([]byte(`{"TERMINAL_SN":"x","terminal_sn":"y"}`))
	f.Add([]byte(`{"total_amount":"100","total_amount":"999900"}`))
	f.Add([]byte(`{"payway":"3","PayWay":"2","sn":"1"}`))
	f.Add([]byte(`{"sn":"1","payment_list":[{"type":"A","type":"B"}]}`))
	f.Add([]byte(`{"biz_response":{"data":{"sn":"1","net_amount":"1","Net_Amount":"2"},"x":1,"x":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast sqbBody
		if !fastSQB(data, &fast) {
			return
		}
		var ref sqbBody
		if err := channels.DecodeJSON(data, &ref); err != nil {
			t.Fatalf("fast path accepted %q, the standard path refuses: %v", data, err)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("fast path %+v, standard path %+v for %q", fast, ref, data)
		}
	})
}
