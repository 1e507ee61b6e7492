package alipay

import (
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

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

		ParseQueryCredentials: parseQueryCredentials,
		BuildQuery:            buildQuery,
		ReadQueryAnswer:       specReadAnswer,
		ParsePublicKey:        specParsePublicKey,
	}
}

// parseQueryCredentials reads an ALIPAY entry of
// PAYCB_QUERY_CREDENTIALS_FILE: app_id and private_key_file.
func parseQueryCredentials(e channels.QueryCredentialsEntry) (channels.QueryCredentials, error) {
	if err := e.CheckFields([]string{"app_id", "private_key_file"}); err != nil {
		return nil, err
	}
	pem, err := e.File("private_key_file")
	if err != nil {
		return nil, err
	}
	key, err := ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("alipay credentials of merchant %s: %w", channels.Quote(e.MerchantID), err)
	}
	c := Credentials{TenantID: e.TenantID, MerchantID: e.MerchantID, AppID: e.Fields["app_id"], PrivateKeyFile: e.Fields["private_key_file"], PrivateKey: key}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// buildQuery is BuildQueryRequest for credentials parseQueryCredentials
// read.
func buildQuery(target channels.QueryTarget, creds channels.QueryCredentials, baseURL string, now time.Time, nonce string) (channels.QueryRequest, error) {
	c, ok := creds.(Credentials)
	if !ok {
		return channels.QueryRequest{}, fmt.Errorf("alipay query: credentials are %T, not alipay's", creds)
	}
	return BuildQueryRequest(target, c, baseURL, now, nonce)
}
