package sqldbtest

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
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TLSServerName is the DNS name the server certificate of NewTLSFiles
// carries, besides the addresses 127.0.0.1 and localhost.
const TLSServerName = "db.test"

// TLSFiles are PEM files of a certificate authority of a test's own, a
// server certificate it signed (for TLSServerName, localhost and
// 127.0.0.1), and a client certificate it signed (common name "paycb").
type TLSFiles struct {
	CA         string
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
}

// NewTLSFiles generates a fresh authority and its two certificates, valid
// for a day, into a temporary directory of tb's.
func NewTLSFiles(tb testing.TB) TLSFiles {
	tb.Helper()
	dir := tb.TempDir()
	ca, caKey := newCA(tb, dir, "ca")
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem")}
	f.ServerCert, f.ServerKey = issue(tb, dir, "server", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: TLSServerName},
		DNSNames:    []string{TLSServerName, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	f.ClientCert, f.ClientKey = issue(tb, dir, "client", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "paycb"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return f
}

// NewCAFile writes the certificate of a fresh authority, one that signed
// none of NewTLSFiles' certificates, and returns its path.
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
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: "paycb test " + name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(tb, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(tb, err)
	writePEM(tb, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	return cert, key
}

// issue signs tmpl with the authority and writes the certificate and its
// key to dir/name.pem and dir/name-key.pem.
func issue(tb testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl.SerialNumber = serial(tb)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(tb, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(tb, err)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(tb, certFile, "CERTIFICATE", der)
	writePEM(tb, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(tb, err)
	return n
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	require.NoError(tb, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

// StartTLSServer starts a private instance (see StartServer) with the server
// certificate of files, trusting files.CA for client certificates, and
// require_secure_transport on: a TCP client without TLS is refused. Its
// root account is reached through SocketDSN.
func StartTLSServer(tb testing.TB, files TLSFiles, args ...string) *Server {
	tb.Helper()
	return StartServer(tb, append([]string{
		"--ssl-ca=" + files.CA, "--ssl-cert=" + files.ServerCert, "--ssl-key=" + files.ServerKey,
		"--require-secure-transport=ON",
	}, args...)...)
}
