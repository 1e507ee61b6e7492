package alipay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
)

// TestCertSNMatchesThePublishedValues: the serials of the certificates
// alipay-sdk-nodejs-all tests (testdata/query/SOURCES, entry A.8), as that
// test expects them; the root file is Alipay's production root bundle
// (SM2, RSA, ECDSA and RSA-SHA1 roots), whose two RSA serials every SDK
// sends.
func TestCertSNMatchesThePublishedValues(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", "query", name))
		require.NoError(t, err)
		return data
	}
	sn, err := alipay.CertSN(read("a8_appCertPublicKey_2021001161683774.crt"))
	require.NoError(t, err)
	assert.Equal(t, "866efef280dec9137a87d047ac446315", sn, "app_cert_sn")
	sn, err = alipay.CertSN(read("a8_alipayCertPublicKey_RSA2.crt"))
	require.NoError(t, err)
	assert.Equal(t, "7513daaaa48aa3ba2e4018d84402479c", sn, "alipay_cert_sn")
	sn, err = alipay.RootCertSN(read("a8_alipayRootCert.crt"))
	require.NoError(t, err)
	assert.Equal(t, "687b59193f3f462dd5336e5abf83c5d8_02941eef3187dddf3d3b83462e1dfcf6", sn, "alipay_root_cert_sn")
}

// TestCertSNRefusesWhatIsNotACertificate: a key, garbage and an empty file
// are refused with a message, never a serial.
func TestCertSNRefusesWhatIsNotACertificate(t *testing.T) {
	key, err := os.ReadFile(filepath.Join("testdata", "query", "a7_alipay_public_key.pem"))
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"a public key": key,
		"garbage":      []byte("not pem"),
		"empty":        nil,
		"bad DER":      []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
	} {
		_, err := alipay.CertSN(data)
		require.Error(t, err, name)
		_, err = alipay.RootCertSN(data)
		require.Error(t, err, name)
	}
}

// selfCert returns a PEM certificate of key's public half, issued by a
// test issuer.
func selfCert(t *testing.T, pub *rsa.PublicKey, signer *rsa.PrivateKey, serial int64) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "2088101117955611-2021000000000000", Organization: []string{"Test"}, Country: []string{"CN"}},
		NotBefore:    time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2034, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, signer)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func certEntry(files map[string][]byte, fields map[string]string) channels.QueryCredentialsEntry {
	return channels.QueryCredentialsEntry{
		TenantID: 1001, Channel: alipay.Code, MerchantID: "2088101117955611", Fields: fields,
		ReadFile: func(name string) ([]byte, error) {
			if data, ok := files[name]; ok {
				return data, nil
			}
			return nil, fmt.Errorf("open %s: no such file", name)
		},
	}
}

// TestCertificateModeRequests: credentials with an application certificate
// and the root file send app_cert_sn and alipay_root_cert_sn, and the
// signature covers them; a certificate of another key, or one of the two
// files alone, is refused when the credentials are read.
func TestCertificateModeRequests(t *testing.T) {
	key, other := testKeys()[0], testKeys()[1]
	root, err := os.ReadFile(filepath.Join("testdata", "query", "a8_alipayRootCert.crt"))
	require.NoError(t, err)
	appCert := selfCert(t, &key.PublicKey, key, 20240601)
	wantSN, err := alipay.CertSN(appCert)
	require.NoError(t, err)
	files := map[string][]byte{
		"app.key":        pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)),
		"app.crt":        appCert,
		"other.crt":      selfCert(t, &other.PublicKey, other, 7),
		"alipayRoot.crt": root,
	}
	fields := func(extra ...string) map[string]string {
		f := map[string]string{"app_id": "2021000000000000", "private_key_file": "app.key"}
		for i := 0; i+1 < len(extra); i += 2 {
			f[extra[i]] = extra[i+1]
		}
		return f
	}
	spec := alipay.Spec()
	creds, err := spec.ParseQueryCredentials(certEntry(files, fields("app_cert_file", "app.crt", "alipay_root_cert_file", "alipayRoot.crt")))
	require.NoError(t, err)
	c := creds.(alipay.Credentials)
	assert.Equal(t, wantSN, c.AppCertSN)
	assert.Equal(t, "687b59193f3f462dd5336e5abf83c5d8_02941eef3187dddf3d3b83462e1dfcf6", c.RootCertSN)

	req, err := alipay.BuildQueryRequest(paymentTarget(), c, alipay.DefaultGatewayURL, time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC), "")
	require.NoError(t, err)
	params, err := url.ParseQuery(string(req.Body))
	require.NoError(t, err)
	assert.Equal(t, wantSN, params.Get("app_cert_sn"))
	assert.Equal(t, c.RootCertSN, params.Get("alipay_root_cert_sn"))
	sig := params.Get("sign")
	params.Del("sign")
	require.NoError(t, alipay.VerifyRSA2([]byte(alipay.SignContent(params)), sig, &key.PublicKey), "the signature covers the certificate serials")

	plain, err := spec.ParseQueryCredentials(certEntry(files, fields()))
	require.NoError(t, err)
	req, err = alipay.BuildQueryRequest(paymentTarget(), plain.(alipay.Credentials), alipay.DefaultGatewayURL, time.Now(), "")
	require.NoError(t, err)
	assert.NotContains(t, string(req.Body), "cert_sn", "public-key mode sends no serial")

	for name, f := range map[string]map[string]string{
		"certificate of another key": fields("app_cert_file", "other.crt", "alipay_root_cert_file", "alipayRoot.crt"),
		"app certificate alone":      fields("app_cert_file", "app.crt"),
		"root file alone":            fields("alipay_root_cert_file", "alipayRoot.crt"),
		"root file not a cert":       fields("app_cert_file", "app.crt", "alipay_root_cert_file", "app.key"),
		"missing root file":          fields("app_cert_file", "app.crt", "alipay_root_cert_file", "nowhere.crt"),
	} {
		_, err := spec.ParseQueryCredentials(certEntry(files, f))
		require.Error(t, err, name)
	}
}

// TestCertificateModeAnswers: with Alipay's public-key certificate
// configured, an answer naming that certificate's serial verifies, one
// naming no serial verifies on its signature, and one naming another
// serial is unauthenticated even when its signature verifies (the key was
// rotated and the new certificate is not configured).
func TestCertificateModeAnswers(t *testing.T) {
	alipayKey := testKeys()[1]
	certPEM := selfCert(t, &alipayKey.PublicKey, alipayKey, 99)
	sn, err := alipay.CertSN(certPEM)
	require.NoError(t, err)
	keyAny, err := alipay.Spec().ParsePublicKey(channels.PublicKeyEntry{Channel: alipay.Code, AppID: "2021000000000000", PublicKeyFile: "alipayCert.crt"}, certPEM)
	require.NoError(t, err)
	pk := keyAny.(alipay.PublicKey)
	assert.Equal(t, sn, pk.CertSN)

	response := `{"code":"10000","msg":"Success","out_trade_no":"POS20240601000001","trade_status":"WAIT_BUYER_PAY","total_amount":"88.88"}`
	sig, err := alipay.SignRSA2(response, alipayKey)
	require.NoError(t, err)
	body := func(certSN string) []byte {
		b := `{"alipay_trade_query_response":` + response + `,`
		if certSN != "" {
			b += `"alipay_cert_sn":"` + certSN + `",`
		}
		return []byte(b + `"sign":"` + sig + `"}`)
	}
	require.NoError(t, alipay.VerifyAnswer(channels.QueryPayment, body(sn), pk))
	require.NoError(t, alipay.VerifyAnswer(channels.QueryPayment, body(""), pk))
	err = alipay.VerifyAnswer(channels.QueryPayment, body("0123456789abcdef0123456789abcdef"), pk)
	require.Error(t, err)
	kind, ok := channels.KindOf(err)
	assert.True(t, ok && kind == channels.KindUnauthenticated, "unauthenticated: %v", err)
	assert.Contains(t, err.Error(), "alipaycert.download")
}
