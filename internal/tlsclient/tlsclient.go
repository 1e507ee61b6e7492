package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/paycallback/paycallback/config"
)

// Setting names a TLS setting for its errors: Key is its YAML key
// ("db.tls") and Env its environment variables' prefix ("PAYCB_DB_TLS").
type Setting struct {
	Key, Env string
}

// The TLS settings of the configuration.
var (
	DB    = Setting{Key: "db.tls", Env: "PAYCB_DB_TLS"}
	Kafka = Setting{Key: "kafka.tls", Env: "PAYCB_KAFKA_TLS"}
)

func (s Setting) name(field string) string {
	return fmt.Sprintf("%s.%s (%s_%s)", s.Key, field, s.Env, strings.ToUpper(field))
}

// Config returns the client configuration t describes, or nil when t is
// off. The server's certificate is verified against t.CAFile (PEM; the
// system roots when empty) for t.ServerName, else for serverName (the
// caller's default; empty lets the client fill in the host it dials); a
// client certificate is presented when t.CertFile and t.KeyFile are set;
// the floor is TLS 1.2. It is an error to set t's files or name while t is
// off, to set one of the certificate and its key without the other, and
// every file that cannot be read or holds no usable certificate; each error
// names the setting at fault (s).
func Config(t config.TLS, s Setting, serverName string) (*tls.Config, error) {
	if !t.Enabled {
		if t.Set() {
			return nil, fmt.Errorf("%s (%s_*): a CA file, client certificate, key or server name is set while %s",
				s.Key, s.Env, s.name("enabled")+" is false")
		}
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if tc.ServerName == "" {
		tc.ServerName = serverName
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name("ca_file"), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", s.name("ca_file"), t.CAFile)
		}
		tc.RootCAs = pool
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
	case t.KeyFile == "":
		return nil, fmt.Errorf("%s is required with %s.cert_file: %s", s.name("key_file"), s.Key, together(s))
	case t.CertFile == "":
		return nil, fmt.Errorf("%s is required with %s.key_file: %s", s.name("cert_file"), s.Key, together(s))
	default:
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s %s with %s %s: %w", s.name("cert_file"), t.CertFile, s.name("key_file"), t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

func together(s Setting) string {
	return s.Key + ".cert_file and " + s.Key + ".key_file go together: set both or neither"
}
