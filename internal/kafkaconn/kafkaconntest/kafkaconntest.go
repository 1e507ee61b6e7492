package kafkaconntest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/paycallback/paycallback/internal/testpki"
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

// MustPKI generates a PKI in tb.TempDir() (testpki.New). With
// requireClientCert the broker refuses a client without a certificate
// signed by the CA.
func MustPKI(tb testing.TB, requireClientCert bool) PKI {
	tb.Helper()
	f := testpki.New(tb, "localhost", "worker")
	pair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		tb.Fatalf("load broker key pair: %v", err)
	}
	p := PKI{
		CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey,
		ServerTLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}},
	}
	if requireClientCert {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			tb.Fatalf("read CA: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			tb.Fatalf("CA %s holds no certificate", f.CA)
		}
		p.ServerTLS.ClientAuth = tls.RequireAndVerifyClientCert
		p.ServerTLS.ClientCAs = pool
	}
	return p
}
