package wechat

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Query request building and signing (docs/queries.md, WeChat section):
// WeChat Pay API v3's WECHATPAY2-SHA256-RSA2048 scheme over
// "METHOD\nURL\ntimestamp\nnonce\nbody\n", URL being the path and query
// exactly as sent.

// QueryBaseURL is WeChat Pay's production API base URL.
const QueryBaseURL = "https://api.mch.weixin.qq.com"

// AuthScheme is the Authorization scheme of requests and the
// Wechatpay-Signature-Type of answers.
const AuthScheme = "WECHATPAY2-SHA256-RSA2048"

// The answer's signature headers.
const (
	HeaderTimestamp     = "Wechatpay-Timestamp"
	HeaderNonce         = "Wechatpay-Nonce"
	HeaderSignature     = "Wechatpay-Signature"
	HeaderSerial        = "Wechatpay-Serial"
	HeaderSignatureType = "Wechatpay-Signature-Type"
)

// UserAgent is the User-Agent of query requests: WeChat Pay asks API
// clients to send one, as its SDKs do.
const UserAgent = "paycallback-querier"

// maxNonceLen caps a request or answer nonce (WeChat's are 32 characters).
const maxNonceLen = 64

// NewQueryRequest builds and signs the GET request asking about target
// with creds, for the API at baseURL (QueryBaseURL in production; scheme
// and host only), at now with nonce (1 to 64 ASCII letters and digits,
// fresh for every request; both injected so the signature is
// reproducible).
//
// A payment query asks by TradeNo (transaction_id) when the target has
// one, else by MerchantOrderNo (out_trade_no): GET
// /v3/pay/transactions/id/{transaction_id}?mchid= or
// /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=. A refund query
// asks by RefundNo: GET /v3/refund/domestic/refunds/{out_refund_no}. Path
// segments are escaped, and the URL signed is the one sent.
//
// In partner mode (creds.ServiceProviderID set) the service provider asks
// about its sub-merchant: GET
// /v3/pay/partner/transactions/id/{transaction_id}?sp_mchid=&sub_mchid=
// or …/out-trade-no/{out_trade_no}?sp_mchid=&sub_mchid=, and
// /v3/refund/domestic/refunds/{out_refund_no}?sub_mchid=; the
// Authorization header names the service provider.
//
// The target's MerchantID must be the credentials' (the mchid, or the
// sub_mchid in partner mode). It fails, naming what is wrong, on another
// channel, tenant or merchant, a missing or malformed number, a bad base
// URL or nonce, or unusable credentials.
func NewQueryRequest(target channels.QueryTarget, creds Credentials, baseURL string, now time.Time, nonce string) (channels.QueryRequest, error) {
	if err := creds.check(); err != nil {
		return channels.QueryRequest{}, err
	}
	pathAndQuery, err := queryPath(target, creds)
	if err != nil {
		return channels.QueryRequest{}, err
	}
	base, err := checkBaseURL(baseURL)
	if err != nil {
		return channels.QueryRequest{}, err
	}
	auth, err := Authorization(creds, http.MethodGet, pathAndQuery, nil, now, nonce)
	if err != nil {
		return channels.QueryRequest{}, err
	}
	h := http.Header{}
	h.Set("Authorization", auth)
	h.Set("Accept", "application/json")
	h.Set("User-Agent", UserAgent)
	return channels.QueryRequest{Method: http.MethodGet, URL: base + pathAndQuery, Header: h}, nil
}

// queryPath is the escaped path and query of target's request.
func queryPath(target channels.QueryTarget, creds Credentials) (string, error) {
	if target.Channel != Code {
		return "", fmt.Errorf("wechat query: target is of channel %s", channels.Quote(string(target.Channel)))
	}
	if target.TenantID != creds.TenantID {
		return "", fmt.Errorf("wechat query: target of tenant %d, credentials of tenant %d", target.TenantID, creds.TenantID)
	}
	if target.MerchantID != creds.MerchantID {
		return "", fmt.Errorf("wechat query: target merchant %s is not the credentials' merchant %s",
			channels.Quote(target.MerchantID), channels.Quote(creds.MerchantID))
	}
	partner := creds.ServiceProviderID != ""
	switch target.Kind {
	case channels.QueryPayment:
		prefix, q := "/v3/pay/transactions/", "?"+url.Values{"mchid": {creds.MerchantID}}.Encode()
		if partner {
			prefix = "/v3/pay/partner/transactions/"
			q = "?" + url.Values{"sp_mchid": {creds.ServiceProviderID}, "sub_mchid": {creds.MerchantID}}.Encode()
		}
		if target.TradeNo != "" {
			if err := channels.CheckID("wechat transaction_id", target.TradeNo); err != nil {
				return "", fmt.Errorf("wechat query: %w", err)
			}
			return prefix + "id/" + url.PathEscape(target.TradeNo) + q, nil
		}
		if err := channels.CheckID("wechat out_trade_no", target.MerchantOrderNo); err != nil {
			return "", fmt.Errorf("wechat query: %w", err)
		}
		return prefix + "out-trade-no/" + url.PathEscape(target.MerchantOrderNo) + q, nil
	case channels.QueryRefund:
		if err := channels.CheckID("wechat out_refund_no", target.RefundNo); err != nil {
			return "", fmt.Errorf("wechat query: %w", err)
		}
		path := "/v3/refund/domestic/refunds/" + url.PathEscape(target.RefundNo)
		if partner {
			path += "?" + url.Values{"sub_mchid": {creds.MerchantID}}.Encode()
		}
		return path, nil
	}
	return "", fmt.Errorf("wechat query: kind %s", channels.Quote(string(target.Kind)))
}

// checkBaseURL returns baseURL without a trailing slash, refusing anything
// but http(s)://host[:port].
func checkBaseURL(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", fmt.Errorf("wechat query base URL %s does not parse", channels.Quote(baseURL))
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("wechat query base URL %s: want https://host[:port] and nothing else (the signature covers the path)", channels.Quote(baseURL))
	}
	return u.Scheme + "://" + u.Host, nil
}

// Authorization is the value of the Authorization header of a request
// (method, pathAndQuery exactly as sent, body) signed with creds at now
// with nonce: `WECHATPAY2-SHA256-RSA2048 mchid="…",nonce_str="…",
// signature="…",timestamp="…",serial_no="…"`.
func Authorization(creds Credentials, method, pathAndQuery string, body []byte, now time.Time, nonce string) (string, error) {
	if err := creds.check(); err != nil {
		return "", err
	}
	if err := checkNonce(nonce); err != nil {
		return "", err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := Sign(creds.PrivateKey, RequestMessage(method, pathAndQuery, ts, nonce, body))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`%s mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
		AuthScheme, creds.signer(), nonce, sig, ts, creds.SerialNo), nil
}

// RequestMessage is the message a request signature covers:
// "METHOD\nURL\ntimestamp\nnonce\nbody\n".
func RequestMessage(method, pathAndQuery, timestamp, nonce string, body []byte) []byte {
	return []byte(method + "\n" + pathAndQuery + "\n" + timestamp + "\n" + nonce + "\n" + string(body) + "\n")
}

// AnswerMessage is the message an answer signature covers:
// "Wechatpay-Timestamp\nWechatpay-Nonce\nbody\n", body raw as received.
func AnswerMessage(timestamp, nonce string, body []byte) []byte {
	return []byte(timestamp + "\n" + nonce + "\n" + string(body) + "\n")
}

// Sign returns the base64 SHA256withRSA (PKCS#1 v1.5) signature of
// message.
func Sign(key *rsa.PrivateKey, message []byte) (string, error) {
	if key == nil {
		return "", errors.New("wechat sign: no private key")
	}
	digest := sha256.Sum256(message)
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("wechat sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// SignAnswer returns the signature headers WeChat Pay puts on an answer
// (Wechatpay-Timestamp, -Nonce, -Signature, -Serial, -Signature-Type),
// signed with the platform key named keyID at now with nonce: for fake
// channel servers in tests and the demo.
func SignAnswer(key *rsa.PrivateKey, keyID string, now time.Time, nonce string, body []byte) (http.Header, error) {
	if err := checkNonce(nonce); err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := Sign(key, AnswerMessage(ts, nonce, body))
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderSignature, sig)
	h.Set(HeaderSerial, keyID)
	h.Set(HeaderSignatureType, AuthScheme)
	return h, nil
}

// checkNonce refuses a nonce that is empty, over maxNonceLen or not ASCII
// letters and digits (it is written inside a quoted header parameter).
func checkNonce(nonce string) error {
	if nonce == "" || len(nonce) > maxNonceLen {
		return fmt.Errorf("wechat nonce is %d bytes, want 1 to %d", len(nonce), maxNonceLen)
	}
	for i := 0; i < len(nonce); i++ {
		c := nonce[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return fmt.Errorf("wechat nonce byte %d is not an ASCII letter or digit", i+1)
		}
	}
	return nil
}
