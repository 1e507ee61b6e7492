package sqldb

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/tlsclient"
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
		_, err := tlsclient.Config(t, tlsclient.DB, "") // refuses files set while TLS is off
		return err
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
	if t.ServerName == "" && host == "" {
		return errors.New("db.tls.server_name (PAYCB_DB_TLS_SERVER_NAME) is required: the DSN's address has no host name to verify")
	}
	tc, err := tlsclient.Config(t, tlsclient.DB, host)
	if err != nil {
		return err
	}
	cfg.TLS = tc
	cfg.AllowFallbackToPlaintext = false
	return nil
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
