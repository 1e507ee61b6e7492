package wechat_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/stretchr/testify/require"
)

// The published signing vectors of queries-vectors.md, replayed. The files
// under testdata/query are copied verbatim; testdata/query/SOURCES.md names
// the repository, path and commit of each.

// A.1: wechatpay-apiv3/wechatpay-go core/auth/signers/sha256withrsa_signer_test.go
// @ b683a9ac356b817e9d0f636ac1460c7bf86596ed.
const (
	a1Serial    = "F5765756002FDD77"
	a1Message   = "source"
	a1Signature = "BKyAfU4iMCuvXMXS0Wzam3V/cnxZ+JaqigPM5OhljS2iOT95OO6Fsuml2JkFANJU9K6q9bLlDhPXuoVz+pp4hAm6pHU4ld815U4jsKu1RkyaII+1CYBUYC8TK0XtJ8FwUXXz8vZHh58rrAVN1XwNyvD1vfpxrMT4SL536GLwvpUHlCqIMzoZUguLli/K8V29QiOhuH6IEqLNJn8e9b3nwNcQ7be3CzYGpDAKBfDGPCqCv8Rw5zndhlffk2FEA70G4hvMwe51qMN/RAJbknXG23bSlObuTCN7Ndj1aJGH6/L+hdwfLpUtJm4QYVazzW7DFD27EpSQEqA8bX9+8m1rLg=="
)

// A.3: gunsluo/wechatpay-go sign/sign_test.go @ bf224b5549b8b5a4fe2eebe1d07f7179da6bdae4
// (key and certificate: sign/rsa_test.go @ 9459cb4479d97db1a1622c90d956be2e5c5064ed).
const (
	a3Serial          = "9AD59953ADF1BABB"
	a3Timestamp       = 1611368330
	a3Nonce           = "AF1404CC2980FB414C99C0B98883BD42"
	a3GenerateBody    = `{"appid":"wx81be3101902f7cb2","mchid":"1601959334","description":"for testing","out_trade_no":"S20210124144305172434","time_expire":"2021-01-24T14:53:05+08:00","attach":"cipher code","notify_url":"https://luoji.live/notify","amount":{"total":1,"currency":"CNY"},"detail":{},"scene_info":{"payer_client_ip":"","store_info":{"id":""}}}`
	a3GenerateAuth    = `mchid="xxxxx",nonce_str="AF1404CC2980FB414C99C0B98883BD42",signature="ItuRCG6nAf6ZUi5C5LPa0beCGrG7+G4NdaCHLTmym+UzuZHFgFeqRZ4zKQ0n93qehchFWfQ7s00pgABYvXcOMsV1ld7AUjDTZBPucJK6yhFKz9jd20wtRdDG4LRCZcaTowD2f7LtlixFm8F3/YQaBavxiOe54tc3RX/22flYRzy4YFOpBt+bmjSPZIdSFi53323u7cohwvdHwX+avQCtLZKAUNFJIob66u05BbDEITzYuHjakjpb5btvWemjoZBPxkiETzmd4Oa1y2U+rfFCPZyWT4EV7UxHeEizBL8DkubEBD3KXeArqRX6yoMAU4ywmdFeWDbv1EF0Ndy9hiddZQ==",timestamp="1611368330",serial_no="yyyyy"`
	a3AnswerTimestamp = "1611501424"
	a3AnswerNonce     = "7c6ee840478cacdcf25b8fde1bc492c0"
	a3AnswerSignature = "bmdMjyk86N6+BoI8Sf6WEo0oEAgfbLqyQHop7asqdU8p8/RsnVXSoQzwQsyqSUl0mbOichQYpFHXl1Zk/jTNGclsJ49iLBN49pTlnc6bzFTR1qmMkdFMkZ4a0USLzrE9/m8UOSyEp5gT4X4oRtrYgFI0bMujUqGdIGNPgry8YRXvxAAUnE+9mwCY9LFNZxYk6rfbvmMdIjeQar321cmF63Iyq2Vo9Vb//j7wZB9LS/iGGAjOQ2hj9S79u7A9LIfuZDKG6ENIfCUbXabTpog/zFgksuwf821PH3Hy+/7oNepbDcOHrqJUQZ+lPx7h9jfK+yCTd2Rhf/U4w0z2hMBlzA=="
)

// A.13 (queries-vectors.md): NOT published, computed with openssl from the
// published A.3 key over the published A.3 GET message; it pins the whole
// request our builder signs.
const a13QuerySignature = "hnEQptCVbRgvAR5Hg5KRprnXgaP/IyU2CRpOKFIdbHLiC7o8F0U/XZ3GrzdVmXiGPAkG0oiUyAnZbuyweS0jul3WUniXrLFeSqp+P2rKl6F3zjFDOcVT79gomOmh+Lm8RYx5qFbD1fp99GchVhfBcJJucRpgB9XsIhxCo5NFTXM/5Q2tHnxKM5QTcq/E2I2LZid8flVB/4dSk9yc0J5FMBbYofST18aONjcw4aBXohjEsp78Vkf/5+5vUiFC5BLSEKCwLiQrTtXEz/8Z7Ag/v+UhKxjVCW+EpmqhWG9EEE4VEUs0vcD1DVbMr5ZtYsgz2RzedOC4er7M3zQz3VSDqg=="

// queryFile reads testdata/query/name.
func queryFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "query", name))
	require.NoError(tb, err)
	return b
}

// a1PrivateKey parses the A.1 key as its SDK test does: the published file
// says TESTING KEY where the key's type is PRIVATE KEY.
func a1PrivateKey(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	pemText := strings.ReplaceAll(string(queryFile(tb, "a1_signer_testing_key.pem")), "TESTING KEY", "PRIVATE KEY")
	key, err := wechat.ParsePrivateKey([]byte(pemText))
	require.NoError(tb, err)
	return key
}

func a3PrivateKey(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	key, err := wechat.ParsePrivateKey(queryFile(tb, "a3_private_key.pem"))
	require.NoError(tb, err)
	return key
}

// a3PlatformKey is the A.3 certificate as a merchant's platform key: the
// key the A.3 answer and the tests' own answers are verified with.
func a3PlatformKey(tb testing.TB, merchantID string) wechat.PublicKey {
	tb.Helper()
	k, err := wechat.NewPublicKey(merchantID, a3Serial, queryFile(tb, "a3_certificate.pem"))
	require.NoError(tb, err)
	return k
}

func TestQueryA1SignerVector(t *testing.T) {
	t.Parallel()
	sig, err := wechat.Sign(a1PrivateKey(t), []byte(a1Message))
	require.NoError(t, err)
	require.Equal(t, a1Signature, sig)

	// The published public half verifies it, as an answer signature under
	// the public-key id.
	pub, err := wechat.NewPublicKey("1900000100", a1Serial, queryFile(t, "a1_verifier_public_key.pem"))
	require.NoError(t, err)
	h, err := wechat.SignAnswer(a1PrivateKey(t), a1Serial, time.Unix(a3Timestamp, 0), a3Nonce, []byte(`{}`))
	require.NoError(t, err)
	resp := channels.QueryResponse{StatusCode: 200, Header: h, Body: []byte(`{}`)}
	require.NoError(t, wechat.VerifyAnswer(resp, "1900000100", []wechat.PublicKey{pub}, time.Unix(a3Timestamp, 0)))
}

func TestQueryA3RequestMessages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ method, url, want string }{
		{"GET", "/v3/certificates", "GET\n/v3/certificates\n1611368330\nAF1404CC2980FB414C99C0B98883BD42\n\n"},
		{"GET", "/v3/pay/transactions/out-trade-no/1217752501201407033233368018?mchid=1230000109", "GET\n/v3/pay/transactions/out-trade-no/1217752501201407033233368018?mchid=1230000109\n1611368330\nAF1404CC2980FB414C99C0B98883BD42\n\n"},
		{"POST", "/v3/pay/transactions/out-trade-no/your_out_trade_no/close", "POST\n/v3/pay/transactions/out-trade-no/your_out_trade_no/close\n1611368330\nAF1404CC2980FB414C99C0B98883BD42\n\n"},
		{"GET", "/v3/bill/tradebill?bill_date=2019-06-11&sub_mchid=1900000001&bill_type=ALL", "GET\n/v3/bill/tradebill?bill_date=2019-06-11&sub_mchid=1900000001&bill_type=ALL\n1611368330\nAF1404CC2980FB414C99C0B98883BD42\n\n"},
	} {
		require.Equal(t, c.want, string(wechat.RequestMessage(c.method, c.url, "1611368330", a3Nonce, nil)), c.url)
	}
}

func TestQueryA3GenerateSignature(t *testing.T) {
	t.Parallel()
	creds := wechat.Credentials{MerchantID: "xxxxx", SerialNo: "yyyyy", PrivateKey: a3PrivateKey(t)}
	auth, err := wechat.Authorization(creds, "POST", "/v3/pay/transactions/native", []byte(a3GenerateBody), time.Unix(a3Timestamp, 0), a3Nonce)
	require.NoError(t, err)
	require.Equal(t, wechat.AuthScheme+" "+a3GenerateAuth, auth)
}

func TestQueryRequestA13(t *testing.T) {
	t.Parallel()
	creds := wechat.Credentials{TenantID: 1001, MerchantID: "1230000109", SerialNo: a3Serial, PrivateKey: a3PrivateKey(t)}
	target := channels.QueryTarget{
		TenantID: 1001, Channel: wechat.Code, Kind: channels.QueryPayment,
		MerchantID: "1230000109", MerchantOrderNo: "1217752501201407033233368018",
	}
	req, err := wechat.NewQueryRequest(target, creds, wechat.QueryBaseURL, time.Unix(a3Timestamp, 0), a3Nonce)
	require.NoError(t, err)
	require.Equal(t, http.MethodGet, req.Method)
	require.Equal(t, "https://api.mch.weixin.qq.com/v3/pay/transactions/out-trade-no/1217752501201407033233368018?mchid=1230000109", req.URL)
	require.Empty(t, req.Body)
	require.Equal(t, "application/json", req.Header.Get("Accept"))
	require.Equal(t, `WECHATPAY2-SHA256-RSA2048 mchid="1230000109",nonce_str="AF1404CC2980FB414C99C0B98883BD42",signature="`+
		a13QuerySignature+`",timestamp="1611368330",serial_no="9AD59953ADF1BABB"`, req.Header.Get("Authorization"))
}

// a3Answer is the A.3 answer as received.
func a3Answer(tb testing.TB) channels.QueryResponse {
	tb.Helper()
	h := http.Header{}
	h.Set(wechat.HeaderTimestamp, a3AnswerTimestamp)
	h.Set(wechat.HeaderNonce, a3AnswerNonce)
	h.Set(wechat.HeaderSignature, a3AnswerSignature)
	h.Set(wechat.HeaderSerial, a3Serial)
	body := queryFile(tb, "a3_certificates_answer.json")
	require.Len(tb, body, 2168)
	return channels.QueryResponse{StatusCode: 200, Header: h, Body: body}
}

func TestQueryA3AnswerVerifies(t *testing.T) {
	t.Parallel()
	const merchant = "1601959334"
	keys := []wechat.PublicKey{a3PlatformKey(t, merchant)}
	at := time.Unix(1611501424, 0)
	require.NoError(t, wechat.VerifyAnswer(a3Answer(t), merchant, keys, at))

	refused := func(t *testing.T, resp channels.QueryResponse, merchant string, keys []wechat.PublicKey, now time.Time, want string) {
		t.Helper()
		err := wechat.VerifyAnswer(resp, merchant, keys, now)
		require.Error(t, err)
		kind, ok := channels.KindOf(err)
		require.True(t, ok)
		require.Equal(t, channels.KindUnauthenticated, kind)
		require.Contains(t, err.Error(), want)
	}
	t.Run("every body byte changed", func(t *testing.T) {
		body := a3Answer(t).Body
		for i := 0; i < len(body); i += 37 {
			resp := a3Answer(t)
			resp.Body = bytes.Clone(body)
			resp.Body[i] ^= 0x01
			refused(t, resp, merchant, keys, at, "does not verify")
		}
		resp := a3Answer(t)
		resp.Body = append(resp.Body, '\n')
		refused(t, resp, merchant, keys, at, "does not verify")
	})
	t.Run("a header changed", func(t *testing.T) {
		for _, name := range []string{wechat.HeaderNonce, wechat.HeaderSignature} {
			resp := a3Answer(t)
			v := []byte(resp.Header.Get(name))
			v[3] ^= 0x01
			resp.Header.Set(name, string(v))
			refused(t, resp, merchant, keys, at, "")
		}
		resp := a3Answer(t)
		resp.Header.Set(wechat.HeaderTimestamp, "1611501425")
		refused(t, resp, merchant, keys, at, "does not verify")
	})
	t.Run("another key under the serial", func(t *testing.T) {
		other, err := wechat.NewPublicKey(merchant, a3Serial, queryFile(t, "a1_verifier_public_key.pem"))
		require.NoError(t, err)
		refused(t, a3Answer(t), merchant, []wechat.PublicKey{other}, at, "does not verify")
	})
	t.Run("an unknown serial", func(t *testing.T) {
		resp := a3Answer(t)
		resp.Header.Set(wechat.HeaderSerial, "PUB_KEY_ID_0000")
		refused(t, resp, merchant, keys, at, "not a configured key")
	})
	t.Run("the key of another merchant", func(t *testing.T) {
		refused(t, a3Answer(t), "1900000100", keys, at, "not a configured key")
	})
	t.Run("the 300 s window", func(t *testing.T) {
		require.NoError(t, wechat.VerifyAnswer(a3Answer(t), merchant, keys, at.Add(299*time.Second)))
		require.NoError(t, wechat.VerifyAnswer(a3Answer(t), merchant, keys, at.Add(-299*time.Second)))
		refused(t, a3Answer(t), merchant, keys, at.Add(300*time.Second), "window")
		refused(t, a3Answer(t), merchant, keys, at.Add(-300*time.Second), "window")
		refused(t, a3Answer(t), merchant, keys, at.Add(24*time.Hour), "window")
	})
	t.Run("unsigned or ambiguous headers", func(t *testing.T) {
		for _, name := range []string{wechat.HeaderTimestamp, wechat.HeaderNonce, wechat.HeaderSignature, wechat.HeaderSerial} {
			resp := a3Answer(t)
			resp.Header.Del(name)
			refused(t, resp, merchant, keys, at, "no "+name)
			resp = a3Answer(t)
			resp.Header.Add(name, resp.Header.Get(name))
			refused(t, resp, merchant, keys, at, "2 "+name)
		}
		resp := a3Answer(t)
		resp.Header.Set(wechat.HeaderSignatureType, "WECHATPAY2-SHA256-SM2")
		refused(t, resp, merchant, keys, at, "Signature-Type")
		resp = a3Answer(t)
		resp.Header.Set(wechat.HeaderTimestamp, "+1611501424")
		refused(t, resp, merchant, keys, at, "digits")
		resp = a3Answer(t)
		resp.Header.Set(wechat.HeaderSignature, "not base64!")
		refused(t, resp, merchant, keys, at, "base64")
	})
}

func TestQueryKeysParse(t *testing.T) {
	t.Parallel()
	_, err := wechat.ParsePublicKey(queryFile(t, "a1_verifier_public_key.pem"))
	require.NoError(t, err)
	cert, err := wechat.ParsePublicKey(queryFile(t, "a3_certificate.pem"))
	require.NoError(t, err)
	require.True(t, cert.Equal(&a3PrivateKey(t).PublicKey))

	// PKCS#1 forms of the same keys.
	k := a3PrivateKey(t)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	back, err := wechat.ParsePrivateKey(pkcs1)
	require.NoError(t, err)
	require.True(t, back.Equal(k))

	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ec8, err := x509.MarshalPKCS8PrivateKey(ec)
	require.NoError(t, err)
	ecPub, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(t, err)
	smallPub, err := x509.MarshalPKIXPublicKey(&small.PublicKey)
	require.NoError(t, err)
	a1 := queryFile(t, "a1_signer_testing_key.pem")
	a1Body := strings.Split(string(a1), "\n")[1]
	broken := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not a key")})

	for _, c := range []struct {
		name string
		pem  []byte
		want string
	}{
		{"no PEM", []byte("MIIEvgIBADANBgkqhkiG9w0BAQEFAASC"), "no PEM block"},
		{"a published TESTING KEY label", a1, `"TESTING KEY"`},
		{"a certificate", queryFile(t, "a3_certificate.pem"), `"CERTIFICATE"`},
		{"encrypted", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}}), "encrypted"},
		{"legacy encrypted", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: []byte{1}}), "headers"},
		{"broken PKCS#8", broken, "does not parse"},
		{"broken PKCS#1", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte("x")}), "does not parse"},
		{"an EC key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ec8}), "want RSA"},
		{"1024 bits", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}), "1024 bits"},
	} {
		_, err := wechat.ParsePrivateKey(c.pem)
		require.ErrorContains(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), a1Body[:16], c.name)
		require.NotContains(t, err.Error(), "MIIE", c.name)
	}
	for _, c := range []struct {
		name string
		pem  []byte
		want string
	}{
		{"no PEM", nil, "no PEM block"},
		{"a private key", queryFile(t, "a3_private_key.pem"), `"PRIVATE KEY"`},
		{"broken PKIX", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("x")}), "does not parse"},
		{"broken certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}), "does not parse"},
		{"an EC key", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPub}), "want RSA"},
		{"1024 bits", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: smallPub}), "1024 bits"},
	} {
		_, err := wechat.ParsePublicKey(c.pem)
		require.ErrorContains(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), "MII", c.name)
	}

	_, err = wechat.NewCredentials(1001, "", a3Serial, queryFile(t, "a3_private_key.pem"))
	require.ErrorContains(t, err, "merchant_id")
	_, err = wechat.NewCredentials(1001, "1230000109", "", queryFile(t, "a3_private_key.pem"))
	require.ErrorContains(t, err, "serial_no")
	_, err = wechat.NewCredentials(1001, "1230000109", a3Serial, broken)
	require.ErrorContains(t, err, "merchant 1230000109: private key")
	creds, err := wechat.NewCredentials(1001, "1230000109", a3Serial, queryFile(t, "a3_private_key.pem"))
	require.NoError(t, err)
	require.True(t, creds.PrivateKey.Equal(k))
	_, err = wechat.NewPublicKey("1230000109", "", queryFile(t, "a3_certificate.pem"))
	require.ErrorContains(t, err, "key_id")
}
