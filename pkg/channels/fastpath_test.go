package channels

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzFastEnvelope holds the one-pass envelope decoder to encoding/json:
// whenever it accepts an input, encoding/json accepts it too and decodes the
// same envelope.
func FuzzFastEnvelope(f *testing.F) {
	f.Add([]byte(`{"tenant_id":1001,"channel":"WECHAT","received_at":"2026-12-02T10:00:00.123+08:00","content_type":"application/json","body":"{\"a\":\"\u4e2d\\u00e9\\n\"}"}`))
	f.Add([]byte(` { "body" : "x" , "tenant_id" : -0 } `))
	f.Add([]byte(`{"tenant_id":1e3}`))
	f.Add([]byte(`{"body":"\ud83d\ude00"}`))
	f.Add([]byte(`{}`))
	// Runs of backslashes before a quote: even ends the string, odd escapes it.
	f.Add([]byte(`{"body":"a\\","channel":"\\\"x\"\\\\"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast Envelope
		if !fastEnvelope(data, &fast) {
			return
		}
		var ref Envelope
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses: %v", data, err)
		}
		if fast.TenantID != ref.TenantID || fast.Channel != ref.Channel || fast.ContentType != ref.ContentType ||
			fast.Body != ref.Body || !fast.ReceivedAt.Equal(ref.ReceivedAt) {
			t.Fatalf("fast path %+v, encoding/json %+v for %q", fast, ref, data)
		}
		_, fastOffset := fast.ReceivedAt.Zone()
		_, refOffset := ref.ReceivedAt.Zone()
		if fastOffset != refOffset {
			t.Fatalf("zone offsets differ for %q", data)
		}
	})
}

// FuzzFastWeChat holds the one-pass WeChat notification decoder to
// encoding/json.
func FuzzFastWeChat(f *testing.F) {
	f.Add([]byte(`{"id":"EV-1","create_time":"2024-06-01T12:00:06+08:00","resource_type":"encrypt-resource","event_type":"TRANSACTION.SUCCESS","summary":"\u652f\u4ed8","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM","ciphertext":"a5+/=","associated_data":"transaction","nonce":"A1b2C3d4E5f6"},"extra":[1,{"x":[true,false,"y"]},-3]}`))
	f.Add([]byte(`{"Event_Type":"x","event_type":"y"}`))
	f.Add([]byte(`{"resource":{"nonce":"a","NONCE":"b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast wechatNotification
		if !fastWeChat(data, &fast) {
			return
		}
		var ref wechatNotification
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses: %v", data, err)
		}
		if fast != ref {
			t.Fatalf("fast path %+v, encoding/json %+v for %q", fast, ref, data)
		}
	})
}

// FuzzFastWeChatResource holds the one-pass decoders of decrypted
// transactions and refunds to encoding/json.
func FuzzFastWeChatResource(f *testing.F) {
	f.Add([]byte(`{"mchid":"1230000109","appid":"wxd678efh567hg6787","out_trade_no":"POS20240601000123","transaction_id":"4200002211202406011234567890","trade_type":"MICROPAY","trade_state":"SUCCESS","trade_state_desc":"支付成功","bank_type":"OTHERS","attach":"","success_time":"2024-06-01T12:00:05+08:00","payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},"amount":{"total":2580,"payer_total":2580,"currency":"CNY","payer_currency":"CNY"}}`))
	f.Add([]byte(`{"mchid":"1230000109","transaction_id":"4200002211202406011234567890","out_trade_no":"POS20240601000123","refund_id":"50300909932024060112345678901","out_refund_no":"RF20240601000123-1","refund_status":"SUCCESS","success_time":"2024-06-01T15:30:12+08:00","user_received_account":"x","amount":{"total":2580,"refund":1000,"payer_total":2580,"payer_refund":1000}}`))
	f.Add([]byte(`{"amount":{"total":-1,"Refund":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fastTx, refTx wechatTransaction
		if fastWeChatTransaction(data, &fastTx) {
			if err := json.Unmarshal(data, &refTx); err != nil {
				t.Fatalf("fast path accepted transaction %q, encoding/json refuses: %v", data, err)
			}
			if fastTx != refTx {
				t.Fatalf("transaction: fast path %+v, encoding/json %+v for %q", fastTx, refTx, data)
			}
		}
		var fastRf, refRf wechatRefund
		if fastWeChatRefund(data, &fastRf) {
			if err := json.Unmarshal(data, &refRf); err != nil {
				t.Fatalf("fast path accepted refund %q, encoding/json refuses: %v", data, err)
			}
			if fastRf != refRf {
				t.Fatalf("refund: fast path %+v, encoding/json %+v for %q", fastRf, refRf, data)
			}
		}
	})
}

// FuzzFastSQB holds the one-pass Shouqianba body decoder to encoding/json.
func FuzzFastSQB(f *testing.F) {
	f.Add([]byte(`{"sn":"7893259273495827","client_sn":"POS20240601000123","client_tsn":"POS20240601000123","order_status":"PAID","status":"SUCCESS","total_amount":"2580","net_amount":"2580","finish_time":"1717214405000","channel_finish_time":"1717214404000","payway":"3","subject":"\u5496\u5561"}`))
	f.Add([]byte(`{"result_code":"200","biz_response":{"result_code":"REFUND_SUCCESS","data":{"sn":"789","client_sn":"POS1","order_status":"PARTIAL_REFUNDED","status":"SUCCESS","total_amount":"2580","net_amount":"1580","refund_request_no":"RF-1","finish_time":"1717225812000"}}}`))
	f.Add([]byte(`{"biz_response":{"data":null}}`))
	f.Add([]byte(`{"biz_response":{}}`))
	f.Add([]byte(`{"SN":"x","sn":"y"}`))
	f.Add([]byte(`{"total_amount":2580}`))
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

// FuzzAlipayForm holds the Alipay form scanner to url.ParseQuery: both
// accept the same bodies (bar repeated decoder fields, which the scanner
// refuses) and read the same values.
func FuzzAlipayForm(f *testing.F) {
	f.Add("trade_no=1&total_amount=0.01&gmt_payment=2023-05-29+15%3A28%3A53&x=%E4%B8%AD")
	f.Add("a=%zz&trade_no=1")
	f.Add("trade_no=1;x=2")
	f.Add("trade_no=1&trade_no=2")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := parseAlipayForm(body)
		ref, refErr := url.ParseQuery(body)
		repeated := false
		for _, k := range alipayFields {
			if len(ref[k]) > 1 {
				repeated = true
			}
		}
		if err != nil {
			if refErr == nil && !repeated {
				t.Fatalf("scanner refuses %q (%v), url.ParseQuery accepts", body, err)
			}
			return
		}
		if refErr != nil || repeated {
			t.Fatalf("scanner accepts %q, url.ParseQuery: %v, repeated %v", body, refErr, repeated)
		}
		for _, k := range alipayFields {
			if form.get(k) != ref.Get(k) {
				t.Fatalf("field %s: scanner %q, url.ParseQuery %q", k, form.get(k), ref.Get(k))
			}
		}
	})
}

// TestFastEnvelopeBackslashRuns: the closing quote of a string is the
// first one after an even run of backslashes.
func TestFastEnvelopeBackslashRuns(t *testing.T) {
	for _, data := range []string{
		`{"body":"a\\","channel":"b"}`,
		`{"body":"\\\"x\"\\\\","channel":"\\"}`,
		`{"body":"\"\"","channel":"\u005c\""}`,
		`{"body":"\\\\\\"}`,
	} {
		var fast, ref Envelope
		if !fastEnvelope([]byte(data), &fast) {
			t.Fatalf("fast path refused %s", data)
		}
		if err := json.Unmarshal([]byte(data), &ref); err != nil {
			t.Fatalf("encoding/json refused %s: %v", data, err)
		}
		if fast.Body != ref.Body || fast.Channel != ref.Channel {
			t.Fatalf("%s: fast %q %q, encoding/json %q %q", data, fast.Body, fast.Channel, ref.Body, ref.Channel)
		}
	}
	var env Envelope
	if fastEnvelope([]byte(`{"body":"a\\\"}`), &env) {
		t.Fatal("an escaped closing quote leaves the string open")
	}
}

// TestFastWeChatReadsPublishedResources: the one-pass decoders read the
// published decrypted resources (testdata/published/wechat), cross-border
// ones included, exactly as encoding/json does, so the currency check
// before the key runs on the fast path too.
func TestFastWeChatReadsPublishedResources(t *testing.T) {
	for _, tt := range []struct {
		file   string
		refund bool
	}{
		{"skit_transaction_resource.json", false},
		{"skit_partner_transaction_resource.json", false},
		{"skit_global_transaction_resource.json", false},
		{"skit_refund_resource.json", true},
		{"skit_partner_refund_resource.json", true},
		{"skit_global_refund_resource.json", true},
	} {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "published", "wechat", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if tt.refund {
				var fast, ref wechatRefund
				if !fastWeChatRefund(data, &fast) {
					t.Fatal("fast path refused the published refund")
				}
				if err := json.Unmarshal(data, &ref); err != nil || fast != ref {
					t.Fatalf("fast %+v, encoding/json %+v (%v)", fast, ref, err)
				}
				return
			}
			var fast, ref wechatTransaction
			if !fastWeChatTransaction(data, &fast) {
				t.Fatal("fast path refused the published transaction")
			}
			if err := json.Unmarshal(data, &ref); err != nil || fast != ref {
				t.Fatalf("fast %+v, encoding/json %+v (%v)", fast, ref, err)
			}
		})
	}
}
