package alipay

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// SignContent is the text Alipay's RSA2 signature covers: every parameter
// except sign (sign_type is kept), empty values dropped, sorted by name,
// name=value joined by '&' with the values raw (UTF-8, not URL-encoded).
func SignContent(params url.Values) string {
	keys := make([]string, 0, len(params))
	for k, vs := range params {
		if k == "sign" || len(vs) == 0 || vs[0] == "" {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(params.Get(k))
	}
	return b.String()
}

// SignRSA2 returns the base64 SHA256withRSA (PKCS#1 v1.5) signature of
// content with key. PKCS#1 v1.5 is deterministic: the same content and key
// always give the same signature.
func SignRSA2(content string, key *rsa.PrivateKey) (string, error) {
	sum := sha256.Sum256([]byte(content))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign alipay request: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyRSA2 checks the base64 SHA256withRSA signature sig of content
// with key; the error is a *channels.Error of kind unauthenticated.
func VerifyRSA2(content []byte, sig string, key *rsa.PublicKey) error {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return channels.Errorf(channels.KindUnauthenticated, "alipay signature is not base64")
	}
	sum := sha256.Sum256(content)
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], raw); err != nil {
		return channels.Errorf(channels.KindUnauthenticated, "alipay signature does not verify with the application's public key")
	}
	return nil
}

// bizContent is the biz_content of both query methods; empty members are
// left out.
type bizContent struct {
	OutTradeNo   string   `json:"out_trade_no,omitempty"`
	TradeNo      string   `json:"trade_no,omitempty"`
	OutRequestNo string   `json:"out_request_no,omitempty"`
	QueryOptions []string `json:"query_options,omitempty"`
}

// BuildQueryRequest builds the signed request that asks Alipay about
// target with cred: a POST of form parameters (app_id, method, format=JSON,
// charset=utf-8, sign_type=RSA2, timestamp in Beijing time, version=1.0,
// biz_content, sign) to baseURL (DefaultGatewayURL in production).
//
// A payment query (alipay.trade.query) names the trade by trade_no when
// the target knows it, by out_trade_no otherwise; a refund query
// (alipay.trade.fastpay.refund.query) names out_request_no (the target's
// RefundNo) and the trade the same way, and asks for gmt_refund_pay.
// In certificate mode (cred.AppCertSN set) the request carries
// app_cert_sn and alipay_root_cert_sn too, signed with the rest.
// now is the request's time; nonce is accepted for the query clients'
// common shape and unused: Alipay's requests carry none. The same
// arguments always build the same request.
//
// It fails when the target is not an ALIPAY query of a known kind, is for
// another tenant or merchant than cred, lacks the numbers its kind needs,
// or cred does not validate.
func BuildQueryRequest(target channels.QueryTarget, cred Credentials, baseURL string, now time.Time, nonce string) (channels.QueryRequest, error) {
	_ = nonce
	if err := cred.Validate(); err != nil {
		return channels.QueryRequest{}, fmt.Errorf("build alipay query: %w", err)
	}
	if err := checkTarget(target, cred); err != nil {
		return channels.QueryRequest{}, err
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return channels.QueryRequest{}, fmt.Errorf("build alipay query: base URL %s is not an http(s) URL", channels.Quote(baseURL))
	}
	biz := bizContent{TradeNo: target.TradeNo}
	if biz.TradeNo == "" {
		biz.OutTradeNo = target.MerchantOrderNo
	}
	method := MethodTradeQuery
	if target.Kind == channels.QueryRefund {
		method = MethodRefundQuery
		biz.OutRequestNo = target.RefundNo
		biz.QueryOptions = []string{"gmt_refund_pay"}
	}
	var bizJSON bytes.Buffer
	enc := json.NewEncoder(&bizJSON)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(biz); err != nil {
		return channels.QueryRequest{}, fmt.Errorf("build alipay query: encode biz_content: %w", err)
	}
	params := url.Values{
		"app_id":      {cred.AppID},
		"method":      {method},
		"format":      {"JSON"},
		"charset":     {"utf-8"},
		"sign_type":   {"RSA2"},
		"timestamp":   {now.In(shanghai).Format(TimeLayout)},
		"version":     {"1.0"},
		"biz_content": {strings.TrimSuffix(bizJSON.String(), "\n")},
	}
	if cred.AppCertSN != "" {
		params.Set("app_cert_sn", cred.AppCertSN)
		params.Set("alipay_root_cert_sn", cred.RootCertSN)
	}
	sig, err := SignRSA2(SignContent(params), cred.PrivateKey)
	if err != nil {
		return channels.QueryRequest{}, fmt.Errorf("build alipay query for app %s: %w", channels.Quote(cred.AppID), err)
	}
	params.Set("sign", sig)
	return channels.QueryRequest{
		Method: http.MethodPost,
		URL:    u.String(),
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded;charset=utf-8"}},
		Body:   []byte(params.Encode()),
	}, nil
}

// checkTarget checks that target is an ALIPAY query cred may send and that
// it names what its kind needs.
func checkTarget(target channels.QueryTarget, cred Credentials) error {
	switch {
	case target.Channel != Code:
		return fmt.Errorf("alipay query: target channel %s", channels.Quote(string(target.Channel)))
	case target.TenantID != cred.TenantID:
		return fmt.Errorf("alipay query: target tenant %d, credentials are tenant %d's", target.TenantID, cred.TenantID)
	case target.MerchantID != cred.MerchantID:
		return fmt.Errorf("alipay query: target merchant %s, credentials are merchant %s's", channels.Quote(target.MerchantID), channels.Quote(cred.MerchantID))
	case target.TradeNo == "" && target.MerchantOrderNo == "":
		return fmt.Errorf("alipay query: target names neither trade_no nor out_trade_no")
	}
	for _, id := range []struct{ name, v string }{
		{"alipay query trade_no", target.TradeNo},
		{"alipay query out_trade_no", target.MerchantOrderNo},
	} {
		if id.v == "" {
			continue
		}
		if err := channels.CheckID(id.name, id.v); err != nil {
			return err
		}
	}
	switch target.Kind {
	case channels.QueryPayment:
		return nil
	case channels.QueryRefund:
		return channels.CheckID("alipay query out_request_no", target.RefundNo)
	default:
		return fmt.Errorf("alipay query: target kind %s", channels.Quote(string(target.Kind)))
	}
}
