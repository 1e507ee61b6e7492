package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSettingsCoverConfig: the settings table and the Config struct name
// the same YAML paths, so no field escapes defaults, bounds, loading or
// printing.
func TestSettingsCoverConfig(t *testing.T) {
	var paths []string
	for _, s := range settings {
		paths = append(paths, s.path)
	}
	assert.ElementsMatch(t, yamlPaths(reflect.TypeFor[Config](), ""), paths)
	for _, s := range settings {
		if s.flag != "" {
			assert.NotEmpty(t, s.env, "%s has a flag but no environment variable", s.path)
		}
		assert.NotEmpty(t, s.usage, "%s has no usage", s.path)
	}
}

// TestDefaultsWithinBounds: every default is accepted, and every bound is
// the edge of what is accepted.
func TestDefaultsWithinBounds(t *testing.T) {
	for i := range settings {
		s := &settings[i]
		if s.min == "" && s.max == "" {
			continue
		}
		t.Run(s.path, func(t *testing.T) {
			c := Default()
			assert.Empty(t, s.checkBounds(&c), "default")
			for _, edge := range []string{s.min, s.max} {
				require.NoError(t, s.set(&c, edge))
				assert.Empty(t, s.checkBounds(&c), "bound %s", edge)
			}
			switch p := s.field(&c).(type) {
			case *int:
				*p = boundInt(s.min) - 1
				assert.Contains(t, s.checkBounds(&c), "must be between")
				*p = boundInt(s.max) + 1
				assert.Contains(t, s.checkBounds(&c), "must be between")
			case *time.Duration:
				*p = boundDuration(s.min) - 1
				assert.Contains(t, s.checkBounds(&c), "must be between")
				*p = boundDuration(s.max) + 1
				assert.Contains(t, s.checkBounds(&c), "must be between")
			default:
				t.Fatalf("bounds on a %T", p)
			}
		})
	}
}

// TestAbsurdValuesAreRefusedTogether: the values that once started a
// worker without complaint are all reported by one Validate.
func TestAbsurdValuesAreRefusedTogether(t *testing.T) {
	c := Default()
	require.NoError(t, c.ApplyEnv(envMap(map[string]string{
		"PAYCB_SWEEP_INTERVAL":   "1ns",
		"PAYCB_SHUTDOWN_TIMEOUT": "1000000h",
		"PAYCB_KAFKA_MAX_BYTES":  "1",
		"PAYCB_STARTUP_TIMEOUT":  "0s",
	})))
	c.Finalize()
	err := c.Validate(files)
	require.ErrorIs(t, err, ErrInvalid)
	for _, want := range []string{
		"worker.sweep_interval (PAYCB_SWEEP_INTERVAL): must be between 100ms and 1h0m0s, got 1ns",
		"worker.shutdown_timeout (PAYCB_SHUTDOWN_TIMEOUT): must be between 100ms and 10m0s, got 1000000h0m0s",
		"kafka.max_bytes (PAYCB_KAFKA_MAX_BYTES): must be between 16384 and 268435456, got 1",
		"worker.startup_timeout (PAYCB_STARTUP_TIMEOUT)",
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestSecretFromFile(t *testing.T) {
	dir := t.TempDir()
	dsn := "app:" + testPassword + "@tcp(db:3306)/paycb"
	dsnFile := writeFile(t, dir, "dsn", dsn+"\n")
	keyFile := writeFile(t, dir, "key", testKey+"\r\n")
	passFile := writeFile(t, dir, "sasl", testPassword)

	t.Run("each secret from its file", func(t *testing.T) {
		c := Default()
		require.NoError(t, c.ApplyEnv(envMap(map[string]string{
			"PAYCB_DB_DSN_FILE":              dsnFile,
			"PAYCB_WECHAT_APIV3_KEY_FILE":    keyFile,
			"PAYCB_KAFKA_SASL_PASSWORD_FILE": passFile,
		})))
		assert.Equal(t, dsn, c.DB.DSN.Reveal(), "one trailing newline is dropped")
		assert.Equal(t, testKey, c.WeChat.APIv3Key.Reveal(), "a trailing CRLF is dropped")
		assert.Equal(t, testPassword, c.Kafka.SASL.Password.Reveal())
	})
	t.Run("both set", func(t *testing.T) {
		c := Default()
		err := c.ApplyEnv(envMap(map[string]string{"PAYCB_DB_DSN": dsn, "PAYCB_DB_DSN_FILE": dsnFile}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "PAYCB_DB_DSN and PAYCB_DB_DSN_FILE are both set")
		assert.NotContains(t, err.Error(), testPassword)
	})
	t.Run("missing and empty files", func(t *testing.T) {
		empty := writeFile(t, dir, "empty", "\n")
		c := Default()
		err := c.ApplyEnv(envMap(map[string]string{
			"PAYCB_WECHAT_APIV3_KEY_FILE":    filepath.Join(dir, "nope"),
			"PAYCB_KAFKA_SASL_PASSWORD_FILE": empty,
		}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "PAYCB_WECHAT_APIV3_KEY_FILE")
		assert.Contains(t, err.Error(), "no such file")
		assert.Contains(t, err.Error(), "PAYCB_KAFKA_SASL_PASSWORD_FILE: "+empty+" is empty")
	})
}

func TestTenantKeysFile(t *testing.T) {
	const (
		newKey = "NEWKEY-0123456789abcdefghijklmno" // 32 bytes
		oldKey = "OLDKEY-0123456789abcdefghijklmno"
	)
	dir := t.TempDir()
	path := writeFile(t, dir, "keys", "# rotation of 1001 in flight\n1001="+newKey+"\n\n1001="+oldKey+"\r\n2002="+tenantKey+"\n")

	t.Run("several keys per tenant, current first", func(t *testing.T) {
		c, err := Load(nil, envMap(map[string]string{"PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE": path}))
		require.NoError(t, err)
		require.NoError(t, c.Validate(files))
		assert.Equal(t, []string{newKey, oldKey}, c.WeChat.KeysFor(1001).Reveal())
		assert.Equal(t, []string{tenantKey}, c.WeChat.KeysFor(2002).Reveal())
		assert.Contains(t, c.String(), "wechat.apiv3_keys.1001=[*** ***]")
		assert.NotContains(t, c.String(), newKey)
	})
	t.Run("one tenant in two sources", func(t *testing.T) {
		cfgFile := writeFile(t, dir, "c.yaml", "wechat:\n  apiv3_keys:\n    2002: "+testKey+"\n  tenant_keys_file: "+path+"\n")
		_, err := Load(parseFlags(t, "--config", cfgFile), nil)
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "tenant 2002 has keys both in wechat.apiv3_keys and in "+path)
		assert.NotContains(t, err.Error(), testKey)
	})
	t.Run("bad lines are named, keys never quoted", func(t *testing.T) {
		bad := writeFile(t, dir, "bad", "1001 "+newKey+"\nx="+oldKey+"\n3003=\n4004=short\n")
		c, err := Load(nil, envMap(map[string]string{"PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE": bad}))
		require.Error(t, err)
		for _, want := range []string{"line 1: want TENANT_ID=KEY", "line 2: what stands before '=' is not a positive tenant ID", "line 3: tenant 3003 has an empty key"} {
			assert.Contains(t, err.Error(), want)
		}
		assert.NotContains(t, err.Error(), newKey)
		assert.NotContains(t, err.Error(), oldKey)
		_ = c
	})
	t.Run("a line written backwards never echoes its key", func(t *testing.T) {
		backwards := writeFile(t, dir, "backwards", "1001="+oldKey+"\n"+newKey+"=1001\n")
		_, err := Load(nil, envMap(map[string]string{"PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE": backwards}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), backwards, "the file is named")
		assert.Contains(t, err.Error(), "line 2: ", "the line is named")
		assert.NotContains(t, err.Error(), newKey, "the key written where the tenant belongs is not quoted")
		assert.NotContains(t, err.Error(), oldKey)
	})
	t.Run("short key is a validation error", func(t *testing.T) {
		short := writeFile(t, dir, "short", "4004=short\n4004=short\n")
		c, err := Load(nil, envMap(map[string]string{"PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE": short}))
		require.NoError(t, err)
		err = c.Validate(files)
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "wechat.apiv3_keys[4004]: key 1 must be exactly 32 bytes, got 5")
		assert.Contains(t, err.Error(), "wechat.apiv3_keys[4004]: key 2 must be exactly 32 bytes")
		assert.NotContains(t, err.Error(), "short\n")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(nil, envMap(map[string]string{"PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE": filepath.Join(dir, "nope")}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE")
	})
}

func TestStatementKeyFile(t *testing.T) {
	const (
		current = "CURRENT-0123456789abcdefghijklmn" // 32 bytes
		older   = "OLDER-0123456789abcdefghijklmnop"
	)
	dir := t.TempDir()
	good := writeFile(t, dir, "statement-keys", "# current first\n2026-12="+current+"\n2026-06="+older+"\n")

	t.Run("from the environment and YAML; only the path is shown", func(t *testing.T) {
		c, err := Load(nil, envMap(map[string]string{"PAYCB_STATEMENT_KEY_FILE": good}))
		require.NoError(t, err)
		require.NoError(t, c.Validate(files))
		assert.Equal(t, good, c.Statement.KeyFile)
		assert.Contains(t, c.String(), "statement.key_file="+good)
		for _, printed := range []string{c.String(), fmt.Sprintf("%v %+v %#v", c, c, c)} {
			assert.NotContains(t, printed, current)
			assert.NotContains(t, printed, older)
		}
		cfgFile := writeFile(t, dir, "c.yaml", "statement:\n  key_file: "+good+"\n")
		c, err = Load(parseFlags(t, "--config", cfgFile), nil)
		require.NoError(t, err)
		assert.Equal(t, good, c.Statement.KeyFile)
	})
	for _, tc := range []struct{ name, file, want string }{
		{"short secret", "k1=" + current + "\nk2=short-secret\n", "line 2: the secret is 12 bytes, at least 32 required"},
		{"duplicate id", "k1=" + current + "\nk1=" + older + "\n", "line 2: the key id repeats line 1's"},
		{"bad line", "# keys\n" + current + "\n", "line 2: want KEY_ID=SECRET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, dir, "keys-"+strings.ReplaceAll(tc.name, " ", "_"), tc.file)
			c, err := Load(nil, envMap(map[string]string{"PAYCB_STATEMENT_KEY_FILE": path}))
			require.NoError(t, err)
			err = c.Validate(files)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "statement.key_file (PAYCB_STATEMENT_KEY_FILE)")
			assert.Contains(t, err.Error(), tc.want)
			for _, secret := range []string{current, older, "short-secret"} {
				assert.NotContains(t, err.Error(), secret)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		c, err := Load(nil, envMap(map[string]string{"PAYCB_STATEMENT_KEY_FILE": filepath.Join(dir, "nope")}))
		require.NoError(t, err)
		err = c.Validate(files)
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "PAYCB_STATEMENT_KEY_FILE")
	})
}

func TestSecuritySettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		want   []string
		reject []string // must not appear (secrets)
	}{
		{
			name: "TLS files while TLS is off",
			env:  map[string]string{"PAYCB_KAFKA_TLS_CA_FILE": "/ca.pem", "PAYCB_DB_TLS_SERVER_NAME": "db"},
			want: []string{
				"kafka.tls.ca_file (PAYCB_KAFKA_TLS_CA_FILE): is set but kafka.tls.enabled is false",
				"db.tls.server_name (PAYCB_DB_TLS_SERVER_NAME): is set but db.tls.enabled is false",
			},
		},
		{
			name: "certificate without key",
			env:  map[string]string{"PAYCB_KAFKA_TLS_ENABLED": "true", "PAYCB_KAFKA_TLS_CERT_FILE": "/c.pem"},
			want: []string{"kafka.tls.cert_file (PAYCB_KAFKA_TLS_CERT_FILE): and kafka.tls.key_file go together"},
		},
		{
			name: "DSN tls= beside db.tls",
			env:  map[string]string{"PAYCB_DB_DSN": "u:" + testPassword + "@tcp(db:3306)/paycb?tls=true", "PAYCB_DB_TLS_ENABLED": "true"},
			want: []string{"db.dsn (PAYCB_DB_DSN): has a tls= parameter beside db.tls"}, reject: []string{testPassword},
		},
		{
			name: "DSN tls= naming a file",
			env:  map[string]string{"PAYCB_DB_DSN": "u:" + testPassword + "@tcp(db:3306)/paycb?tls=/etc/ca.pem"},
			want: []string{"parameter tls= must be true, false, skip-verify or preferred; for a CA bundle or a client certificate use db.tls"}, reject: []string{testPassword},
		},
		{
			name: "DSN address without net()",
			env:  map[string]string{"PAYCB_DB_DSN": "u:" + testPassword + "@db:3306/paycb"},
			want: []string{"the address must be written net(addr)"}, reject: []string{testPassword},
		},
		{
			name: "DSN bad parameter",
			env:  map[string]string{"PAYCB_DB_DSN": "u:" + testPassword + "@tcp(db:3306)/paycb?parseTime=maybe"},
			want: []string{"parameter parseTime= has an invalid value"}, reject: []string{testPassword, "maybe"},
		},
		{
			name: "DSN without database",
			env:  map[string]string{"PAYCB_DB_DSN": "u:" + testPassword + "@tcp(db:3306)/"},
			want: []string{"names no database"}, reject: []string{testPassword},
		},
		{
			name: "unknown SASL mechanism",
			env:  map[string]string{"PAYCB_KAFKA_SASL_MECHANISM": "GSSAPI"},
			want: []string{`kafka.sasl.mechanism (PAYCB_KAFKA_SASL_MECHANISM): must be one of (empty), PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; got "GSSAPI"`},
		},
		{
			name: "SASL without credentials",
			env:  map[string]string{"PAYCB_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"},
			want: []string{"kafka.sasl.username (PAYCB_KAFKA_SASL_USERNAME): is required", "kafka.sasl.password (PAYCB_KAFKA_SASL_PASSWORD): is required"},
		},
		{
			name: "credentials without SASL",
			env:  map[string]string{"PAYCB_KAFKA_SASL_PASSWORD": testPassword},
			want: []string{"kafka.sasl.password (PAYCB_KAFKA_SASL_PASSWORD): is set but kafka.sasl.mechanism is empty"}, reject: []string{testPassword},
		},
		{
			name: "unknown channel",
			env:  map[string]string{"PAYCB_CHANNELS": "wechat,paypal"},
			want: []string{`worker.channels (PAYCB_CHANNELS): must name only WECHAT, ALIPAY, SQB; got "PAYPAL"`},
		},
		{
			name: "no channel",
			env:  map[string]string{"PAYCB_CHANNELS": " , "},
			want: []string{"worker.channels (PAYCB_CHANNELS): must name at least one of WECHAT, ALIPAY, SQB"},
		},
		{
			name: "channel twice",
			env:  map[string]string{"PAYCB_CHANNELS": "SQB,sqb"},
			want: []string{"worker.channels (PAYCB_CHANNELS): names a channel twice"},
		},
		{
			name: "admin address",
			env:  map[string]string{"PAYCB_ADMIN_ADDR": "9464"},
			want: []string{`admin.addr (PAYCB_ADMIN_ADDR): "9464" is not a host:port`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			require.NoError(t, c.ApplyEnv(envMap(tc.env)))
			c.Finalize()
			err := c.Validate(files)
			require.ErrorIs(t, err, ErrInvalid)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			for _, r := range tc.reject {
				assert.NotContains(t, err.Error(), r)
			}
		})
	}

	t.Run("a secured setting is valid", func(t *testing.T) {
		c := Default()
		require.NoError(t, c.ApplyEnv(envMap(map[string]string{
			"PAYCB_KAFKA_TLS_ENABLED":    "true",
			"PAYCB_KAFKA_TLS_CA_FILE":    "/ca.pem",
			"PAYCB_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
			"PAYCB_KAFKA_SASL_USERNAME":  "paycb",
			"PAYCB_KAFKA_SASL_PASSWORD":  testPassword,
			"PAYCB_DB_DSN":               "u:" + testPassword + "@tcp(db:3306)/paycb",
			"PAYCB_DB_TLS_ENABLED":       "true",
			"PAYCB_DB_TLS_CERT_FILE":     "/c.pem",
			"PAYCB_DB_TLS_KEY_FILE":      "/k.pem",
			"PAYCB_CHANNELS":             "alipay, sqb",
		})))
		c.Finalize()
		require.NoError(t, c.ValidateFor("run", files))
		assert.Equal(t, []string{"ALIPAY", "SQB"}, c.Worker.Channels)
		assert.NotContains(t, c.String(), testPassword)
		assert.Contains(t, c.String(), "kafka.sasl.password=***")
	})
}

// TestLogValueDurationsAreStrings: the configuration logged at start shows
// durations as Go duration strings in both formats, in nested groups.
func TestLogValueDurationsAreStrings(t *testing.T) {
	c := Default()
	c.Finalize()
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("start", "config", c)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("start", "config", c)
	assert.Contains(t, text.String(), "config.worker.shutdown_timeout=20s")
	assert.Contains(t, text.String(), "config.kafka.tls.enabled=false")
	assert.Contains(t, js.String(), `"max_wait":"500ms"`)
	assert.Contains(t, js.String(), `"batch_max":256`)
	assert.True(t, slices.ContainsFunc(strings.Fields(c.String()), func(f string) bool { return f == "worker.channels=WECHAT,ALIPAY,SQB" }))
}

// TestQuerySettings: the channels' API base URLs default to the production
// hosts, the environment sets them and the CA and credentials files; a
// base URL that is not https, or a WeChat URL with a path, is refused; the
// credentials file is not read at load.
func TestQuerySettings(t *testing.T) {
	c, err := Load(nil, envMap(nil))
	require.NoError(t, err)
	assert.Equal(t, Query{
		WeChatURL: "https://api.mch.weixin.qq.com", AlipayURL: "https://openapi.alipay.com/gateway.do", SQBURL: "https://api.shouqianba.com", FirstWait: time.Minute, Rate: 5, Burst: 10,
	}, c.Query)
	require.NoError(t, c.Validate(FileChecks{}))

	c, err = Load(nil, envMap(map[string]string{
		"PAYCB_QUERY_CREDENTIALS_FILE": "/nonexistent/credentials.yaml",
		"PAYCB_QUERY_WECHAT_URL":       "https://127.0.0.1:8443",
		"PAYCB_QUERY_ALIPAY_URL":       "https://127.0.0.1:8444/gateway.do",
		"PAYCB_QUERY_SQB_URL":          "https://127.0.0.1:8445/",
		"PAYCB_QUERY_TLS_CA_FILE":      "/ca.pem",
	}))
	require.NoError(t, err, "the credentials file is the querier's to read")
	require.NoError(t, c.Validate(FileChecks{}))
	assert.Equal(t, "/nonexistent/credentials.yaml", c.Query.CredentialsFile)
	assert.Equal(t, "https://127.0.0.1:8444/gateway.do", c.Query.AlipayURL)
	assert.Contains(t, c.String(), "query.credentials_file=/nonexistent/credentials.yaml")

	for name, env := range map[string]map[string]string{
		"plain http":  {"PAYCB_QUERY_ALIPAY_URL": "http://openapi.alipay.com/gateway.do"},
		"wechat path": {"PAYCB_QUERY_WECHAT_URL": "https://api.mch.weixin.qq.com/v3"},
		"sqb query":   {"PAYCB_QUERY_SQB_URL": "https://api.shouqianba.com/?x=1"},
		"user info":   {"PAYCB_QUERY_SQB_URL": "https://user:pw@api.shouqianba.com"},
		"no host":     {"PAYCB_QUERY_WECHAT_URL": "https://"},
		"not a URL":   {"PAYCB_QUERY_WECHAT_URL": "::"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Load(nil, envMap(env))
			if err == nil {
				err = c.Validate(FileChecks{})
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "PAYCB_QUERY_")
			assert.NotContains(t, err.Error(), "pw@")
		})
	}
}
