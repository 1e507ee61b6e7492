package sqldbtest

import (
	"testing"

	"github.com/paycallback/paycallback/internal/testpki"
)

// TLSServerName is the DNS name the server certificate of NewTLSFiles
// carries, besides the addresses 127.0.0.1 and localhost.
const TLSServerName = "db.test"

// TLSFiles are PEM files of a certificate authority of a test's own, a
// server certificate it signed (for TLSServerName, localhost and
// 127.0.0.1), and a client certificate it signed (common name "paycb").
type TLSFiles = testpki.Files

// NewTLSFiles generates a fresh authority and its two certificates, valid
// for a day, into a temporary directory of tb's (testpki.New).
func NewTLSFiles(tb testing.TB) TLSFiles {
	tb.Helper()
	return testpki.New(tb, TLSServerName, "paycb")
}

// NewCAFile writes the certificate of a fresh authority, one that signed
// none of NewTLSFiles' certificates, and returns its path.
func NewCAFile(tb testing.TB) string {
	tb.Helper()
	return testpki.NewCAFile(tb)
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
