package wechat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
)

// FuzzFastWeChat holds the one-pass WeChat notification decoder to the
// standard path (channels.DecodeJSON), repeated member names included.
func FuzzFastWeChat(f *testing.F) {
	f.Add([]byte(`{"id":"EV-1","create_time":"2024-06-01T12:00:06+08:00","resource_type":"encrypt-resource","event_type":"TRANSACTION.SUCCESS","summary":"\u652f\u4ed8","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM","ciphertext":"a5+/=","associated_data":"transaction","nonce":"A1b2C3d4E5f6"},"extra":[1,{"x":[true,false,"y"]},-3]}`))
	f.Add([]byte(`{"Event_Type":"x","event_type":"y"}`))
	f.Add([]byte(`{"resource":{"nonce":"a","NONCE":"b"}}`))
	f.Add([]byte(`{"event_type":"x","event_type":"y"}`))
	f.Add([]byte(`{"summary":"a","Summary":"b","id":"1"}`))
	f.Add([]byte(`{"resource":{"extra":{"k":[{"a":1,"A":2}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast wechatNotification
		if !fastWeChat(data, &fast) {
			return
		}
		var ref wechatNotification
		if err := channels.DecodeJSON(data, &ref); err != nil {
			t.Fatalf("fast path accepted %q, the standard path refuses: %v", data, err)
		}
		if fast != ref {
			t.Fatalf("fast path %+v, standard path %+v for %q", fast, ref, data)
		}
	})
}

// FuzzFastWeChatResource holds the one-pass decoders of decrypted
// transactions and refunds to the standard path (channels.DecodeJSON),
// repeated member names included.
func FuzzFastWeChatResource(f *testing.F) {
	f.Add([]byte(`{"mchid":"1230000109","appid":"wxd678efh567hg6787","out_trade_no":"POS20240601000123","transaction_id":"4200002211202406011234567890","trade_type":"MICROPAY","trade_state":"SUCCESS","trade_state_desc":"支付成功","bank_type":"OTHERS","attach":"","success_time":"2024-06-01T12:00:05+08:00","payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},"amount":{"total":2580,"payer_total":2580,"currency":"CNY","payer_currency":"CNY"}}`))
	f.Add([]byte(`{"mchid":"1230000109","transaction_id":"4200002211202406011234567890","out_trade_no":"POS20240601000123","refund_id":"50300909932024060112345678901","out_refund_no":"RF20240601000123-1","refund_status":"SUCCESS","success_time":"2024-06-01T15:30:12+08:00","user_received_account":"x","amount":{"total":2580,"refund":1000,"payer_total":2580,"payer_refund":1000}}`))
	f.Add([]byte(`{"amount":{"total":-1,"Refund":2}}`))
	f.Add([]byte(`{"amount":{"total":100,"TOTAL":999900}}`))
	f.Add([]byte(`{"amount":{"currency":"USD","payer_currency":"CNY","Payer_Currency":"USD"}}`))
	f.Add([]byte(`{"payer":{"openid":"a","openid":"b"},"mchid":"1"}`))
	f.Add([]byte(`{"appid":"a","AppID":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fastTx, refTx wechatTransaction
		if fastWeChatTransaction(data, &fastTx) {
			if err := channels.DecodeJSON(data, &refTx); err != nil {
				t.Fatalf("fast path accepted transaction %q, the standard path refuses: %v", data, err)
			}
			if fastTx != refTx {
				t.Fatalf("transaction: fast path %+v, standard path %+v for %q", fastTx, refTx, data)
			}
		}
		var fastRf, refRf wechatRefund
		if fastWeChatRefund(data, &fastRf) {
			if err := channels.DecodeJSON(data, &refRf); err != nil {
				t.Fatalf("fast path accepted refund %q, the standard path refuses: %v", data, err)
			}
			if fastRf != refRf {
				t.Fatalf("refund: fast path %+v, standard path %+v for %q", fastRf, refRf, data)
			}
		}
	})
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
