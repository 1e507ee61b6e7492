package alipay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
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
// PAYCB_QUERY_CREDENTIALS_FILE: app_id and private_key_file, and in
// certificate mode app_cert_file (the application certificate, whose key
// must be private_key_file's) and alipay_root_cert_file (Alipay's root
// certificate file), both or neither.
func parseQueryCredentials(e channels.QueryCredentialsEntry) (channels.QueryCredentials, error) {
	if err := e.CheckFields([]string{"app_id", "private_key_file"}, "app_cert_file", "alipay_root_cert_file"); err != nil {
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
	appCert, rootCert := e.Fields["app_cert_file"], e.Fields["alipay_root_cert_file"]
	if (appCert == "") != (rootCert == "") {
		return nil, fmt.Errorf("alipay credentials of merchant %s: certificate mode needs both app_cert_file and alipay_root_cert_file", channels.Quote(e.MerchantID))
	}
	if appCert != "" {
		if c.AppCertSN, err = appCertSN(e, key); err != nil {
			return nil, err
		}
		root, err := e.File("alipay_root_cert_file")
		if err != nil {
			return nil, err
		}
		if c.RootCertSN, err = RootCertSN(root); err != nil {
			return nil, fmt.Errorf("alipay credentials of merchant %s: alipay_root_cert_file: %w", channels.Quote(e.MerchantID), err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// appCertSN reads the entry's app_cert_file and returns its serial, after
// checking that the certificate's key is the public half of key: a
// certificate of another key would name an application the requests are
// not signed for.
func appCertSN(e channels.QueryCredentialsEntry, key *rsa.PrivateKey) (string, error) {
	data, err := e.File("app_cert_file")
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", fmt.Errorf("alipay credentials of merchant %s: app_cert_file holds no PEM CERTIFICATE block", channels.Quote(e.MerchantID))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("alipay credentials of merchant %s: app_cert_file does not parse as a certificate", channels.Quote(e.MerchantID))
	}
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return "", fmt.Errorf("alipay credentials of merchant %s: app_cert_file certifies another key than private_key_file's", channels.Quote(e.MerchantID))
	}
	sn, err := CertSN(data)
	if err != nil {
		return "", fmt.Errorf("alipay credentials of merchant %s: app_cert_file: %w", channels.Quote(e.MerchantID), err)
	}
	return sn, nil
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
