package wechat

import "github.com/paycallback/paycallback/pkg/channels"

// Code is the channel's code: of envelopes, keys, order rows, accounts and
// metric labels.
const Code channels.Channel = "WECHAT"

// Spec is the channel as the callback registry knows it; package
// allchannels registers it.
func Spec() channels.Spec {
	return channels.Spec{
		Code: Code, Name: "WeChat Pay", ContentType: channels.ContentTypeJSON, Refunds: channels.PerRefund,
		MerchantField:          "mchid or sub_mchid",
		StatementMerchantField: "商户号 or 特约商户号",
		FingerprintFields: []string{
			"event_type", "amount.total", "amount.refund", "amount.currency", "out_trade_no",
		},
		Decode:        decodeWeChat,
		NeedsAPIv3Key: true,
		ViewResource:  viewWeChatResource,
		RefundQuery:   "WeChat GET /v3/refund/domestic/refunds/{out_refund_no}",

		ReadQueryAnswer:    specReadAnswer,
		QueryAnswerHeaders: AnswerHeaders,
		ParsePublicKey:     specParsePublicKey,
	}
}
