package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// LookupEnv looks up one environment variable; os.LookupEnv has this shape.
// Tests pass a map-backed function so they never touch the process
// environment.
type LookupEnv func(name string) (value string, ok bool)

// field is one setting that the environment or a flag can set. The table
// below is the single list of environment variables and flags.
type field struct {
	path   string // YAML path, used in error messages
	env    string // environment variable, "" for none
	flag   string // flag name, "" for none
	usage  string // flag usage
	secret bool   // never echo the value
	file   bool   // env NAME_FILE may name a file holding the value
	set    func(c *Config, v string) error
	get    func(c Config) string // flag default shown in -help
}

func str(p func(c *Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func integer(p func(c *Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("parse integer %q: %w", v, errors.Unwrap(err))
		}
		*p(c) = n
		return nil
	}
}

func boolean(p func(c *Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("parse boolean %q: want true or false", v)
		}
		*p(c) = b
		return nil
	}
}

func duration(p func(c *Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("parse duration: %w", err)
		}
		*p(c) = d
		return nil
	}
}

var fields = []field{
	{
		path: "kafka.brokers", env: "PAYCB_KAFKA_BROKERS", flag: "kafka-brokers", usage: "comma-separated bootstrap brokers",
		set: func(c *Config, v string) error { c.Kafka.Brokers = splitList(v); return nil },
		get: func(c Config) string { return strings.Join(c.Kafka.Brokers, ",") },
	},
	{
		path: "kafka.topic", env: "PAYCB_KAFKA_TOPIC", flag: "kafka-topic", usage: "input topic",
		set: str(func(c *Config) *string { return &c.Kafka.Topic }), get: func(c Config) string { return c.Kafka.Topic },
	},
	{
		path: "kafka.group", env: "PAYCB_KAFKA_GROUP", flag: "kafka-group", usage: "consumer group",
		set: str(func(c *Config) *string { return &c.Kafka.Group }), get: func(c Config) string { return c.Kafka.Group },
	},
	{
		path: "kafka.dlq_topic", env: "PAYCB_KAFKA_DLQ_TOPIC", flag: "kafka-dlq-topic", usage: "dead-letter topic (default <topic>.dlq)",
		set: str(func(c *Config) *string { return &c.Kafka.DLQTopic }), get: func(c Config) string { return c.Kafka.DLQTopic },
	},
	{path: "kafka.min_bytes", env: "PAYCB_KAFKA_MIN_BYTES", set: integer(func(c *Config) *int { return &c.Kafka.MinBytes })},
	{path: "kafka.max_bytes", env: "PAYCB_KAFKA_MAX_BYTES", set: integer(func(c *Config) *int { return &c.Kafka.MaxBytes })},
	{path: "kafka.max_wait", env: "PAYCB_KAFKA_MAX_WAIT", set: duration(func(c *Config) *time.Duration { return &c.Kafka.MaxWait })},
	{path: "kafka.start_offset", env: "PAYCB_KAFKA_START_OFFSET", set: str(func(c *Config) *string { return &c.Kafka.StartOffset })},
	{path: "kafka.session_timeout", env: "PAYCB_KAFKA_SESSION_TIMEOUT", set: duration(func(c *Config) *time.Duration { return &c.Kafka.SessionTimeout })},
	{path: "kafka.heartbeat_interval", env: "PAYCB_KAFKA_HEARTBEAT_INTERVAL", set: duration(func(c *Config) *time.Duration { return &c.Kafka.HeartbeatInterval })},
	{path: "kafka.rebalance_timeout", env: "PAYCB_KAFKA_REBALANCE_TIMEOUT", set: duration(func(c *Config) *time.Duration { return &c.Kafka.RebalanceTimeout })},
	{path: "kafka.partition_watch_interval", env: "PAYCB_KAFKA_PARTITION_WATCH_INTERVAL", set: duration(func(c *Config) *time.Duration { return &c.Kafka.PartitionWatchInterval })},
	{path: "kafka.dlq_write_timeout", env: "PAYCB_KAFKA_DLQ_WRITE_TIMEOUT", set: duration(func(c *Config) *time.Duration { return &c.Kafka.DLQWriteTimeout })},
	{path: "kafka.tls.enabled", env: "PAYCB_KAFKA_TLS_ENABLED", set: boolean(func(c *Config) *bool { return &c.Kafka.TLS.Enabled })},
	{path: "kafka.tls.ca_file", env: "PAYCB_KAFKA_TLS_CA_FILE", set: str(func(c *Config) *string { return &c.Kafka.TLS.CAFile })},
	{path: "kafka.tls.cert_file", env: "PAYCB_KAFKA_TLS_CERT_FILE", set: str(func(c *Config) *string { return &c.Kafka.TLS.CertFile })},
	{path: "kafka.tls.key_file", env: "PAYCB_KAFKA_TLS_KEY_FILE", set: str(func(c *Config) *string { return &c.Kafka.TLS.KeyFile })},
	{path: "kafka.tls.server_name", env: "PAYCB_KAFKA_TLS_SERVER_NAME", set: str(func(c *Config) *string { return &c.Kafka.TLS.ServerName })},
	{path: "kafka.sasl.mechanism", env: "PAYCB_KAFKA_SASL_MECHANISM", set: str(func(c *Config) *string { return &c.Kafka.SASL.Mechanism })},
	{path: "kafka.sasl.username", env: "PAYCB_KAFKA_SASL_USERNAME", set: str(func(c *Config) *string { return &c.Kafka.SASL.Username })},
	{
		path: "kafka.sasl.password", env: "PAYCB_KAFKA_SASL_PASSWORD", secret: true, file: true,
		set: func(c *Config, v string) error { c.Kafka.SASL.Password = Secret(v); return nil },
	},

	{
		path: "db.dsn", env: "PAYCB_DB_DSN", flag: "db-dsn", secret: true, file: true,
		usage: "go-sql-driver/mysql DSN (visible in process listings; prefer PAYCB_DB_DSN)",
		set:   func(c *Config, v string) error { c.DB.DSN = DSN(v); return nil },
		get:   func(Config) string { return "" },
	},
	{path: "db.max_open_conns", env: "PAYCB_DB_MAX_OPEN_CONNS", set: integer(func(c *Config) *int { return &c.DB.MaxOpenConns })},
	{path: "db.max_idle_conns", env: "PAYCB_DB_MAX_IDLE_CONNS", set: integer(func(c *Config) *int { return &c.DB.MaxIdleConns })},
	{path: "db.conn_max_lifetime", env: "PAYCB_DB_CONN_MAX_LIFETIME", set: duration(func(c *Config) *time.Duration { return &c.DB.ConnMaxLifetime })},
	{path: "db.tls.enabled", env: "PAYCB_DB_TLS_ENABLED", set: boolean(func(c *Config) *bool { return &c.DB.TLS.Enabled })},
	{path: "db.tls.ca_file", env: "PAYCB_DB_TLS_CA_FILE", set: str(func(c *Config) *string { return &c.DB.TLS.CAFile })},
	{path: "db.tls.cert_file", env: "PAYCB_DB_TLS_CERT_FILE", set: str(func(c *Config) *string { return &c.DB.TLS.CertFile })},
	{path: "db.tls.key_file", env: "PAYCB_DB_TLS_KEY_FILE", set: str(func(c *Config) *string { return &c.DB.TLS.KeyFile })},
	{path: "db.tls.server_name", env: "PAYCB_DB_TLS_SERVER_NAME", set: str(func(c *Config) *string { return &c.DB.TLS.ServerName })},

	{path: "admin.pprof", env: "PAYCB_ADMIN_PPROF", set: boolean(func(c *Config) *bool { return &c.Admin.Pprof })},
	{
		path: "admin.addr", env: "PAYCB_ADMIN_ADDR", flag: "admin-addr", usage: "HTTP address for /metrics, /healthz, /readyz",
		set: str(func(c *Config) *string { return &c.Admin.Addr }), get: func(c Config) string { return c.Admin.Addr },
	},

	{
		path: "wechat.apiv3_key", env: "PAYCB_WECHAT_APIV3_KEY", secret: true, file: true,
		set: func(c *Config, v string) error { c.WeChat.APIv3Key = Secret(v); return nil },
	},
	{path: "wechat.tenant_keys_file", env: "PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE", set: str(func(c *Config) *string { return &c.WeChat.TenantKeysFile })},

	{
		path: "log.level", env: "PAYCB_LOG_LEVEL", flag: "log-level", usage: "debug, info, warn or error",
		set: str(func(c *Config) *string { return &c.Log.Level }), get: func(c Config) string { return c.Log.Level },
	},
	{
		path: "log.format", env: "PAYCB_LOG_FORMAT", flag: "log-format", usage: "text or json",
		set: str(func(c *Config) *string { return &c.Log.Format }), get: func(c Config) string { return c.Log.Format },
	},

	{
		path: "worker.batch_max", env: "PAYCB_BATCH_MAX", flag: "batch-max", usage: "most events handled as one batch per partition; 1 is the per-message pipeline (batches of one)",
		set: integer(func(c *Config) *int { return &c.Worker.BatchMax }), get: func(c Config) string { return strconv.Itoa(c.Worker.BatchMax) },
	},
	{
		path: "worker.orphan_after", env: "PAYCB_ORPHAN_AFTER", flag: "orphan-after", usage: "how long a claim may stay ACQUIRED before the sweeper settles it",
		set: duration(func(c *Config) *time.Duration { return &c.Worker.OrphanAfter }), get: func(c Config) string { return c.Worker.OrphanAfter.String() },
	},
	{path: "worker.sweep_interval", env: "PAYCB_SWEEP_INTERVAL", set: duration(func(c *Config) *time.Duration { return &c.Worker.SweepInterval })},
	{path: "worker.stall_threshold", env: "PAYCB_STALL_THRESHOLD", set: duration(func(c *Config) *time.Duration { return &c.Worker.StallThreshold })},
	{path: "worker.retry_backoff_min", env: "PAYCB_RETRY_BACKOFF_MIN", set: duration(func(c *Config) *time.Duration { return &c.Worker.RetryBackoffMin })},
	{path: "worker.retry_backoff_max", env: "PAYCB_RETRY_BACKOFF_MAX", set: duration(func(c *Config) *time.Duration { return &c.Worker.RetryBackoffMax })},
	{
		path: "worker.shutdown_timeout", env: "PAYCB_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", usage: "cap on the whole graceful shutdown",
		set: duration(func(c *Config) *time.Duration { return &c.Worker.ShutdownTimeout }), get: func(c Config) string { return c.Worker.ShutdownTimeout.String() },
	},
	{path: "worker.startup_timeout", env: "PAYCB_STARTUP_TIMEOUT", set: duration(func(c *Config) *time.Duration { return &c.Worker.StartupTimeout })},
	{
		path: "worker.channels", env: "PAYCB_CHANNELS",
		set: func(c *Config, v string) error { c.Worker.Channels = splitList(strings.ToUpper(v)); return nil },
	},
}

var fieldByPath = func() map[string]field {
	m := make(map[string]field, len(fields))
	for _, f := range fields {
		m[f.path] = f
	}
	return m
}()

// splitList splits a comma-separated list, trimming spaces and dropping
// empty items.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// EnvVars returns the names of every environment variable ApplyEnv reads,
// in a stable order, for help text and documentation checks.
func EnvVars() []string {
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		if f.env != "" {
			out = append(out, f.env)
		}
	}
	return out
}

// ApplyEnv overrides c with the environment variables lookup reports. A
// variable that is unset or set to the empty string leaves the field as it
// is (so `PAYCB_KAFKA_DLQ_TOPIC=` keeps the derived default). It reports
// every unparsable variable at once, naming it; secret values are never
// quoted.
func (c *Config) ApplyEnv(lookup LookupEnv) error {
	if lookup == nil {
		return nil
	}
	var errs []error
	for _, f := range fields {
		if f.env == "" {
			continue
		}
		v, ok := lookup(f.env)
		if f.file {
			var err error
			if v, ok, err = fromFile(lookup, f.env, v, ok && v != ""); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if !ok || v == "" {
			continue
		}
		if err := f.set(c, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.env, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("apply environment: %w", errors.Join(errs...))
	}
	return nil
}

// fromFile applies the NAME_FILE convention for the secret variable name:
// when NAME_FILE is set, the value is the named file's content less one
// trailing newline. Setting both NAME and NAME_FILE is an error. set reports
// whether NAME itself is set.
func fromFile(lookup LookupEnv, name, value string, set bool) (string, bool, error) {
	path, ok := lookup(name + "_FILE")
	if !ok || path == "" {
		return value, set, nil
	}
	if set {
		return "", false, fmt.Errorf("%s and %s_FILE are both set: keep one", name, name)
	}
	data, err := os.ReadFile(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return "", false, fmt.Errorf("%s_FILE: %w", name, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		return "", false, fmt.Errorf("%s_FILE: %s is empty", name, path)
	}
	return v, true, nil
}

// LoadYAML overrides c with the fields present in data, a YAML document in
// the shape of config/consumer.example.yaml. Fields absent from data keep
// their values; unknown fields are an error, so a typo never silently falls
// back to a default. An empty document changes nothing.
func (c *Config) LoadYAML(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode yaml: %w", redactYAMLError(err))
	}
	return nil
}

// yamlQuoted matches the values yaml quotes in backticks in its type errors
// ("cannot unmarshal !!str `...` into int").
var yamlQuoted = regexp.MustCompile("`[^`]*`")

// redactYAMLError hides the values yaml quotes in its messages: the value
// may be a secret written in the wrong place (a key where a map belongs). The
// line number and the target type still locate the mistake.
func redactYAMLError(err error) error {
	msg := err.Error()
	redacted := yamlQuoted.ReplaceAllString(msg, "(value hidden)")
	if redacted == msg {
		return err
	}
	return errors.New(redacted)
}

// LoadFile overrides c with the YAML file at path (see LoadYAML). The error
// names the file.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	if err := c.LoadYAML(data); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// Flags are the command-line flags registered by RegisterFlags. Only flags
// given on the command line override the configuration: their defaults are
// for -help only.
type Flags struct {
	fs         *flag.FlagSet
	configFile string
	values     map[string]*flagValue
}

// flagValue is a flag.Value that checks its syntax when set and keeps the raw
// text for Apply. String masks secrets, since flag prints it.
type flagValue struct {
	f   field
	raw string
	def string
}

func (v *flagValue) String() string {
	if v == nil {
		return ""
	}
	if v.f.secret && v.raw != "" {
		return masked
	}
	if v.raw == "" {
		return v.def
	}
	return v.raw
}

func (v *flagValue) Set(s string) error {
	scratch := Default()
	if err := v.f.set(&scratch, s); err != nil {
		return err
	}
	v.raw = s
	return nil
}

// RegisterFlags registers --config and the configuration flags on fs:
// --kafka-brokers, --kafka-topic, --kafka-group, --kafka-dlq-topic,
// --db-dsn, --admin-addr, --log-level, --log-format, --batch-max,
// --orphan-after and --shutdown-timeout. Their parse errors surface from
// fs.Parse. Call it once per FlagSet; registering twice panics, as flag does.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	fl := &Flags{fs: fs, values: make(map[string]*flagValue)}
	fs.StringVar(&fl.configFile, "config", DefaultFile, "YAML configuration file (read only when present unless given explicitly)")
	def := Default()
	for _, f := range fields {
		if f.flag == "" {
			continue
		}
		v := &flagValue{f: f}
		if f.get != nil {
			v.def = f.get(def)
		}
		fl.values[f.flag] = v
		fs.Var(v, f.flag, f.usage+" (env "+f.env+")")
	}
	return fl
}

// ConfigFile returns the configuration file to read and whether it was
// given explicitly with --config. Without --config it is DefaultFile.
func (f *Flags) ConfigFile() (path string, explicit bool) {
	if f == nil {
		return DefaultFile, false
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "config" {
			explicit = true
		}
	})
	return f.configFile, explicit
}

// Apply overrides c with the flags that were set on the command line (found
// with flag.FlagSet.Visit); call it after fs.Parse. A nil *Flags changes
// nothing.
func (f *Flags) Apply(c *Config) error {
	if f == nil {
		return nil
	}
	var errs []error
	f.fs.Visit(func(fl *flag.Flag) {
		v, ok := f.values[fl.Name]
		if !ok {
			return
		}
		if err := v.f.set(c, v.raw); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", fl.Name, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("apply flags: %w", errors.Join(errs...))
	}
	return nil
}

// Load builds the configuration in the contract's precedence: Default, then
// the YAML file (--config, else DefaultFile when it exists), then the
// environment through lookup, then the flags that were set, then Finalize.
// flags may be nil (no flags: DefaultFile when present) and lookup may be nil
// (no environment). Load does not validate: call ValidateFor with the
// command. A missing explicit --config file is an error; a missing
// DefaultFile is not.
func Load(flags *Flags, lookup LookupEnv) (Config, error) {
	c := Default()
	path, explicit := flags.ConfigFile()
	if err := c.LoadFile(path); err != nil {
		if explicit || !errors.Is(err, fs.ErrNotExist) {
			return Config{}, fmt.Errorf("load config: %w", err)
		}
	}
	if err := c.ApplyEnv(lookup); err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	if err := flags.Apply(&c); err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	c.Finalize()
	return c, nil
}
