package tlsclient_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/testpki"
	"github.com/paycallback/paycallback/internal/tlsclient"
)

// TestConfig: one builder for both settings: off is nil, on is TLS 1.2 at
// least with the CA, the client pair and the server name (the setting's,
// else the caller's default); every error names the setting it is about.
func TestConfig(t *testing.T) {
	files := testpki.New(t, "broker.test", "worker")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))

	for _, s := range []tlsclient.Setting{tlsclient.DB, tlsclient.Kafka} {
		t.Run(s.Key, func(t *testing.T) {
			tc, err := tlsclient.Config(config.TLS{}, s, "host")
			require.NoError(t, err)
			assert.Nil(t, tc, "off")

			tc, err = tlsclient.Config(config.TLS{Enabled: true, CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}, s, "host")
			require.NoError(t, err)
			assert.Equal(t, uint16(tls.VersionTLS12), tc.MinVersion)
			assert.Equal(t, "host", tc.ServerName, "the caller's default name")
			assert.NotNil(t, tc.RootCAs)
			assert.Len(t, tc.Certificates, 1)
			tc, err = tlsclient.Config(config.TLS{Enabled: true, ServerName: "broker.test"}, s, "host")
			require.NoError(t, err)
			assert.Equal(t, "broker.test", tc.ServerName, "the setting's name first")
			assert.Nil(t, tc.RootCAs, "the system roots")

			for _, bad := range []struct {
				name string
				t    config.TLS
				want string
			}{
				{"set while off", config.TLS{CAFile: files.CA}, s.Env + "_ENABLED) is false"},
				{"unreadable CA", config.TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "absent.pem")}, s.Key + ".ca_file (" + s.Env + "_CA_FILE)"},
				{"CA without a certificate", config.TLS{Enabled: true, CAFile: notPEM}, "no PEM certificate in it"},
				{"certificate without its key", config.TLS{Enabled: true, CertFile: files.ClientCert}, s.Env + "_KEY_FILE) is required"},
				{"key without its certificate", config.TLS{Enabled: true, KeyFile: files.ClientKey}, s.Env + "_CERT_FILE) is required"},
				{"key of another certificate", config.TLS{Enabled: true, CertFile: files.ClientCert, KeyFile: files.ServerKey}, "private key does not match"},
			} {
				tc, err := tlsclient.Config(bad.t, s, "host")
				require.Error(t, err, bad.name)
				assert.Nil(t, tc, bad.name)
				assert.Contains(t, err.Error(), bad.want, bad.name)
			}
		})
	}
}
