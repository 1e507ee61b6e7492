package alipay

import (
	"crypto/md5" //nolint:gosec // Alipay's certificate serial number is defined as an MD5; it is an identifier, not a security boundary
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Certificate mode (公钥证书模式): the application signs with the private
// key of its application certificate and sends two more signed request
// parameters, app_cert_sn (its certificate's serial, CertSN) and
// alipay_root_cert_sn (RootCertSN of Alipay's root certificate file);
// Alipay signs its answers with the key of its own public-key certificate
// and names that certificate in the answer's alipay_cert_sn. Facts and
// sources: docs/queries.md.

// rsaSignatureOIDPrefix is the OID arc of PKCS #1 (1.2.840.113549.1.1):
// the root certificates whose signature algorithm is under it are the RSA
// ones alipay_root_cert_sn names; the SM2 and ECDSA roots of the same file
// are left out, as Alipay's SDKs leave them out.
var rsaSignatureOIDPrefix = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1}

// certificateFields are the parts of an X.509 certificate the serial needs,
// read without parsing the key, so that a root of an algorithm Go does not
// know (SM2) does not stop the file.
type certificateFields struct {
	TBS       asn1.RawValue
	Algorithm pkix.AlgorithmIdentifier
	Signature asn1.BitString
}

type tbsFields struct {
	Version      int `asn1:"optional,explicit,default:0,tag:0"`
	SerialNumber *big.Int
	Algorithm    pkix.AlgorithmIdentifier
	Issuer       asn1.RawValue
	Validity     asn1.RawValue
	Subject      asn1.RawValue
	PublicKey    asn1.RawValue
	Rest         asn1.RawValue `asn1:"optional,tag:1"`
}

// certSN is md5hex(issuer DN in RFC 2253 form + the decimal serial number)
// of one DER certificate, and whether its signature algorithm is RSA.
func certSN(der []byte) (sn string, rsa bool, err error) {
	var c certificateFields
	if rest, err := asn1.Unmarshal(der, &c); err != nil || len(rest) > 0 {
		return "", false, fmt.Errorf("not an X.509 certificate")
	}
	var t tbsFields
	if _, err := asn1.Unmarshal(c.TBS.FullBytes, &t); err != nil {
		return "", false, fmt.Errorf("the certificate's fields do not parse")
	}
	if t.SerialNumber == nil {
		return "", false, fmt.Errorf("the certificate has no serial number")
	}
	var issuer pkix.RDNSequence
	if rest, err := asn1.Unmarshal(t.Issuer.FullBytes, &issuer); err != nil || len(rest) > 0 {
		return "", false, fmt.Errorf("the certificate's issuer does not parse")
	}
	sum := md5.Sum([]byte(issuer.String() + t.SerialNumber.String())) //nolint:gosec // see the import
	oid := c.Algorithm.Algorithm
	isRSA := len(oid) > len(rsaSignatureOIDPrefix) && oid[:len(rsaSignatureOIDPrefix)].Equal(rsaSignatureOIDPrefix)
	return hex.EncodeToString(sum[:]), isRSA, nil
}

// certificates returns the DER of every CERTIFICATE block of a PEM file,
// refusing any other block and a file with none.
func certificates(data []byte, what string) ([][]byte, error) {
	var ders [][]byte
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: PEM block %s, want CERTIFICATE", what, channels.Quote(block.Type))
		}
		ders = append(ders, block.Bytes)
	}
	if len(ders) == 0 {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", what)
	}
	return ders, nil
}

// CertSN is Alipay's serial of the first certificate of a PEM file (an
// application certificate, app_cert_sn, or Alipay's public-key
// certificate, the alipay_cert_sn its answers carry): the lower-case hex
// MD5 of the issuer's distinguished name in RFC 2253 form followed by the
// serial number in decimal.
func CertSN(pemData []byte) (string, error) {
	ders, err := certificates(pemData, "alipay certificate")
	if err != nil {
		return "", err
	}
	sn, _, err := certSN(ders[0])
	if err != nil {
		return "", fmt.Errorf("alipay certificate: %w", err)
	}
	return sn, nil
}

// RootCertSN is alipay_root_cert_sn of Alipay's root certificate file
// (alipayRootCert.crt): the CertSN of each certificate in it signed with
// RSA, in the file's order, joined by "_". A file with no RSA certificate
// is refused.
func RootCertSN(pemData []byte) (string, error) {
	ders, err := certificates(pemData, "alipay root certificate")
	if err != nil {
		return "", err
	}
	var sns []string
	for i, der := range ders {
		sn, isRSA, err := certSN(der)
		if err != nil {
			return "", fmt.Errorf("alipay root certificate %d: %w", i+1, err)
		}
		if isRSA {
			sns = append(sns, sn)
		}
	}
	if len(sns) == 0 {
		return "", fmt.Errorf("alipay root certificate: none of its %d certificates is signed with RSA", len(ders))
	}
	return strings.Join(sns, "_"), nil
}
