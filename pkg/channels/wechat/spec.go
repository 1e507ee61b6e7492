package wechat

import (
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

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

		ParseQueryCredentials: parseQueryCredentials,
		BuildQuery:            buildQuery,
		ReadQueryAnswer:       specReadAnswer,
		QueryAnswerHeaders:    AnswerHeaders,
		ParsePublicKey:        specParsePublicKey,
	}
}

// parseQueryCredentials reads a WECHAT entry of
// PAYCB_QUERY_CREDENTIALS_FILE: serial_no and private_key_file, and in
// partner mode sp_mchid (merchant_id is then the sub-merchant, serial_no
// and private_key_file the service provider's).
func parseQueryCredentials(e channels.QueryCredentialsEntry) (channels.QueryCredentials, error) {
	if err := e.CheckFields([]string{"serial_no", "private_key_file"}, "sp_mchid"); err != nil {
		return nil, err
	}
	pem, err := e.File("private_key_file")
	if err != nil {
		return nil, err
	}
	c, err := NewCredentials(e.TenantID, e.MerchantID, e.Fields["serial_no"], pem)
	if err != nil {
		return nil, err
	}
	c.ServiceProviderID = e.Fields["sp_mchid"]
	if err := c.checkIDs(); err != nil {
		return nil, err
	}
	return c, nil
}

// buildQuery is NewQueryRequest for credentials parseQueryCredentials
// read.
func buildQuery(target channels.QueryTarget, creds channels.QueryCredentials, baseURL string, now time.Time, nonce string) (channels.QueryRequest, error) {
	c, ok := creds.(Credentials)
	if !ok {
		return channels.QueryRequest{}, fmt.Errorf("wechat query: credentials are %T, not wechat's", creds)
	}
	return NewQueryRequest(target, c, baseURL, now, nonce)
}
