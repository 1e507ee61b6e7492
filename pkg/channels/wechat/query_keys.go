package wechat

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
)

// The keys of the active query (docs/queries.md): the merchant's API
// private key signs requests, the platform's public key (or certificate)
// signs answers. Keys arrive as PEM bytes read by the caller (this package
// does no I/O); no error ever quotes key material.

// MinKeyBits is the smallest RSA modulus accepted for a query key: the
// scheme is WECHATPAY2-SHA256-RSA2048.
const MinKeyBits = 2048

// Credentials are a merchant's WeChat Pay API credentials, as a
// PAYCB_QUERY_CREDENTIALS_FILE entry `{tenant_id, channel: WECHAT,
// merchant_id, serial_no, private_key_file}` names them once the file is
// read, with `sp_mchid` added in partner mode (服务商模式), where the
// service provider's API key asks about a sub-merchant's orders. They can
// request refunds: only the querier holds them.
type Credentials struct {
	// TenantID is the tenant the merchant is bound to.
	TenantID int64
	// MerchantID is the merchant the requests ask about, as the merchant
	// binding names it: the mchid in direct mode, the sub_mchid in partner
	// mode.
	MerchantID string
	// ServiceProviderID is the service provider's mchid (sp_mchid) in
	// partner mode, empty in direct mode. Its API key signs the requests:
	// SerialNo and PrivateKey are then the service provider's.
	ServiceProviderID string
	// SerialNo is the serial number of the merchant API certificate whose
	// private key PrivateKey is (Authorization serial_no).
	SerialNo string
	// PrivateKey is the merchant API private key.
	PrivateKey *rsa.PrivateKey
}

// QueryTenantID is c.TenantID (channels.QueryCredentials).
func (c Credentials) QueryTenantID() int64 { return c.TenantID }

// QueryMerchantID is c.MerchantID (channels.QueryCredentials).
func (c Credentials) QueryMerchantID() string { return c.MerchantID }

// String describes c without its key.
func (c Credentials) String() string {
	key := "none"
	if c.PrivateKey != nil {
		key = "******"
	}
	sp := ""
	if c.ServiceProviderID != "" {
		sp = " service provider " + c.ServiceProviderID
	}
	return fmt.Sprintf("wechat credentials tenant %d merchant %s%s serial %s key %s", c.TenantID, c.MerchantID, sp, c.SerialNo, key)
}

// GoString is String: %#v never prints the key either.
func (c Credentials) GoString() string { return c.String() }

// LogValue logs c without its key.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// NewCredentials builds Credentials from the entry's fields and the PEM
// bytes of its private_key_file (ParsePrivateKey). It fails when the
// merchant id or serial is missing or the key does not parse.
func NewCredentials(tenantID int64, merchantID, serialNo string, privateKeyPEM []byte) (Credentials, error) {
	c := Credentials{TenantID: tenantID, MerchantID: merchantID, SerialNo: serialNo}
	if err := c.checkIDs(); err != nil {
		return Credentials{}, err
	}
	key, err := ParsePrivateKey(privateKeyPEM)
	if err != nil {
		return Credentials{}, fmt.Errorf("wechat credentials of merchant %s: %w", merchantID, err)
	}
	c.PrivateKey = key
	return c, nil
}

// check reports what makes c unusable for signing.
func (c Credentials) check() error {
	if err := c.checkIDs(); err != nil {
		return err
	}
	if c.PrivateKey == nil {
		return fmt.Errorf("wechat credentials of merchant %s: no private key", c.MerchantID)
	}
	return nil
}

// checkIDs reports a missing merchant id or serial, or one that cannot be
// written in the Authorization header as it is.
func (c Credentials) checkIDs() error {
	switch {
	case c.MerchantID == "":
		return errors.New("wechat credentials: merchant_id is missing")
	case c.SerialNo == "":
		return fmt.Errorf("wechat credentials of merchant %s: serial_no is missing", c.MerchantID)
	case !headerSafe(c.MerchantID) || !headerSafe(c.SerialNo) || !headerSafe(c.ServiceProviderID):
		return errors.New("wechat credentials: merchant_id, sp_mchid and serial_no must be printable ASCII without quotes or backslashes")
	case c.ServiceProviderID == c.MerchantID:
		return fmt.Errorf("wechat credentials of merchant %s: sp_mchid is the merchant itself; leave it out for direct mode", c.MerchantID)
	}
	return nil
}

// signer is the mchid the requests are signed for: the service provider's
// in partner mode, the merchant's own in direct mode.
func (c Credentials) signer() string {
	if c.ServiceProviderID != "" {
		return c.ServiceProviderID
	}
	return c.MerchantID
}

// headerSafe reports whether s can be written inside a quoted
// Authorization parameter as it is.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// PublicKey is a WeChat Pay platform key the answers to a merchant's
// queries are verified with, as a PAYCB_CHANNEL_PUBLIC_KEYS_FILE entry
// `{channel: WECHAT, merchant_id, key_id, public_key_file}` names it.
type PublicKey struct {
	// MerchantID is the merchant (mchid) the key answers for.
	MerchantID string
	// KeyID is what an answer's Wechatpay-Serial names: the platform
	// public-key id (PUB_KEY_ID_…) or the platform certificate's serial.
	KeyID string
	// Key is the public key.
	Key *rsa.PublicKey
}

// NewPublicKey builds a PublicKey from the entry's fields and the PEM bytes
// of its public_key_file (ParsePublicKey).
func NewPublicKey(merchantID, keyID string, publicKeyPEM []byte) (PublicKey, error) {
	if merchantID == "" {
		return PublicKey{}, errors.New("wechat public key: merchant_id is missing")
	}
	if keyID == "" {
		return PublicKey{}, fmt.Errorf("wechat public key of merchant %s: key_id is missing", merchantID)
	}
	key, err := ParsePublicKey(publicKeyPEM)
	if err != nil {
		return PublicKey{}, fmt.Errorf("wechat public key %s of merchant %s: %w", keyID, merchantID, err)
	}
	return PublicKey{MerchantID: merchantID, KeyID: keyID, Key: key}, nil
}

// ParsePrivateKey reads the first PEM block of data as an RSA private key:
// "PRIVATE KEY" (PKCS#8, as WeChat Pay issues apiclient_key.pem) or "RSA
// PRIVATE KEY" (PKCS#1), of at least MinKeyBits. Encrypted keys, other
// algorithms and other blocks are refused; the error names the block type
// or the reason, never the key's bytes.
func ParsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	block, err := pemBlock(data, "private key")
	if err != nil {
		return nil, err
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("private key: PKCS#8 block does not parse")
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("private key: PKCS#8 key is %T, want RSA", k)
		}
		key = rk
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("private key: PKCS#1 block does not parse")
		}
		key = k
	case "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("private key: the key is encrypted; give it unencrypted (file mode 0600)")
	default:
		return nil, fmt.Errorf("private key: PEM block is %q, want \"PRIVATE KEY\" (PKCS#8) or \"RSA PRIVATE KEY\" (PKCS#1)", block.Type)
	}
	if bits := key.N.BitLen(); bits < MinKeyBits {
		return nil, fmt.Errorf("private key: RSA key of %d bits, want at least %d", bits, MinKeyBits)
	}
	return key, nil
}

// ParsePublicKey reads the first PEM block of data as an RSA public key:
// "PUBLIC KEY" (PKIX, as WeChat Pay issues pub_key.pem) or "CERTIFICATE"
// (a platform certificate, its key taken; its validity dates are not
// checked: the configuration chooses which keys are trusted), of at least
// MinKeyBits. The error names the block type or the reason, never the
// key's bytes.
func ParsePublicKey(data []byte) (*rsa.PublicKey, error) {
	block, err := pemBlock(data, "public key")
	if err != nil {
		return nil, err
	}
	var pub any
	switch block.Type {
	case "PUBLIC KEY":
		if pub, err = x509.ParsePKIXPublicKey(block.Bytes); err != nil {
			return nil, errors.New("public key: PKIX block does not parse")
		}
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, errors.New("public key: certificate does not parse")
		}
		pub = cert.PublicKey
	default:
		return nil, fmt.Errorf("public key: PEM block is %q, want \"PUBLIC KEY\" (PKIX) or \"CERTIFICATE\"", block.Type)
	}
	key, ok := pub.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key: key is %T, want RSA", pub)
	}
	if bits := key.N.BitLen(); bits < MinKeyBits {
		return nil, fmt.Errorf("public key: RSA key of %d bits, want at least %d", bits, MinKeyBits)
	}
	return key, nil
}

// pemBlock returns the first PEM block of data.
func pemBlock(data []byte, what string) (*pem.Block, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block found (%d bytes)", what, len(data))
	}
	if len(block.Headers) > 0 {
		return nil, fmt.Errorf("%s: PEM block %q has headers (a legacy encrypted key?)", what, block.Type)
	}
	return block, nil
}
