package sqldb

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/go-sql-driver/mysql"

	"github.com/paycallback/paycallback/config"
)

// applyTLS sets on cfg the TLS that t describes, on the driver's own
// configuration rather than in its global registry of named settings. With
// t off, cfg is left as the DSN made it. With t on, every connection is
// TLS 1.2 at least, with no fallback to plaintext; the server's certificate
// is verified against t.CAFile (PEM; the system roots when empty) for the
// name t.ServerName (the host of the DSN's address when empty); a client
// certificate is presented when t.CertFile and t.KeyFile are set. It is an
// error to combine t with a DSN tls= parameter, to set t's files or name
// while t is off, and every file that cannot be read or holds no usable
// certificate; each error names the setting at fault.
func applyTLS(cfg *mysql.Config, t config.TLS) error {
	if !t.Enabled {
		if t.Set() {
			return errors.New("db.tls (PAYCB_DB_TLS_*): a CA file, client certificate, key or server name is set " +
				"while db.tls.enabled (PAYCB_DB_TLS_ENABLED) is false")
		}
		return nil
	}
	if cfg.TLSConfig != "" {
		return fmt.Errorf("db.dsn (PAYCB_DB_DSN): its tls=%s parameter conflicts with db.tls.enabled (PAYCB_DB_TLS_ENABLED); "+
			"remove it from the DSN", cfg.TLSConfig)
	}
	host := ""
	if cfg.Net == "tcp" {
		if h, _, err := net.SplitHostPort(cfg.Addr); err == nil {
			host = h
		}
	}
	tc, err := tlsConfig(t, host)
	if err != nil {
		return err
	}
	cfg.TLS = tc
	cfg.AllowFallbackToPlaintext = false
	return nil
}

// tlsConfig builds the client side of t for a server dialled at host.
func tlsConfig(t config.TLS, host string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	if tc.ServerName == "" {
		return nil, errors.New("db.tls.server_name (PAYCB_DB_TLS_SERVER_NAME) is required: the DSN's address has no host name to verify")
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("db.tls.ca_file (PAYCB_DB_TLS_CA_FILE): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("db.tls.ca_file (PAYCB_DB_TLS_CA_FILE) %s: no PEM certificate in it", t.CAFile)
		}
		tc.RootCAs = pool
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
	case t.CertFile == "" || t.KeyFile == "":
		return nil, errors.New("db.tls.cert_file (PAYCB_DB_TLS_CERT_FILE) and db.tls.key_file (PAYCB_DB_TLS_KEY_FILE) go together: set both or neither")
	default:
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("db.tls.cert_file (PAYCB_DB_TLS_CERT_FILE) %s with db.tls.key_file (PAYCB_DB_TLS_KEY_FILE) %s: %w",
				t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// tlsError adds to a failed connection's error, when the TLS handshake
// failed, which setting decides it: the server's certificate was not
// trusted or not for the name verified, or the server refused the client's.
func tlsError(err error) error {
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) {
		return fmt.Errorf("mysql server certificate not accepted (check db.tls.ca_file and db.tls.server_name): %w", err)
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return fmt.Errorf("mysql server refused the tls handshake (check db.tls.cert_file and db.tls.key_file): %w", err)
	}
	return err
}
