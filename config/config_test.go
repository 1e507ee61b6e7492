package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const (
	testPassword = "s3cr3t-P@ss"
	testKey      = "0123456789abcdefGHIJKLMNOPQRSTUV" // 32 bytes
	tenantKey    = "tenant1001-key-ABCDEFGHIJKLMNOPQ" // 32 bytes
)

func envMap(m map[string]string) LookupEnv {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func parseFlags(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fl := RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	return fl
}

func TestDefault(t *testing.T) {
	c := Default()
	c.Finalize()
	require.NoError(t, c.Validate(files))

	assert.Equal(t, []string{"127.0.0.1:9092"}, c.Kafka.Brokers)
	assert.Equal(t, "channel-events", c.Kafka.Topic)
	assert.Equal(t, "settlement-consumer", c.Kafka.Group)
	assert.Equal(t, "channel-events.dlq", c.Kafka.DLQTopic)
	assert.Equal(t, "channel-events.settled", c.Settled.Topic)
	assert.True(t, c.Settled.Enabled())
	assert.Equal(t, 168*time.Hour, c.Settled.Retention)
	assert.Equal(t, ":9464", c.Admin.Addr)
	assert.Equal(t, "info", c.Log.Level)
	assert.Equal(t, 2*time.Minute, c.Worker.OrphanAfter)
	assert.Equal(t, 256, c.Worker.BatchMax)
	assert.Equal(t, 20*time.Second, c.Worker.ShutdownTimeout)
	assert.Equal(t, 10*time.Millisecond, c.Worker.RetryBackoffMin)
	assert.Equal(t, 30*time.Second, c.Worker.RetryBackoffMax)
	assert.Equal(t, time.Minute, c.Worker.StallThreshold)
	assert.Equal(t, 30*time.Second, c.Worker.SweepInterval)
	assert.False(t, c.DB.DSN.IsSet())
	assert.False(t, c.WeChat.APIv3Key.IsSet())
}

func TestValidateForDSN(t *testing.T) {
	c := Default()
	c.Finalize()
	for _, tc := range []struct {
		command string
		wantErr bool
	}{
		{"run", true},
		{"migrate", true},
		{"replay", false}, // resets Kafka offsets only
		{"orphans", true},
		{"reconcile", true},
		{"purge", true},
		{"refund", true},
		{"demo", false},
		{"dlq", false},
		{"dlq list", false},
		{"refund register", true},
		{"query run", true},
		{"query once", false}, // asks a channel, may publish: no database
	} {
		t.Run(tc.command, func(t *testing.T) {
			err := c.ValidateFor(tc.command, files)
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrDSNRequired)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "PAYCB_DB_DSN")
		})
	}

	t.Run("run with DSN", func(t *testing.T) {
		c := c
		c.DB.DSN = "root:" + testPassword + "@tcp(db:3306)/paycb"
		require.NoError(t, c.ValidateFor("run", files))
	})
	t.Run("other errors are kept", func(t *testing.T) {
		c := c
		c.Worker.BatchMax = 0
		err := c.ValidateFor("run", files)
		require.ErrorIs(t, err, ErrDSNRequired)
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "PAYCB_BATCH_MAX")
	})
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *Config)
		want   []string // substrings of the error
	}{
		{"no brokers", func(c *Config) { c.Kafka.Brokers = nil }, []string{"kafka.brokers (PAYCB_KAFKA_BROKERS)", "at least one"}},
		{"blank broker", func(c *Config) { c.Kafka.Brokers = []string{"a:1", " "} }, []string{"kafka.brokers", "broker 1"}},
		{"empty topic", func(c *Config) { c.Kafka.Topic = "" }, []string{"kafka.topic (PAYCB_KAFKA_TOPIC)"}},
		{"empty group", func(c *Config) { c.Kafka.Group = "" }, []string{"kafka.group (PAYCB_KAFKA_GROUP)"}},
		{"dlq equals topic", func(c *Config) { c.Kafka.DLQTopic = c.Kafka.Topic }, []string{"kafka.dlq_topic (PAYCB_KAFKA_DLQ_TOPIC)", "must differ"}},
		{"dlq empty", func(c *Config) { c.Kafka.DLQTopic = "" }, []string{"kafka.dlq_topic", "Finalize"}},
		{"settled equals dlq", func(c *Config) { c.Settled.Topic = c.Kafka.DLQTopic }, []string{"settled.topic (PAYCB_SETTLED_TOPIC)", "must differ"}},
		{"settled empty", func(c *Config) { c.Settled.Topic = "" }, []string{"settled.topic", "Finalize"}},
		{"settled retention", func(c *Config) { c.Settled.Retention = time.Minute }, []string{"settled.retention (PAYCB_SETTLED_RETENTION)"}},
		{"min bytes", func(c *Config) { c.Kafka.MinBytes = 0 }, []string{"kafka.min_bytes"}},
		{"max below min", func(c *Config) { c.Kafka.MinBytes = 10; c.Kafka.MaxBytes = 5 }, []string{"kafka.max_bytes"}},
		{"start offset", func(c *Config) { c.Kafka.StartOffset = "middle" }, []string{"kafka.start_offset", `"middle"`}},
		{"heartbeat", func(c *Config) { c.Kafka.HeartbeatInterval = time.Minute }, []string{"kafka.heartbeat_interval", "session_timeout"}},
		{"max wait", func(c *Config) { c.Kafka.MaxWait = 0 }, []string{"kafka.max_wait (PAYCB_KAFKA_MAX_WAIT)", "between 10ms and 30s, got 0s"}},
		{"dsn shape", func(c *Config) { c.DB.DSN = DSN("root:" + testPassword) }, []string{"db.dsn (PAYCB_DB_DSN)", "dbname"}},
		{"open conns", func(c *Config) { c.DB.MaxOpenConns = 0 }, []string{"db.max_open_conns"}},
		{"idle conns", func(c *Config) { c.DB.MaxIdleConns = 100 }, []string{"db.max_idle_conns"}},
		{"admin addr", func(c *Config) { c.Admin.Addr = "" }, []string{"admin.addr (PAYCB_ADMIN_ADDR)"}},
		{"short default key", func(c *Config) { c.WeChat.APIv3Key = Secret(testKey[:31]) }, []string{"wechat.apiv3_key (PAYCB_WECHAT_APIV3_KEY)", "exactly 32 bytes, got 31"}},
		{"long tenant key", func(c *Config) { c.WeChat.APIv3Keys = map[int64]Keys{1001: {Secret(testKey + "x")}} }, []string{"wechat.apiv3_keys[1001]", "got 33"}},
		{"empty tenant key", func(c *Config) { c.WeChat.APIv3Keys = map[int64]Keys{1001: {""}} }, []string{"wechat.apiv3_keys[1001]", "got 0"}},
		{"bad tenant", func(c *Config) { c.WeChat.APIv3Keys = map[int64]Keys{0: {Secret(testKey)}} }, []string{"wechat.apiv3_keys[0]", "tenant ID"}},
		{"log level", func(c *Config) { c.Log.Level = "verbose" }, []string{"log.level (PAYCB_LOG_LEVEL)", `"verbose"`}},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, []string{"log.format"}},
		{"batch zero", func(c *Config) { c.Worker.BatchMax = 0 }, []string{"worker.batch_max (PAYCB_BATCH_MAX)", "got 0"}},
		{"batch huge", func(c *Config) { c.Worker.BatchMax = MaxBatch + 1 }, []string{"worker.batch_max"}},
		{"orphan after", func(c *Config) { c.Worker.OrphanAfter = -time.Second }, []string{"worker.orphan_after (PAYCB_ORPHAN_AFTER)"}},
		{"backoff order", func(c *Config) { c.Worker.RetryBackoffMax = time.Millisecond }, []string{"worker.retry_backoff_max"}},
		{"shutdown", func(c *Config) { c.Worker.ShutdownTimeout = 0 }, []string{"worker.shutdown_timeout"}},
		{"several at once", func(c *Config) { c.Kafka.Topic = ""; c.Worker.BatchMax = 0 }, []string{"kafka.topic", "worker.batch_max"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Finalize()
			tc.mutate(&c)
			err := c.Validate(files)
			require.ErrorIs(t, err, ErrInvalid)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), testPassword)
			assert.NotContains(t, err.Error(), testKey[:31])
		})
	}
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "c.yaml", `
kafka:
  brokers: [file-1:9092, file-2:9092]
  topic: file-topic
  group: file-group
db:
  dsn: "file:`+testPassword+`@tcp(file:3306)/paycb"
admin:
  addr: ":1111"
log:
  level: debug
worker:
  batch_max: 10
  orphan_after: 3m
wechat:
  apiv3_keys:
    1001: "`+tenantKey+`"
`)

	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags []string
		check func(t *testing.T, c Config)
	}{
		{
			name: "file over defaults",
			check: func(t *testing.T, c Config) {
				t.Helper()
				assert.Equal(t, []string{"file-1:9092", "file-2:9092"}, c.Kafka.Brokers)
				assert.Equal(t, "file-topic", c.Kafka.Topic)
				assert.Equal(t, "file-topic.dlq", c.Kafka.DLQTopic)
				assert.Equal(t, "file-group", c.Kafka.Group)
				assert.Equal(t, ":1111", c.Admin.Addr)
				assert.Equal(t, "debug", c.Log.Level)
				assert.Equal(t, 10, c.Worker.BatchMax)
				assert.Equal(t, 3*time.Minute, c.Worker.OrphanAfter)
				assert.Equal(t, "settlement-consumer", Default().Kafka.Group) // untouched defaults stay
				assert.Equal(t, 20*time.Second, c.Worker.ShutdownTimeout)
				assert.Equal(t, []string{tenantKey}, c.WeChat.KeysFor(1001).Reveal())
			},
		},
		{
			name: "environment over file",
			env: map[string]string{
				"PAYCB_KAFKA_BROKERS":    " env-1:9092 , ,env-2:9092",
				"PAYCB_KAFKA_TOPIC":      "env-topic",
				"PAYCB_KAFKA_GROUP":      "env-group",
				"PAYCB_DB_DSN":           "env:" + testPassword + "@tcp(env:3306)/paycb",
				"PAYCB_ADMIN_ADDR":       ":2222",
				"PAYCB_WECHAT_APIV3_KEY": testKey,
				"PAYCB_LOG_LEVEL":        "warn",
				"PAYCB_ORPHAN_AFTER":     "90s",
				"PAYCB_BATCH_MAX":        "1",
				"PAYCB_SHUTDOWN_TIMEOUT": "5s",
			},
			check: func(t *testing.T, c Config) {
				t.Helper()
				assert.Equal(t, []string{"env-1:9092", "env-2:9092"}, c.Kafka.Brokers)
				assert.Equal(t, "env-topic", c.Kafka.Topic)
				assert.Equal(t, "env-topic.dlq", c.Kafka.DLQTopic, "the DLQ follows the final topic")
				assert.Equal(t, "env-topic.settled", c.Settled.Topic, "the settled topic follows the final topic")
				assert.Equal(t, "env-group", c.Kafka.Group)
				assert.Equal(t, "env:"+testPassword+"@tcp(env:3306)/paycb", c.DB.DSN.Reveal())
				assert.Equal(t, ":2222", c.Admin.Addr)
				assert.Equal(t, "warn", c.Log.Level)
				assert.Equal(t, 90*time.Second, c.Worker.OrphanAfter)
				assert.Equal(t, 1, c.Worker.BatchMax)
				assert.Equal(t, 5*time.Second, c.Worker.ShutdownTimeout)
				assert.Equal(t, []string{tenantKey}, c.WeChat.KeysFor(1001).Reveal(), "a tenant's own key wins over the default")
				assert.Equal(t, []string{testKey}, c.WeChat.KeysFor(2002).Reveal())
			},
		},
		{
			name: "empty environment variable keeps the file value",
			env:  map[string]string{"PAYCB_KAFKA_TOPIC": "", "PAYCB_KAFKA_DLQ_TOPIC": ""},
			check: func(t *testing.T, c Config) {
				t.Helper()
				assert.Equal(t, "file-topic", c.Kafka.Topic)
				assert.Equal(t, "file-topic.dlq", c.Kafka.DLQTopic)
			},
		},
		{
			name:  "flags over environment",
			env:   map[string]string{"PAYCB_KAFKA_TOPIC": "env-topic", "PAYCB_BATCH_MAX": "7", "PAYCB_LOG_LEVEL": "warn"},
			flags: []string{"--kafka-topic=flag-topic", "--batch-max", "3", "--admin-addr=127.0.0.1:3333", "--orphan-after=10m", "--kafka-brokers=f1:1,f2:2", "--db-dsn=flag:" + testPassword + "@/db"},
			check: func(t *testing.T, c Config) {
				t.Helper()
				assert.Equal(t, "flag-topic", c.Kafka.Topic)
				assert.Equal(t, "flag-topic.dlq", c.Kafka.DLQTopic)
				assert.Equal(t, 3, c.Worker.BatchMax)
				assert.Equal(t, "127.0.0.1:3333", c.Admin.Addr)
				assert.Equal(t, 10*time.Minute, c.Worker.OrphanAfter)
				assert.Equal(t, []string{"f1:1", "f2:2"}, c.Kafka.Brokers)
				assert.Equal(t, "flag:"+testPassword+"@/db", c.DB.DSN.Reveal())
				assert.Equal(t, "warn", c.Log.Level, "an unset flag does not reset the environment's value")
			},
		},
		{
			name:  "explicit DLQ topic wins over derivation",
			env:   map[string]string{"PAYCB_KAFKA_DLQ_TOPIC": "dead"},
			flags: []string{"--kafka-topic=flag-topic"},
			check: func(t *testing.T, c Config) {
				t.Helper()
				assert.Equal(t, "flag-topic", c.Kafka.Topic)
				assert.Equal(t, "dead", c.Kafka.DLQTopic)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := parseFlags(t, append([]string{"--config", file}, tc.flags...)...)
			c, err := Load(fl, envMap(tc.env))
			require.NoError(t, err)
			tc.check(t, c)
			require.NoError(t, c.ValidateFor("run", files))
		})
	}
}

func TestLoadConfigFile(t *testing.T) {
	t.Run("explicit missing file is an error", func(t *testing.T) {
		fl := parseFlags(t, "--config", filepath.Join(t.TempDir(), "nope.yaml"))
		_, err := Load(fl, nil)
		require.ErrorIs(t, err, os.ErrNotExist)
		assert.Contains(t, err.Error(), "nope.yaml")
	})
	t.Run("missing default file is fine", func(t *testing.T) {
		t.Chdir(t.TempDir())
		c, err := Load(parseFlags(t), nil)
		require.NoError(t, err)
		want := Default()
		want.Finalize()
		assert.Equal(t, want, c)
	})
	t.Run("default file is read when present", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, DefaultFile, "kafka:\n  topic: from-default-file\n")
		t.Chdir(dir)
		c, err := Load(nil, nil)
		require.NoError(t, err)
		assert.Equal(t, "from-default-file", c.Kafka.Topic)
		path, explicit := parseFlags(t).ConfigFile()
		assert.Equal(t, DefaultFile, path)
		assert.False(t, explicit)
	})
	t.Run("unknown field is an error", func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "c.yaml", "kafka:\n  topik: typo\n")
		_, err := Load(parseFlags(t, "--config", file), nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "topik")
	})
	t.Run("type errors hide the value", func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "c.yaml", "wechat:\n  apiv3_keys: \""+testKey+"\"\n")
		_, err := Load(parseFlags(t, "--config", file), nil)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), testKey[:8])
		assert.Contains(t, err.Error(), "line 2")
	})
	t.Run("empty file changes nothing", func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "c.yaml", "# nothing\n")
		c, err := Load(parseFlags(t, "--config", file), nil)
		require.NoError(t, err)
		assert.Equal(t, "channel-events", c.Kafka.Topic)
	})
}

func TestApplyEnvErrors(t *testing.T) {
	c := Default()
	err := c.ApplyEnv(envMap(map[string]string{
		"PAYCB_BATCH_MAX":    "lots",
		"PAYCB_ORPHAN_AFTER": "2 minutes",
		"PAYCB_DB_DSN":       "root:" + testPassword + "@/db",
	}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PAYCB_BATCH_MAX")
	assert.Contains(t, err.Error(), "PAYCB_ORPHAN_AFTER")
	assert.NotContains(t, err.Error(), testPassword)
}

func TestFlags(t *testing.T) {
	t.Run("syntax errors surface from Parse", func(t *testing.T) {
		for _, args := range [][]string{
			{"--batch-max=many"},
			{"--orphan-after=soon"},
			{"--shutdown-timeout=1"},
		} {
			fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			RegisterFlags(fs)
			require.Error(t, fs.Parse(args), args)
		}
	})
	t.Run("help shows defaults and masks the DSN", func(t *testing.T) {
		var out bytes.Buffer
		fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
		fs.SetOutput(&out)
		RegisterFlags(fs)
		require.NoError(t, fs.Parse([]string{"--db-dsn=root:" + testPassword + "@/db"}))
		fs.PrintDefaults()
		fs.VisitAll(func(f *flag.Flag) { out.WriteString(f.Value.String() + "\n") })
		assert.Contains(t, out.String(), "channel-events")
		assert.Contains(t, out.String(), "PAYCB_KAFKA_TOPIC")
		assert.NotContains(t, out.String(), testPassword)
	})
	t.Run("nil flags change nothing", func(t *testing.T) {
		var fl *Flags
		c := Default()
		require.NoError(t, fl.Apply(&c))
		assert.Equal(t, Default(), c)
	})
}

// secretConfig returns a valid configuration holding every kind of secret.
func secretConfig(t *testing.T) Config {
	t.Helper()
	c := Default()
	c.DB.DSN = DSN("root:" + testPassword + "@tcp(db.internal:3306)/paycb?parseTime=true")
	c.WeChat.APIv3Key = Secret(testKey)
	c.WeChat.APIv3Keys = map[int64]Keys{1001: {Secret(tenantKey)}}
	c.Finalize()
	require.NoError(t, c.ValidateFor("run", files))
	return c
}

func TestSecretsNeverPrinted(t *testing.T) {
	c := secretConfig(t)
	secrets := []string{testPassword, testKey, tenantKey, "s3cr3t", "0123456789abcdef"}

	var textLog, jsonLog bytes.Buffer
	slog.New(slog.NewTextHandler(&textLog, nil)).Info("config", "config", c, "dsn", c.DB.DSN, "key", c.WeChat.APIv3Key)
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("config", "config", c, "keys", c.WeChat.APIv3Keys)
	jsonBytes, err := json.Marshal(c)
	require.NoError(t, err)
	yamlBytes, err := yaml.Marshal(c)
	require.NoError(t, err)

	outputs := map[string]string{
		"String":      c.String(),
		"%v":          fmt.Sprintf("%v", c),
		"%+v":         fmt.Sprintf("%+v", c),
		"%#v":         fmt.Sprintf("%#v", c),
		"%+v pointer": fmt.Sprintf("%+v", &c),
		"%+v db":      fmt.Sprintf("%+v", c.DB),
		"%#v db":      fmt.Sprintf("%#v", c.DB),
		"%+v wechat":  fmt.Sprintf("%+v", c.WeChat),
		"%#v wechat":  fmt.Sprintf("%#v", c.WeChat),
		"%s key":      fmt.Sprintf("%s", c.WeChat.APIv3Key),
		"%q key":      fmt.Sprintf("%q", c.WeChat.APIv3Key),
		"%x key":      fmt.Sprintf("%x", c.WeChat.APIv3Key),
		"%d key":      fmt.Sprintf("%d", c.WeChat.APIv3Key),
		"%x dsn":      fmt.Sprintf("%x", c.DB.DSN),
		"%v map":      fmt.Sprintf("%v", c.WeChat.APIv3Keys),
		"text log":    textLog.String(),
		"json log":    jsonLog.String(),
		"json":        string(jsonBytes),
		"yaml":        string(yamlBytes),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			for _, s := range secrets {
				assert.NotContains(t, out, s)
			}
			for _, s := range []string{fmt.Sprintf("%x", testKey), fmt.Sprintf("%x", testPassword)} {
				assert.NotContains(t, out, s)
			}
		})
	}

	assert.Contains(t, c.String(), "db.dsn=root:***@tcp(db.internal:3306)/paycb?parseTime=true")
	assert.Contains(t, c.String(), "wechat.apiv3_key=***")
	assert.Contains(t, c.String(), "wechat.apiv3_keys.1001=[***]")
	assert.Contains(t, c.String(), "kafka.dlq_topic=channel-events.dlq")
	assert.Contains(t, textLog.String(), `config.db.dsn="root:***@tcp(db.internal:3306)/paycb`)
	assert.Contains(t, jsonLog.String(), `"apiv3_key":"***"`)
	assert.Equal(t, `config.Secret("***")`, fmt.Sprintf("%#v", c.WeChat.APIv3Key))

	// The values are still there for the code that needs them.
	assert.Equal(t, testKey, c.WeChat.APIv3Key.Reveal())
	assert.Contains(t, c.DB.DSN.Reveal(), testPassword)
}

func TestSecretUnset(t *testing.T) {
	var s Secret
	assert.Empty(t, s.String())
	assert.Empty(t, fmt.Sprint(s))
	assert.False(t, s.IsSet())
	assert.Equal(t, "***", Secret("x").String())
}

func TestMaskDSN(t *testing.T) {
	for _, tc := range []struct {
		name, dsn, want string
	}{
		{"empty", "", ""},
		{"full", "root:pw@tcp(127.0.0.1:3306)/paycb?parseTime=true", "root:***@tcp(127.0.0.1:3306)/paycb?parseTime=true"},
		{"no password", "root@tcp(db:3306)/paycb", "root@tcp(db:3306)/paycb"},
		{"no credentials", "tcp(db:3306)/paycb", "tcp(db:3306)/paycb"},
		{"empty password", "root:@/paycb", "root:***@/paycb"},
		{"password with @ : and /", "u:p@s:s/w@tcp(db)/paycb", "u:***@tcp(db)/paycb"},
		{"slash in params", "u:pw@tcp(db)/paycb?loc=Asia/Shanghai", "u:***@tcp(db)/paycb?loc=Asia/Shanghai"},
		{"unix socket", "u:pw@unix(/tmp/mysql.sock)/paycb", "u:***@unix(/tmp/mysql.sock)/paycb"},
		{"no slash at all", "u:pw", "***"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DSN(tc.dsn).String())
		})
	}
}

func TestSlogLevel(t *testing.T) {
	for level, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn,
		"error": slog.LevelError, "ERROR": slog.LevelError, "bogus": slog.LevelInfo,
	} {
		t.Run(level, func(t *testing.T) {
			assert.Equal(t, want, Log{Level: level}.SlogLevel())
		})
	}
}

func TestKeysFor(t *testing.T) {
	w := WeChat{}
	assert.Empty(t, w.KeysFor(1001), "no keys at all")
	assert.False(t, w.HasAnyKey())

	w.APIv3Keys = map[int64]Keys{1001: {Secret(tenantKey), Secret(testKey)}}
	assert.Equal(t, []string{tenantKey, testKey}, w.KeysFor(1001).Reveal(), "current key first")
	assert.Empty(t, w.KeysFor(2002), "another tenant with no default key")
	assert.True(t, w.HasAnyKey())
}

func TestEnvVarsCoverContract(t *testing.T) {
	got := EnvVars()
	for _, name := range []string{
		"PAYCB_KAFKA_BROKERS", "PAYCB_KAFKA_TOPIC", "PAYCB_KAFKA_GROUP", "PAYCB_KAFKA_DLQ_TOPIC",
		"PAYCB_DB_DSN", "PAYCB_ADMIN_ADDR", "PAYCB_WECHAT_APIV3_KEY", "PAYCB_LOG_LEVEL",
		"PAYCB_ORPHAN_AFTER", "PAYCB_BATCH_MAX",
	} {
		assert.Contains(t, got, name)
	}
}

// TestExampleFile loads consumer.example.yaml: it must parse strictly, show
// exactly the defaults, and mention every field and environment variable.
func TestExampleFile(t *testing.T) {
	data, err := os.ReadFile("consumer.example.yaml")
	require.NoError(t, err)

	c := Default()
	require.NoError(t, c.LoadYAML(data))
	c.Finalize()
	require.NoError(t, c.ValidateFor("demo", files))
	want := Default()
	want.Finalize()
	want.WeChat.APIv3Keys = map[int64]Keys{} // the example shows an empty map
	assert.Equal(t, want, c, "the example documents the defaults")

	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	for _, path := range yamlPaths(reflect.TypeFor[Config](), "") {
		t.Run(path, func(t *testing.T) {
			var node any = doc
			for part := range strings.SplitSeq(path, ".") {
				m, ok := node.(map[string]any)
				require.True(t, ok, "parent of %s is not a mapping", part)
				node, ok = m[part]
				require.True(t, ok, "missing %s", path)
			}
		})
	}
	for _, env := range EnvVars() {
		assert.Contains(t, string(data), env)
	}
}

// yamlPaths lists the dotted YAML path of every leaf field of t.
func yamlPaths(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
			out = append(out, yamlPaths(f.Type, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

func TestLoadYAMLErrorIsWrapped(t *testing.T) {
	c := Default()
	err := c.LoadYAML([]byte("kafka: ["))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "decode yaml: "))
	assert.NotErrorIs(t, err, ErrInvalid)
}
