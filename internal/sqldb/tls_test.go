package sqldb_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/dialect/feature"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

const tlsPassword = "s3cret-Passw0rd"

// TestOpenTLS: against a private MariaDB that requires TLS of every TCP
// client, Open connects through a certificate authority of the
// configuration's own, with and without a client certificate, and refuses
// a server whose certificate is for another name or from an authority it
// does not trust; without TLS the server refuses the connection.
func TestOpenTLS(t *testing.T) {
	files := sqldbtest.NewTLSFiles(t)
	srv := sqldbtest.StartTLSServer(t, files)
	admin, err := sqldb.OpenMySQL(srv.SocketDSN(""))
	require.NoError(t, err)
	defer admin.Close()
	ctx := context.Background()
	for _, stmt := range []string{
		"CREATE USER 'tls'@'%' IDENTIFIED BY '" + tlsPassword + "' REQUIRE SSL",
		"CREATE USER 'x509'@'%' IDENTIFIED BY '" + tlsPassword + "' REQUIRE X509",
		"CREATE USER 'plain'@'%' IDENTIFIED BY '" + tlsPassword + "'",
		"GRANT ALL ON *.* TO 'tls'@'%', 'x509'@'%', 'plain'@'%'",
	} {
		_, err := admin.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	dsn := func(user string) config.DSN {
		return config.DSN(user + ":" + tlsPassword + "@tcp(" + srv.Addr() + ")/")
	}
	otherCA := sqldbtest.NewCAFile(t)

	for _, tc := range []struct {
		name    string
		db      config.DB
		wantErr string // "" for a TLS session
	}{
		{
			name: "custom CA, name from the address",
			db:   config.DB{DSN: dsn("tls"), TLS: config.TLS{Enabled: true, CAFile: files.CA}},
		},
		{
			name: "custom CA, server name set",
			db:   config.DB{DSN: dsn("tls"), TLS: config.TLS{Enabled: true, CAFile: files.CA, ServerName: sqldbtest.TLSServerName}},
		},
		{
			name: "client certificate for a user that requires one",
			db: config.DB{DSN: dsn("x509"), TLS: config.TLS{
				Enabled: true, CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey,
			}},
		},
		{
			name:    "no client certificate for a user that requires one",
			db:      config.DB{DSN: dsn("x509"), TLS: config.TLS{Enabled: true, CAFile: files.CA}},
			wantErr: "Access denied for user 'x509'",
		},
		{
			name:    "server name the certificate does not carry",
			db:      config.DB{DSN: dsn("tls"), TLS: config.TLS{Enabled: true, CAFile: files.CA, ServerName: "other.test"}},
			wantErr: "mysql server certificate not accepted (check db.tls.ca_file and db.tls.server_name): tls: failed to verify certificate: x509: certificate is valid for",
		},
		{
			name:    "untrusted authority",
			db:      config.DB{DSN: dsn("tls"), TLS: config.TLS{Enabled: true, CAFile: otherCA}},
			wantErr: "certificate signed by unknown authority",
		},
		{
			name:    "system roots do not know the test authority",
			db:      config.DB{DSN: dsn("tls"), TLS: config.TLS{Enabled: true}},
			wantErr: "certificate signed by unknown authority",
		},
		{
			name: "user without a TLS requirement, over TLS",
			db:   config.DB{DSN: dsn("plain"), TLS: config.TLS{Enabled: true, CAFile: files.CA}},
		},
		{
			// MariaDB refuses a plaintext client under require_secure_transport
			// as it refuses a wrong password; the case above shows that the
			// same user and password are accepted over TLS.
			name:    "TLS off",
			db:      config.DB{DSN: dsn("plain")},
			wantErr: "Access denied for user 'plain'",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqldb.Open(tc.db)
			require.NoError(t, err)
			defer db.Close()
			err = sqldb.Ping(ctx, db, 10*time.Second)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), tlsPassword)
				return
			}
			require.NoError(t, err)
			var name, version string
			require.NoError(t, db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_version'").Scan(&name, &version))
			assert.Contains(t, []string{"TLSv1.2", "TLSv1.3"}, version)
		})
	}
}

// TestOpenTLSSettings: a TLS setting that cannot work is refused before any
// connection, naming the setting at fault and never quoting the password.
func TestOpenTLSSettings(t *testing.T) {
	files := sqldbtest.NewTLSFiles(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	const dsn = config.DSN("u:" + tlsPassword + "@tcp(db.internal:3306)/paycb")

	for _, tc := range []struct {
		name    string
		db      config.DB
		wantErr string
	}{
		{
			name:    "CA file missing",
			db:      config.DB{DSN: dsn, TLS: config.TLS{Enabled: true, CAFile: filepath.Join(dir, "absent.pem")}},
			wantErr: "db.tls.ca_file (PAYCB_DB_TLS_CA_FILE): open " + filepath.Join(dir, "absent.pem") + ": no such file or directory",
		},
		{
			name:    "CA file without a certificate",
			db:      config.DB{DSN: dsn, TLS: config.TLS{Enabled: true, CAFile: notPEM}},
			wantErr: "db.tls.ca_file (PAYCB_DB_TLS_CA_FILE) " + notPEM + ": no PEM certificate in it",
		},
		{
			name:    "key of another certificate",
			db:      config.DB{DSN: dsn, TLS: config.TLS{Enabled: true, CertFile: files.ClientCert, KeyFile: files.ServerKey}},
			wantErr: "db.tls.cert_file (PAYCB_DB_TLS_CERT_FILE) " + files.ClientCert + " with db.tls.key_file (PAYCB_DB_TLS_KEY_FILE) " + files.ServerKey + ": tls: private key does not match public key",
		},
		{
			name:    "certificate without its key",
			db:      config.DB{DSN: dsn, TLS: config.TLS{Enabled: true, CertFile: files.ClientCert}},
			wantErr: "go together: set both or neither",
		},
		{
			name:    "files while TLS is off",
			db:      config.DB{DSN: dsn, TLS: config.TLS{CAFile: files.CA}},
			wantErr: "while db.tls.enabled (PAYCB_DB_TLS_ENABLED) is false",
		},
		{
			name:    "DSN tls parameter beside TLS on",
			db:      config.DB{DSN: dsn + "?tls=true", TLS: config.TLS{Enabled: true}},
			wantErr: "db.dsn (PAYCB_DB_DSN): its tls=true parameter conflicts with db.tls.enabled",
		},
		{
			name:    "no host to verify",
			db:      config.DB{DSN: config.DSN("u:" + tlsPassword + "@unix(/run/mysqld.sock)/paycb"), TLS: config.TLS{Enabled: true}},
			wantErr: "db.tls.server_name (PAYCB_DB_TLS_SERVER_NAME) is required",
		},
		{
			name:    "CA path in the DSN",
			db:      config.DB{DSN: dsn + "?tls=/etc/ca.pem"},
			wantErr: "parse mysql dsn: tls=/etc/ca.pem is not one of the driver's modes",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqldb.Open(tc.db)
			if db != nil {
				_ = db.Close()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.NotContains(t, err.Error(), tlsPassword)
		})
	}
}

// TestOpenPool: Open applies the configured pool limits, and bun's dialect
// learns the server's version as the pool opens (MariaDB's RETURNING on).
func TestOpenPool(t *testing.T) {
	db, err := sqldb.Open(config.DB{DSN: config.DSN(sqldbtest.NewDatabase(t)), MaxOpenConns: 3, MaxIdleConns: 2, ConnMaxLifetime: time.Minute})
	require.NoError(t, err)
	defer db.Close()
	assert.Equal(t, 3, db.Stats().MaxOpenConnections)
	require.NoError(t, sqldb.Ping(context.Background(), db, 10*time.Second))
	var version string
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT version()").Scan(&version))
	assert.Equal(t, strings.Contains(version, "MariaDB"), db.HasFeature(feature.InsertReturning), "server %s", version)
}

// TestMySQLConfigSaysWhatIsWrong: a DSN the driver refuses is described in
// the driver's words, unless they would quote the password.
func TestMySQLConfigSaysWhatIsWrong(t *testing.T) {
	_, err := sqldb.MySQLConfig("u:pw@tcp(db:3306)paycb")
	require.EqualError(t, err, "parse mysql dsn: invalid DSN: missing the slash separating the database name")
	_, err = sqldb.MySQLConfig("u:" + tlsPassword + "@tcp(db:3306)/paycb?parseTime=maybe")
	require.EqualError(t, err, "parse mysql dsn: invalid bool value: maybe")
	// A password with a slash ends up in the database name, which the
	// driver's message would quote.
	_, err = sqldb.MySQLConfig("u:ab/%zzsecret@tcp(db:3306)")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret")
	var merr *mysql.MySQLError
	assert.NotErrorAs(t, err, &merr)
}
