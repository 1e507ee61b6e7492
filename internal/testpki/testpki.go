package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Files are the PEM files of one authority (CA), the server certificate and
// key it signed, and the client certificate and key it signed. Keys are
// PKCS #8.
type Files struct {
	CA         string
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
}

// New generates a fresh authority and its two certificates, valid for a
// day, into tb.TempDir(): the server's for the DNS name server (its common
// name), localhost, 127.0.0.1 and ::1; the client's with common name
// client. It fails tb on any error.
func New(tb testing.TB, server, client string) Files {
	tb.Helper()
	dir := tb.TempDir()
	ca, caKey := newCA(tb, dir, "ca")
	f := Files{CA: filepath.Join(dir, "ca.pem")}
	dns := []string{server}
	if !slices.Contains(dns, "localhost") {
		dns = append(dns, "localhost")
	}
	f.ServerCert, f.ServerKey = issue(tb, dir, "server", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: server},
		DNSNames:    dns,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	f.ClientCert, f.ClientKey = issue(tb, dir, "client", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: client},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return f
}

// NewCAFile writes the certificate of a fresh authority, one that signed
// nothing New made, and returns its path.
func NewCAFile(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	newCA(tb, dir, "other-ca")
	return filepath.Join(dir, "other-ca.pem")
}

// newCA makes a self-signed authority and writes its certificate to
// dir/name.pem.
func newCA(tb testing.TB, dir, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	der, key := certify(tb, name, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "paycb test " + name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("parse %s certificate: %v", name, err)
	}
	writePEM(tb, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	return cert, key
}

// issue signs tmpl with the authority and writes the certificate and its
// key to dir/name.pem and dir/name-key.pem.
func issue(tb testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (certFile, keyFile string) {
	tb.Helper()
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, key := certify(tb, name, tmpl, ca, caKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("marshal %s key: %v", name, err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(tb, certFile, "CERTIFICATE", der)
	writePEM(tb, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// certify makes a key and a certificate of tmpl for it, valid for a day
// from an hour ago, signed by parent's key, or by its own when parent is
// nil (an authority).
func certify(tb testing.TB, name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	tb.Helper()
	key := newKey(tb)
	tmpl.SerialNumber = serial(tb)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatalf("create %s certificate: %v", name, err)
	}
	return der, key
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("generate key: %v", err)
	}
	return k
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatalf("serial number: %v", err)
	}
	return n
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("write %s: %v", path, err)
	}
}
