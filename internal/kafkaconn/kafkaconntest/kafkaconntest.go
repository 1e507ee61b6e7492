// Package kafkaconntest generates, for tests, the certificates a TLS Kafka
// listener and its clients need: a CA, a broker certificate for 127.0.0.1
// and localhost signed by it, and a client certificate signed by it, as PEM
// files in the test's temporary directory. Nothing here is fit for
// production use.
package kafkaconntest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is one generated certificate authority with a broker and a client
// certificate it signed.
type PKI struct {
	// CAFile is the CA certificate (PEM), for kafka.tls.ca_file.
	CAFile string
	// CertFile and KeyFile are the client certificate and key (PEM), for
	// kafka.tls.cert_file and kafka.tls.key_file.
	CertFile, KeyFile string
	// ServerTLS is the broker's listener setting: its certificate (valid
	// for 127.0.0.1, ::1 and localhost) and, when the PKI was made with
	// MustPKI(tb, true), a requirement for a client certificate signed by
	// the CA.
	ServerTLS *tls.Config
}

// MustPKI generates a PKI in tb.TempDir(). With requireClientCert the
// broker refuses a client without a certificate signed by the CA.
func MustPKI(tb testing.TB, requireClientCert bool) PKI {
	tb.Helper()
	dir := tb.TempDir()
	now := time.Now()

	caKey := mustKey(tb)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "paycallback test CA " + tb.Name()},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatalf("create CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatalf("parse CA certificate: %v", err)
	}

	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, server bool) (certPEM, keyPEM []byte) {
		key := mustKey(tb)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatalf("create %s certificate: %v", cn, err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			tb.Fatalf("marshal %s key: %v", cn, err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	serverCert, serverKey := issue(2, "broker", x509.ExtKeyUsageServerAuth, true)
	clientCert, clientKey := issue(3, "worker", x509.ExtKeyUsageClientAuth, false)

	p := PKI{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
	}
	mustWrite(tb, p.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	mustWrite(tb, p.CertFile, clientCert)
	mustWrite(tb, p.KeyFile, clientKey)

	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		tb.Fatalf("load broker key pair: %v", err)
	}
	p.ServerTLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if requireClientCert {
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		p.ServerTLS.ClientAuth = tls.RequireAndVerifyClientCert
		p.ServerTLS.ClientCAs = pool
	}
	return p
}

func mustKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("generate key: %v", err)
	}
	return k
}

func mustWrite(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatalf("write %s: %v", path, err)
	}
}
