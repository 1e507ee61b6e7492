package alipay

import "github.com/paycallback/paycallback/pkg/channels"

// Code is the channel's code: of envelopes, keys, order rows, accounts and
// metric labels.
const Code channels.Channel = "ALIPAY"

// Spec is the channel as the callback registry knows it; package
// allchannels registers it.
func Spec() channels.Spec {
	return channels.Spec{
		Code: Code, Name: "Alipay", ContentType: channels.ContentTypeForm, Refunds: channels.CumulativeRefunds,
		MerchantField:          "seller_id",
		AppField:               "app_id",
		StatementMerchantField: "the #账号 header",
		FingerprintFields: []string{
			"trade_status and refund_fee", "total_amount", "refund_fee", "(CNY)", "out_trade_no",
		},
		Decode:      func(env channels.Envelope, _ channels.KeyProvider) (channels.Result, error) { return decodeAlipay(env) },
		RefundQuery: "alipay.trade.fastpay.refund.query for each refund request number of the trade",

		ReadQueryAnswer: specReadAnswer,
		ParsePublicKey:  specParsePublicKey,
	}
}
