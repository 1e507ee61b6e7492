package sqb

import (
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

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

		ParseQueryCredentials: parseQueryCredentials,
		BuildQuery:            buildQuery,
		ReadQueryAnswer:       specReadAnswer,
	}
}

// parseQueryCredentials reads an SQB entry of
// PAYCB_QUERY_CREDENTIALS_FILE: merchant_id is the terminal_sn,
// terminal_key_file holds the key alone.
func parseQueryCredentials(e channels.QueryCredentialsEntry) (channels.QueryCredentials, error) {
	if err := e.CheckFields([]string{"terminal_key_file"}); err != nil {
		return nil, err
	}
	data, err := e.File("terminal_key_file")
	if err != nil {
		return nil, err
	}
	key, err := ParseTerminalKey(data)
	if err != nil {
		return nil, fmt.Errorf("sqb credentials of terminal %s: %w", channels.Quote(e.MerchantID), err)
	}
	c := Credentials{TenantID: e.TenantID, MerchantID: e.MerchantID, TerminalKeyFile: e.Fields["terminal_key_file"], TerminalKey: key}
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
		return channels.QueryRequest{}, fmt.Errorf("sqb query: credentials are %T, not sqb's", creds)
	}
	return BuildQueryRequest(target, c, baseURL, now, nonce)
}
