package alipay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"

	"github.com/paycallback/paycallback/pkg/channels"
)

// The active query (主动查单) client of the channel: the API credentials
// and public keys (this file), the signed request (query_sign.go), the
// answer's signature and its reading (query_answer.go). Facts and sources:
// docs/queries.md.

// The OpenAPI methods the query client calls.
const (
	// MethodTradeQuery asks about an order (QueryPayment).
	MethodTradeQuery = "alipay.trade.query"
	// MethodRefundQuery asks about one refund request of a trade
	// (QueryRefund).
	MethodRefundQuery = "alipay.trade.fastpay.refund.query"
)

// DefaultGatewayURL is Alipay's production gateway, the default of
// PAYCB_QUERY_ALIPAY_URL.
const DefaultGatewayURL = "https://openapi.alipay.com/gateway.do"

// Credentials are one merchant's API credentials, an ALIPAY entry of
// PAYCB_QUERY_CREDENTIALS_FILE: {tenant_id, channel: ALIPAY, merchant_id,
// app_id, private_key_file}, and in certificate mode also app_cert_file
// and alipay_root_cert_file. Only the querier holds them: the private key
// can move money out. String and LogValue never show the key.
type Credentials struct {
	// TenantID is the tenant the merchant is bound to.
	TenantID int64
	// MerchantID is the merchant's PID (2088…), as the merchant binding
	// names it; Alipay's answers name no merchant, so an answer is bound
	// to the merchant whose credentials asked.
	MerchantID string
	// AppID is the application the requests are sent for (app_id).
	AppID string
	// PrivateKeyFile is the key's file as configured, for messages.
	PrivateKeyFile string
	// PrivateKey is the application private key (RSA, 2048 bits or more)
	// that signs requests (sign_type RSA2).
	PrivateKey *rsa.PrivateKey
	// AppCertSN and RootCertSN are set together, in certificate mode
	// only: app_cert_sn, the serial of the application certificate whose
	// key PrivateKey is (CertSN), and alipay_root_cert_sn, that of
	// Alipay's root certificate file (RootCertSN). Every request then
	// carries both, signed.
	AppCertSN, RootCertSN string
}

// Validate checks that c can sign requests: a positive tenant, a merchant
// ID and app ID that are plain identifiers, and an RSA key of at least
// 2048 bits. The error names the entry by merchant and app, never the key.
func (c Credentials) Validate() error {
	if c.TenantID <= 0 {
		return fmt.Errorf("alipay credentials for merchant %s: tenant_id %d is not positive", channels.Quote(c.MerchantID), c.TenantID)
	}
	if err := channels.CheckID("alipay credentials merchant_id", c.MerchantID); err != nil {
		return err
	}
	if err := channels.CheckID("alipay credentials app_id", c.AppID); err != nil {
		return err
	}
	if c.PrivateKey == nil {
		return fmt.Errorf("alipay credentials for app %s: no private key", channels.Quote(c.AppID))
	}
	if bits := c.PrivateKey.N.BitLen(); bits < minKeyBits {
		return fmt.Errorf("alipay credentials for app %s: private key has %d bits, RSA2 needs %d or more", channels.Quote(c.AppID), bits, minKeyBits)
	}
	if (c.AppCertSN == "") != (c.RootCertSN == "") {
		return fmt.Errorf("alipay credentials for app %s: certificate mode needs both the application certificate and Alipay's root certificate", channels.Quote(c.AppID))
	}
	return nil
}

// QueryTenantID is c.TenantID (channels.QueryCredentials).
func (c Credentials) QueryTenantID() int64 { return c.TenantID }

// QueryMerchantID is c.MerchantID (channels.QueryCredentials).
func (c Credentials) QueryMerchantID() string { return c.MerchantID }

// String describes c without its key.
func (c Credentials) String() string {
	return fmt.Sprintf("alipay credentials tenant %d merchant %s app %s key file %s", c.TenantID, c.MerchantID, c.AppID, c.PrivateKeyFile)
}

// GoString is String: %#v never prints the key either.
func (c Credentials) GoString() string { return c.String() }

// LogValue logs c without its key.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("tenant_id", c.TenantID),
		slog.String("merchant_id", c.MerchantID),
		slog.String("app_id", c.AppID),
		slog.String("private_key_file", c.PrivateKeyFile),
	)
}

// PublicKey is Alipay's public key for one application, an ALIPAY entry of
// PAYCB_CHANNEL_PUBLIC_KEYS_FILE: {channel: ALIPAY, app_id,
// public_key_file}, the file holding Alipay's public key (public-key mode)
// or Alipay's public-key certificate (certificate mode, whose CertSN is
// then kept). Answers to requests sent for AppID are verified with Key.
type PublicKey struct {
	// AppID is the application whose answers the key verifies.
	AppID string
	// PublicKeyFile is the key's file as configured, for messages.
	PublicKeyFile string
	// Key is Alipay's RSA public key (支付宝公钥) for the application.
	Key *rsa.PublicKey
	// CertSN is the serial (CertSN) of Alipay's public-key certificate
	// when the file holds one: an answer naming another alipay_cert_sn
	// was signed by a certificate not configured, and is refused.
	CertSN string
}

// minKeyBits is the smallest RSA key RSA2 is used with.
const minKeyBits = 2048

// ParsePrivateKey reads the first PEM block of data as an RSA private key:
// PKCS#1 ("RSA PRIVATE KEY") or PKCS#8 ("PRIVATE KEY"). Errors say what is
// wrong (no PEM block, an encrypted or unknown block, not RSA, too short)
// and never quote the key's bytes.
func ParsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	block, err := pemBlock(data, "private key")
	if err != nil {
		return nil, err
	}
	var key any
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("parse alipay private key: the PEM block is encrypted; decrypt it first")
	default:
		return nil, fmt.Errorf("parse alipay private key: PEM block %s, want RSA PRIVATE KEY (PKCS#1) or PRIVATE KEY (PKCS#8)", channels.Quote(block.Type))
	}
	return rsaKey[*rsa.PrivateKey]("private key", block.Type, key, err)
}

// ParsePublicKey reads the first PEM block of data as an RSA public key:
// PKIX ("PUBLIC KEY"), PKCS#1 ("RSA PUBLIC KEY") or the public key of a
// certificate ("CERTIFICATE"; its validity and chain are not checked: a
// configured key is trusted as configured). Errors never quote the key's
// bytes.
func ParsePublicKey(data []byte) (*rsa.PublicKey, error) {
	block, err := pemBlock(data, "public key")
	if err != nil {
		return nil, err
	}
	var key any
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		return nil, fmt.Errorf("parse alipay public key: PEM block %s, want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", channels.Quote(block.Type))
	}
	return rsaKey[*rsa.PublicKey]("public key", block.Type, key, err)
}

// rsaKey checks what x509 made of a PEM block of type typ (key, or err):
// an RSA key of type K of at least minKeyBits bits. Its errors name the
// block type and the key's type or size, never its bytes.
func rsaKey[K *rsa.PrivateKey | *rsa.PublicKey](what, typ string, key any, err error) (K, error) {
	if err != nil {
		return nil, fmt.Errorf("parse alipay %s: %s block does not parse", what, typ)
	}
	rk, ok := key.(K)
	if !ok {
		return nil, fmt.Errorf("parse alipay %s: %T, want an RSA key", what, key)
	}
	var bits int
	switch k := any(rk).(type) {
	case *rsa.PrivateKey:
		bits = k.N.BitLen()
	case *rsa.PublicKey:
		bits = k.N.BitLen()
	}
	if bits < minKeyBits {
		return nil, fmt.Errorf("parse alipay %s: %d bits, RSA2 needs %d or more", what, bits, minKeyBits)
	}
	return rk, nil
}

// pemBlock returns the first PEM block of data.
func pemBlock(data []byte, what string) (*pem.Block, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("parse alipay %s: no PEM block (want -----BEGIN …----- armour)", what)
	}
	return block, nil
}
