package sqb

import "github.com/paycallback/paycallback/pkg/channels"

// Code is the channel's code: of envelopes, keys, order rows, accounts and
// metric labels.
const Code channels.Channel = "SQB"

// Spec is the channel as the callback registry knows it; package
// allchannels registers it.
func Spec() channels.Spec {
	return channels.Spec{
		Code: Code, Name: "Shouqianba", ContentType: channels.ContentTypeJSON, Refunds: channels.CumulativeRefunds,
		CancelRefundNo:         CancelRefundNo,
		MerchantField:          "terminal_sn",
		StatementMerchantField: "terminal_sn",
		FingerprintFields: []string{
			"order_status", "total_amount", "total_amount - net_amount", "(CNY)", "client_sn",
		},
		Decode:                  func(env channels.Envelope, _ channels.KeyProvider) (channels.Result, error) { return decodeSQB(env) },
		RefundMayNameNoMerchant: true,
		RefundQuery:             "/upay/v2/query of the order",
		OrderQuery:              "/upay/v2/query",

		ReadQueryAnswer: specReadAnswer,
	}
}
