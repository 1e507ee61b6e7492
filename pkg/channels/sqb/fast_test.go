package sqb

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzFastSQB holds the one-pass Shouqianba body decoder to encoding/json.
func FuzzFastSQB(f *testing.F) {
	f.Add([]byte(`{"sn":"7893259273495827","client_sn":"POS20240601000123","client_tsn":"POS20240601000123","order_status":"PAID","status":"SUCCESS","total_amount":"2580","net_amount":"2580","finish_time":"1717214405000","channel_finish_time":"1717214404000","payway":"3","subject":"\u5496\u5561"}`))
	f.Add([]byte(`{"result_code":"200","biz_response":{"result_code":"REFUND_SUCCESS","data":{"sn":"789","client_sn":"POS1","order_status":"PARTIAL_REFUNDED","status":"SUCCESS","total_amount":"2580","net_amount":"1580","refund_request_no":"RF-1","finish_time":"1717225812000"}}}`))
	f.Add([]byte(`{"biz_response":{"data":null}}`))
	f.Add([]byte(`{"biz_response":{}}`))
	f.Add([]byte(`{"SN":"x","sn":"y"}`))
	f.Add([]byte(`{"total_amount":2580}`))
	f.Add([]byte(`{"terminal_sn":"01939202039923029","sn":"1","biz_response":{"data":{"terminal_sn":"100000000000000001"}}}`))
	f.Add([]byte(`{"TERMINAL_SN":"x","terminal_sn":"y"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast sqbBody
		if !fastSQB(data, &fast) {
			return
		}
		var ref sqbBody
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("fast path %+v, encoding/json %+v for %q", fast, ref, data)
		}
	})
}
