package alipay_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/stretchr/testify/require"
)

// Request signing, keys and credentials. Published vectors:
// testdata/query/SOURCES.

// testKeys are two RSA-2048 keys generated once per run: the merchant's
// application key and, in the answer tests, Alipay's.
var testKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var ks [2]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func testCredentials(tb testing.TB) alipay.Credentials {
	tb.Helper()
	return alipay.Credentials{
		TenantID: 1001, MerchantID: "2088101117955611", AppID: "2021000000000000",
		PrivateKeyFile: "alipay_2021000000000000.pem", PrivateKey: testKeys()[0],
	}
}

func paymentTarget() channels.QueryTarget {
	return channels.QueryTarget{
		TenantID: 1001, Channel: alipay.Code, Kind: channels.QueryPayment,
		MerchantID: "2088101117955611", MerchantOrderNo: "POS20240601000001",
	}
}

func TestParseKeys(t *testing.T) {
	k := testKeys()[0]
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"PKCS#1": pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k)),
		"PKCS#8": pemOf("PRIVATE KEY", pkcs8),
	} {
		got, err := alipay.ParsePrivateKey(data)
		require.NoError(t, err, name)
		require.True(t, got.Equal(k), name)
	}

	// Published public keys: A.7 PKIX, A.6 app certificate, A.5 bare base64
	// in PKIX armour.
	for _, data := range [][]byte{
		alipay.ReadQueryTestdata(t, "a7_alipay_public_key.pem"),
		alipay.ReadQueryTestdata(t, "a6_appCertPublicKey_2019091767145019.crt"),
		pemArmour(a5Field(t, "alipayPublicKey")),
		pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&k.PublicKey)),
	} {
		got, err := alipay.ParsePublicKey(data)
		require.NoError(t, err)
		require.Equal(t, 2048, got.N.BitLen())
	}

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	require.NoError(t, err)
	ecPub, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(t, err)
	short, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	truncated := pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k)[:300])
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"no PEM":       {[]byte(base64Body(pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k)))), "no PEM block"},
		"public block": {alipay.ReadQueryTestdata(t, "a7_alipay_public_key.pem"), `"PUBLIC KEY"`},
		"encrypted":    {pemOf("ENCRYPTED PRIVATE KEY", []byte{1, 2, 3}), "encrypted"},
		"EC key":       {pemOf("PRIVATE KEY", ecDER), "want an RSA key"},
		"short key":    {pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(short)), "1024 bits"},
		"truncated":    {truncated, "does not parse"},
	} {
		_, err := alipay.ParsePrivateKey(tc.data)
		require.ErrorContains(t, err, tc.want, name)
		requireNoKeyMaterial(t, err, tc.data)
	}
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"private block": {pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k)), `"RSA PRIVATE KEY"`},
		"EC key":        {pemOf("PUBLIC KEY", ecPub), "want an RSA key"},
		"garbage":       {pemOf("CERTIFICATE", []byte("not DER")), "does not parse"},
		"none":          {[]byte("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A"), "no PEM block"},
	} {
		_, err := alipay.ParsePublicKey(tc.data)
		require.ErrorContains(t, err, tc.want, name)
		requireNoKeyMaterial(t, err, tc.data)
	}
}

// requireNoKeyMaterial fails when err quotes any 16 characters of the
// base64 body of data.
func requireNoKeyMaterial(tb testing.TB, err error, data []byte) {
	tb.Helper()
	body := base64Body(data)
	for i := 0; i+16 <= len(body); i += 8 {
		require.NotContains(tb, err.Error(), body[i:i+16])
	}
}

func base64Body(data []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "-----") {
			b.WriteString(strings.TrimSpace(line))
		}
	}
	return b.String()
}

func pemArmour(b64 string) []byte {
	return []byte("-----BEGIN PUBLIC KEY-----\n" + b64 + "\n-----END PUBLIC KEY-----\n")
}

// a5Field returns a "name = value" line of the A.5 vector.
func a5Field(tb testing.TB, name string) string {
	tb.Helper()
	for _, line := range strings.Split(string(alipay.ReadQueryTestdata(tb, "a5_gopay_sign_test.txt")), "\n") {
		if k, v, ok := strings.Cut(line, " = "); ok && k == name {
			return v
		}
	}
	tb.Fatalf("A.5 has no %s", name)
	return ""
}

// TestPublishedSignContent replays A.6: the parameters of each published
// content, shuffled, with sign and an empty parameter added, give exactly
// that content, and the published RSA2 signature verifies over it with
// the published app certificate; one changed byte, or the RSA (SHA1)
// vector read as RSA2, does not.
func TestPublishedSignContent(t *testing.T) {
	cert, err := alipay.ParsePublicKey(alipay.ReadQueryTestdata(t, "a6_appCertPublicKey_2019091767145019.crt"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(alipay.ReadQueryTestdata(t, "a6_rsacheck.txt"))), "\n")
	require.Len(t, lines, 6)
	for i := 0; i < len(lines); i += 2 {
		label, content, ok := strings.Cut(lines[i], ": ")
		require.True(t, ok)
		sig := strings.TrimSpace(strings.TrimPrefix(lines[i+1], "sign:"))
		params := url.Values{"sign": {sig}, "app_auth_token": {""}}
		pairs := strings.Split(content, "&")
		for j := len(pairs) - 1; j >= 0; j-- {
			k, v, _ := strings.Cut(pairs[j], "=")
			params.Set(k, v)
		}
		require.Equal(t, content, alipay.SignContent(params))
		err := alipay.VerifyRSA2([]byte(content), sig, cert)
		if strings.Contains(label, "SHA1") {
			require.Error(t, err, "an RSA (SHA1) signature must not pass as RSA2")
			continue
		}
		require.NoError(t, err, content)
		tampered := []byte(content)
		tampered[len(tampered)-1] ^= 1
		require.Error(t, alipay.VerifyRSA2(tampered, sig, cert))
		other := testKeys()[0].PublicKey
		require.Error(t, alipay.VerifyRSA2([]byte(content), sig, &other))
	}
}

func TestBuildQueryRequest(t *testing.T) {
	cred := testCredentials(t)
	now := time.Date(2024, 6, 1, 12, 0, 5, 0, time.UTC)
	for name, tc := range map[string]struct {
		target channels.QueryTarget
		method string
		biz    string
	}{
		"payment by out_trade_no": {paymentTarget(), alipay.MethodTradeQuery, `{"out_trade_no":"POS20240601000001"}`},
		"payment by trade_no": {
			func() channels.QueryTarget {
				tg := paymentTarget()
				tg.TradeNo = "2024060122001439000000000001"
				return tg
			}(),
			alipay.MethodTradeQuery, `{"trade_no":"2024060122001439000000000001"}`,
		},
		"refund": {
			func() channels.QueryTarget {
				tg := paymentTarget()
				tg.Kind, tg.RefundNo = channels.QueryRefund, "R<1>&2"
				return tg
			}(),
			alipay.MethodRefundQuery, `{"out_trade_no":"POS20240601000001","out_request_no":"R<1>&2","query_options":["gmt_refund_pay"]}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := alipay.BuildQueryRequest(tc.target, cred, alipay.DefaultGatewayURL, now, "unused")
			require.NoError(t, err)
			require.Equal(t, "POST", req.Method)
			require.Equal(t, alipay.DefaultGatewayURL, req.URL)
			require.Equal(t, "application/x-www-form-urlencoded;charset=utf-8", req.Header.Get("Content-Type"))
			params, err := url.ParseQuery(string(req.Body))
			require.NoError(t, err)
			sig := params.Get("sign")
			params.Del("sign")
			require.Equal(t, url.Values{
				"app_id": {"2021000000000000"}, "method": {tc.method}, "format": {"JSON"}, "charset": {"utf-8"},
				"sign_type": {"RSA2"}, "timestamp": {"2024-06-01 20:00:05"}, "version": {"1.0"}, "biz_content": {tc.biz},
			}, params)
			require.True(t, json.Valid([]byte(tc.biz)))
			content := alipay.SignContent(params)
			require.Equal(t, "app_id=2021000000000000&biz_content="+tc.biz+"&charset=utf-8&format=JSON&method="+tc.method+
				"&sign_type=RSA2&timestamp=2024-06-01 20:00:05&version=1.0", content)
			require.NoError(t, alipay.VerifyRSA2([]byte(content), sig, &cred.PrivateKey.PublicKey))
			again, err := alipay.BuildQueryRequest(tc.target, cred, alipay.DefaultGatewayURL, now, "other")
			require.NoError(t, err)
			require.Equal(t, req, again, "the same arguments build the same request")
		})
	}
}

func TestBuildQueryRequestRefused(t *testing.T) {
	cred := testCredentials(t)
	now := time.Date(2024, 6, 1, 12, 0, 5, 0, time.UTC)
	edit := func(f func(*channels.QueryTarget)) channels.QueryTarget { tg := paymentTarget(); f(&tg); return tg }
	for name, tc := range map[string]struct {
		target channels.QueryTarget
		cred   alipay.Credentials
		url    string
		want   string
	}{
		"other channel":  {edit(func(tg *channels.QueryTarget) { tg.Channel = "WECHAT" }), cred, alipay.DefaultGatewayURL, "channel"},
		"other tenant":   {edit(func(tg *channels.QueryTarget) { tg.TenantID = 7 }), cred, alipay.DefaultGatewayURL, "tenant 7"},
		"other merchant": {edit(func(tg *channels.QueryTarget) { tg.MerchantID = "2088000000000001" }), cred, alipay.DefaultGatewayURL, "merchant"},
		"no numbers":     {edit(func(tg *channels.QueryTarget) { tg.MerchantOrderNo = "" }), cred, alipay.DefaultGatewayURL, "neither"},
		"no refund no":   {edit(func(tg *channels.QueryTarget) { tg.Kind = channels.QueryRefund }), cred, alipay.DefaultGatewayURL, "out_request_no is missing"},
		"unknown kind":   {edit(func(tg *channels.QueryTarget) { tg.Kind = "X" }), cred, alipay.DefaultGatewayURL, "kind"},
		"control char":   {edit(func(tg *channels.QueryTarget) { tg.MerchantOrderNo = "A\nB" }), cred, alipay.DefaultGatewayURL, "control"},
		"bad URL":        {paymentTarget(), cred, "openapi.alipay.com/gateway.do", "base URL"},
		"no key":         {paymentTarget(), func() alipay.Credentials { c := cred; c.PrivateKey = nil; return c }(), alipay.DefaultGatewayURL, "no private key"},
		"no app":         {paymentTarget(), func() alipay.Credentials { c := cred; c.AppID = ""; return c }(), alipay.DefaultGatewayURL, "app_id is missing"},
	} {
		_, err := alipay.BuildQueryRequest(tc.target, tc.cred, tc.url, now, "")
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestCredentialsNeverShowTheKey(t *testing.T) {
	cred := testCredentials(t)
	d := cred.PrivateKey.D.String()[:20]
	for _, s := range []string{cred.String(), cred.GoString(), cred.LogValue().String()} {
		require.NotContains(t, s, d)
		require.Contains(t, s, "2021000000000000")
	}
	require.NoError(t, cred.Validate())
}
