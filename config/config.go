package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/paycallback/paycallback/pkg/channels"

	// Every channel the worker may accept is registered: PAYCB_CHANNELS
	// defaults to them all.
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
)

// DefaultFile is the configuration file read when --config is not given and
// the file exists. A missing default file is not an error.
const DefaultFile = "config/consumer.yaml"

// MaxKeysPerTenant is the most APIv3 keys one tenant may have at once: the
// current key and those still in flight during a rotation.
const MaxKeysPerTenant = 4

// Config is the worker's whole configuration. The zero value is not useful:
// start from Default and apply sources with Load (or LoadFile, ApplyEnv and
// Flags.Apply). YAML keys are given in the field tags; the environment
// variables and flags are listed on each field.
type Config struct {
	Kafka  Kafka  `yaml:"kafka"`
	DB     DB     `yaml:"db"`
	Admin  Admin  `yaml:"admin"`
	WeChat WeChat `yaml:"wechat"`
	Log    Log    `yaml:"log"`
	Worker Worker `yaml:"worker"`

	// Statement names the key file that signs statement events.
	Statement Statement `yaml:"statement"`

	// Settled configures the settled events published for the systems
	// downstream (docs/contract.md, "Output: settled events").
	Settled Settled `yaml:"settled"`

	// Query configures the active query's side of the channels' APIs
	// (consumer query; docs/queries.md).
	Query Query `yaml:"query"`
}

// Query configures what the querier (consumer query) needs to ask the
// channels: their API base URLs, the CA bundle trusted for them and the
// path of the credentials file. Only the path is held here: the file holds
// keys that can move money out, and only consumer query reads it; the
// worker (consumer run) never does, and nothing here reads it at load.
type Query struct {
	// CredentialsFile is the path of the querier's API credentials per
	// merchant (YAML list; internal/querycreds). Env
	// PAYCB_QUERY_CREDENTIALS_FILE. No default: consumer query refuses.
	CredentialsFile string `yaml:"credentials_file"`
	// WeChatURL is WeChat Pay's API base URL, https://host[:port] and
	// nothing else (the request signature covers the path). Env
	// PAYCB_QUERY_WECHAT_URL. Default https://api.mch.weixin.qq.com.
	WeChatURL string `yaml:"wechat_url"`
	// AlipayURL is Alipay's gateway URL. Env PAYCB_QUERY_ALIPAY_URL.
	// Default https://openapi.alipay.com/gateway.do.
	AlipayURL string `yaml:"alipay_url"`
	// SQBURL is Shouqianba's API base URL (the query path is added). Env
	// PAYCB_QUERY_SQB_URL. Default https://api.shouqianba.com (the host
	// Shouqianba's documentation names; UNCONFIRMED as current).
	SQBURL string `yaml:"sqb_url"`
	// TLSCAFile is a CA bundle (PEM) trusted for the channels' APIs
	// besides the system roots. Env PAYCB_QUERY_TLS_CA_FILE. No default.
	TLSCAFile string `yaml:"tls_ca_file"`
	// FirstWait is how long a registration waits for its callback before
	// the querier first asks (queryplan.Policy.FirstWait). Env
	// PAYCB_QUERY_FIRST_WAIT. Default 60s.
	FirstWait time.Duration `yaml:"first_wait"`
	// Rate is the queries a second each merchant may be sent, by all the
	// queriers of a deployment together (queryplan.Budget.PerSecond). Env
	// PAYCB_QUERY_RATE. Default 5. Every querier sharing a database must
	// have the same Rate and Burst: they draw from one bucket row.
	Rate int `yaml:"rate"`
	// Burst is the most queries a merchant is sent at once after a quiet
	// period (queryplan.Budget.Burst). Env PAYCB_QUERY_BURST. Default 10.
	Burst int `yaml:"burst"`
}

// BaseURLs are the channels' API base URLs by channel code.
func (q Query) BaseURLs() map[channels.Channel]string {
	return map[channels.Channel]string{channels.WeChat: q.WeChatURL, channels.Alipay: q.AlipayURL, channels.SQB: q.SQBURL}
}

// checkQueryURL says what is wrong with a channel's API base URL, ""
// when nothing is: every one must be https (Shouqianba's answers are
// authenticated by TLS alone, and no channel's request should cross a
// network in the clear), name a host, and carry no user info or fragment;
// WeChat's is scheme and host only (its signature covers the path), and
// Shouqianba's has no query (the query path is appended).
func checkQueryURL(ch channels.Channel, raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "does not parse as a URL"
	case u.Scheme != "https" || u.Host == "":
		return "must be an https URL of a host"
	case u.User != nil || u.Fragment != "":
		return "must carry no user info or fragment"
	case ch == channels.WeChat && ((u.Path != "" && u.Path != "/") || u.RawQuery != ""):
		return "must be https://host[:port] and nothing else: the request signature covers the path"
	case ch == channels.SQB && u.RawQuery != "":
		return "must carry no query: the query path is appended"
	}
	return ""
}

// SettledOff is the Settled.Topic that turns settled events off: the
// settlement writes no outbox rows and nothing is published.
const SettledOff = "none"

// Settled configures the settled-event topic and the outbox behind it.
type Settled struct {
	// Topic is the settled-event topic, which the worker never creates:
	// `run` refuses to start when it does not exist. SettledOff ("none")
	// turns settled events off. Env PAYCB_SETTLED_TOPIC. Default:
	// Kafka.Topic + ".settled", derived after every source has been
	// applied.
	Topic string `yaml:"topic"`
	// Retention is how long a published settled event stays in the outbox,
	// re-publishable (`consumer settled republish`), before `consumer
	// purge` deletes it. Env PAYCB_SETTLED_RETENTION. Default 168h.
	Retention time.Duration `yaml:"retention"`
}

// Enabled reports whether settled events are on (Topic is not SettledOff).
func (s Settled) Enabled() bool { return s.Topic != SettledOff }

// Kafka configures the consumer group, its readers and the dead-letter
// writer.
type Kafka struct {
	// Brokers are the bootstrap brokers. Env PAYCB_KAFKA_BROKERS
	// (comma-separated), flag --kafka-brokers. Default ["127.0.0.1:9092"].
	Brokers []string `yaml:"brokers"`
	// Topic is the input topic. Env PAYCB_KAFKA_TOPIC, flag --kafka-topic.
	// Default "channel-events".
	Topic string `yaml:"topic"`
	// Group is the consumer group. Env PAYCB_KAFKA_GROUP, flag --kafka-group.
	// Default "settlement-consumer".
	Group string `yaml:"group"`
	// DLQTopic is the dead-letter topic. Env PAYCB_KAFKA_DLQ_TOPIC, flag
	// --kafka-dlq-topic. Default: Topic + ".dlq", derived after every source
	// has been applied.
	DLQTopic string `yaml:"dlq_topic"`
	// MinBytes is the least a fetch waits for. Env PAYCB_KAFKA_MIN_BYTES.
	// Default 1, so a single callback is processed at once.
	MinBytes int `yaml:"min_bytes"`
	// MaxBytes is the most one fetch returns per partition. Env
	// PAYCB_KAFKA_MAX_BYTES. Default 10 MiB.
	MaxBytes int `yaml:"max_bytes"`
	// MaxWait is how long a fetch waits for MinBytes. Env
	// PAYCB_KAFKA_MAX_WAIT. Default 500ms.
	MaxWait time.Duration `yaml:"max_wait"`
	// StartOffset is where a partition with no committed offset starts:
	// "first" (default; never skip a callback) or "last". Env
	// PAYCB_KAFKA_START_OFFSET.
	StartOffset string `yaml:"start_offset"`
	// SessionTimeout is the group session timeout. Env
	// PAYCB_KAFKA_SESSION_TIMEOUT. Default 30s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// HeartbeatInterval is the group heartbeat interval; it must be less
	// than SessionTimeout. Env PAYCB_KAFKA_HEARTBEAT_INTERVAL. Default 3s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// RebalanceTimeout is how long members have to rejoin during a
	// rebalance. Env PAYCB_KAFKA_REBALANCE_TIMEOUT. Default 30s.
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	// CommitInterval is the longest a handled message's offset waits to be
	// committed: the partitions offer their offsets and go on, and one
	// request commits every partition's in the background each interval;
	// a revoke (the generation's end) and a shutdown commit what is
	// offered at once. Env PAYCB_KAFKA_COMMIT_INTERVAL. Default 100ms.
	CommitInterval time.Duration `yaml:"commit_interval"`
	// PartitionWatchInterval is how often the group leader looks for new
	// partitions. Env PAYCB_KAFKA_PARTITION_WATCH_INTERVAL. Default 5s.
	PartitionWatchInterval time.Duration `yaml:"partition_watch_interval"`
	// DLQWriteTimeout bounds one dead-letter write, acknowledged by all
	// in-sync replicas. Env PAYCB_KAFKA_DLQ_WRITE_TIMEOUT. Default 10s.
	DLQWriteTimeout time.Duration `yaml:"dlq_write_timeout"`
	// TLS secures every connection to the brokers: the consumer group, the
	// dead-letter writer and every operator command. Env
	// PAYCB_KAFKA_TLS_ENABLED, PAYCB_KAFKA_TLS_CA_FILE,
	// PAYCB_KAFKA_TLS_CERT_FILE, PAYCB_KAFKA_TLS_KEY_FILE,
	// PAYCB_KAFKA_TLS_SERVER_NAME. Off by default.
	TLS TLS `yaml:"tls"`
	// SASL authenticates every connection to the brokers. Env
	// PAYCB_KAFKA_SASL_MECHANISM, PAYCB_KAFKA_SASL_USERNAME,
	// PAYCB_KAFKA_SASL_PASSWORD (or PAYCB_KAFKA_SASL_PASSWORD_FILE). Off by
	// default.
	SASL SASL `yaml:"sasl"`
}

// TLS is a client's TLS setting: TLS 1.2 at least, the server verified
// against CAFile (PEM) or the system roots when CAFile is empty, an
// optional client certificate, and the name to verify (from the address
// when empty). Every field but Enabled must be empty while Enabled is false.
type TLS struct {
	// Enabled turns TLS on. Default false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs trusted to sign the server's
	// certificate; empty means the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate and its key (PEM),
	// both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry; empty
	// means the host of the address dialled.
	ServerName string `yaml:"server_name"`
}

// Set reports whether any field other than Enabled is set.
func (t TLS) Set() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// SASL mechanisms accepted in Kafka.SASL.Mechanism.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASL is the Kafka SASL setting. An empty Mechanism turns SASL off, and
// then Username and Password must be empty too.
type SASL struct {
	// Mechanism is SASLPlain, SASLScramSHA256, SASLScramSHA512 or "".
	Mechanism string `yaml:"mechanism"`
	// Username and Password are the credentials, both required with a
	// mechanism.
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
}

// DB configures the MySQL/MariaDB connection pool.
type DB struct {
	// DSN is the go-sql-driver/mysql DSN. Env PAYCB_DB_DSN, flag --db-dsn
	// (visible in process listings; prefer the environment). No default:
	// required by the commands for which NeedsDB is true.
	DSN DSN `yaml:"dsn"`
	// TLS secures the connection to MySQL; required by the client when
	// enabled. Env PAYCB_DB_TLS_ENABLED, PAYCB_DB_TLS_CA_FILE,
	// PAYCB_DB_TLS_CERT_FILE, PAYCB_DB_TLS_KEY_FILE,
	// PAYCB_DB_TLS_SERVER_NAME. A DSN tls= parameter beside it is an error.
	TLS TLS `yaml:"tls"`
	// MaxOpenConns caps open connections. Env PAYCB_DB_MAX_OPEN_CONNS.
	// Default 32.
	MaxOpenConns int `yaml:"max_open_conns"`
	// MaxIdleConns caps idle connections; at most MaxOpenConns. Env
	// PAYCB_DB_MAX_IDLE_CONNS. Default 32.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// ConnMaxLifetime recycles connections older than this. Env
	// PAYCB_DB_CONN_MAX_LIFETIME. Default 5m.
	ConnMaxLifetime time.Duration `yaml:"conn_max_lifetime"`
	// StatementTimeout bounds each database step of a batch (the claims'
	// insert, a settlement transaction with its COMMIT): past it the step
	// fails and is retried. Each session's innodb_lock_wait_timeout is half
	// of it (whole seconds, at least 1), so a lock wait ends with the
	// server's error before the deadline. Env PAYCB_DB_STATEMENT_TIMEOUT.
	// Default 10s.
	StatementTimeout time.Duration `yaml:"statement_timeout"`
}

// Admin configures the HTTP server for /metrics, /healthz and /readyz.
type Admin struct {
	// Addr is the listen address. Env PAYCB_ADMIN_ADDR, flag --admin-addr.
	// Default ":9464".
	Addr string `yaml:"addr"`
	// Pprof serves net/http/pprof under /debug/pprof/ (without the cmdline
	// handler, which would print a DSN given as a flag). Env
	// PAYCB_ADMIN_PPROF. Default false.
	Pprof bool `yaml:"pprof"`
}

// WeChat holds the APIv3 keys that decrypt WeChat Pay notifications.
type WeChat struct {
	// APIv3Key is used for every tenant without a key of its own. Env
	// PAYCB_WECHAT_APIV3_KEY (or PAYCB_WECHAT_APIV3_KEY_FILE). No default.
	// Exactly 32 bytes when set.
	APIv3Key Secret `yaml:"apiv3_key"`
	// APIv3Keys are per-tenant keys, by tenant ID, current key first: in the
	// YAML a key or a list of keys, and from TenantKeysFile. Each exactly 32
	// bytes. A tenant's keys come from one source only.
	APIv3Keys map[int64]Keys `yaml:"apiv3_keys"`
	// TenantKeysFile is a file of per-tenant keys, lines TENANT_ID=KEY,
	// several lines per tenant allowed, current key first; blank lines and
	// lines starting with # are skipped. Load reads it into APIv3Keys. Env
	// PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE.
	TenantKeysFile string `yaml:"tenant_keys_file"`
}

// KeysFor returns the APIv3 keys to try for tenant, current first: its own
// keys, else the default key alone. It is empty when neither is set.
func (w WeChat) KeysFor(tenant int64) Keys {
	if k := w.APIv3Keys[tenant]; len(k) > 0 {
		return k
	}
	if w.APIv3Key.IsSet() {
		return Keys{w.APIv3Key}
	}
	return nil
}

// HasAnyKey reports whether any APIv3 key is configured.
func (w WeChat) HasAnyKey() bool {
	if w.APIv3Key.IsSet() {
		return true
	}
	for _, k := range w.APIv3Keys {
		if len(k) > 0 {
			return true
		}
	}
	return false
}

// Statement configures the signing of the statement events that `consumer
// statement reconcile --publish-missing` publishes and the worker verifies.
type Statement struct {
	// KeyFile is the path of the statement key file: lines KEY_ID=SECRET,
	// the current key first (it signs), older keys after it (they still
	// verify), each secret at least 32 bytes; blank lines and # comments
	// skipped (statementauth.Parse). The workers re-read it when it
	// changes. Env PAYCB_STATEMENT_KEY_FILE. No default: --publish-missing
	// refuses, and the worker dead-letters every statement event
	// unauthenticated. Only the path is held here and printed; the secrets
	// are read where they are used.
	KeyFile string `yaml:"key_file"`
}

// Log configures the process logger.
type Log struct {
	// Level is "debug", "info", "warn" or "error". Env PAYCB_LOG_LEVEL, flag
	// --log-level. Default "info".
	Level string `yaml:"level"`
	// Format is "text" or "json". Env PAYCB_LOG_FORMAT, flag --log-format.
	// Default "text".
	Format string `yaml:"format"`
}

// SlogLevel returns Level as a slog.Level, or slog.LevelInfo when Level is
// not one of the four names (Validate reports that case).
func (l Log) SlogLevel() slog.Level {
	switch strings.ToLower(l.Level) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// Worker configures the pipeline, retries, the sweeper, readiness and
// shutdown.
type Worker struct {
	// BatchMax is the most events handled as one batch per partition; 1 is
	// the per-message pipeline (batches of one: the same path, the same
	// decisions). Env PAYCB_BATCH_MAX, flag --batch-max.
	// Default 256; 1..MaxBatch.
	BatchMax int `yaml:"batch_max"`
	// MergeMax is the most events one merged transaction holds: the small
	// batches (fewer than 8 distinct keys) that several partitions have
	// ready at once share one claims insert and one business transaction,
	// each claim still committed before it. 1 merges nothing; a BatchMax
	// of 1 (the per-message pipeline) never merges. Env PAYCB_MERGE_MAX.
	// Default 64; 1..MaxBatch.
	MergeMax int `yaml:"merge_max"`
	// MergeWait is the least time from one merged transaction's start to
	// the next's: at steady load each gathers the small batches that come
	// meanwhile (fewer, larger transactions, up to this much more
	// latency), and a worker idle this long starts one at once; 0 starts
	// each as soon as the one before ends. Env PAYCB_MERGE_WAIT. Default
	// 3ms; 0s..100ms.
	MergeWait time.Duration `yaml:"merge_wait"`
	// OrphanAfter is how long a claim may stay ACQUIRED before the sweeper
	// settles it again. Env PAYCB_ORPHAN_AFTER, flag --orphan-after. Default
	// 2m.
	OrphanAfter time.Duration `yaml:"orphan_after"`
	// SweepInterval is how often the orphan sweeper runs. Env
	// PAYCB_SWEEP_INTERVAL. Default 30s.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// StallThreshold is how long a partition may retry one message before
	// /readyz reports it stalled. Env PAYCB_STALL_THRESHOLD. Default 1m.
	StallThreshold time.Duration `yaml:"stall_threshold"`
	// LagInterval is how often each instance asks the broker for its
	// partitions' end and committed offsets (paycb_consumer_lag). Env
	// PAYCB_LAG_INTERVAL. Default 10s.
	LagInterval time.Duration `yaml:"lag_interval"`
	// RetryBackoffMin is the first retry delay of a failing message. Env
	// PAYCB_RETRY_BACKOFF_MIN. Default 10ms: most failures under load are
	// deadlocks and lock waits that clear at once; real outages double the
	// delay up to RetryBackoffMax within a dozen attempts.
	RetryBackoffMin time.Duration `yaml:"retry_backoff_min"`
	// RetryBackoffMax caps the retry delay. Env PAYCB_RETRY_BACKOFF_MAX.
	// Default 30s.
	RetryBackoffMax time.Duration `yaml:"retry_backoff_max"`
	// ShutdownTimeout caps finishing the in-flight messages at shutdown;
	// leaving the group and closing the connections follow it and take a
	// few seconds more. A failing message is not retried once stopping
	// (it is left uncommitted for redelivery), so the cap matters only for
	// attempts still under way. Env PAYCB_SHUTDOWN_TIMEOUT, flag
	// --shutdown-timeout. Default 20s: with what follows, inside
	// Kubernetes' default terminationGracePeriodSeconds of 30.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// StartupTimeout is how long run keeps trying to reach the database and
	// the broker at start before it exits 1. Env PAYCB_STARTUP_TIMEOUT.
	// Default 1m.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// Channels are the channels accepted; a message of another channel is
	// dead-lettered unknown_channel. Every instance of a group must share
	// the setting. Env PAYCB_CHANNELS (comma-separated). Default every
	// registered channel (channels.All): WECHAT, ALIPAY, SQB.
	Channels []string `yaml:"channels"`
	// RefundsPreregistered says whether every refund is expected to have
	// been registered (consumer refund register) before the channel reports
	// it. When true, a refund settled without a registration is logged at
	// WARN and is a reconciliation discrepancy (refund_unregistered); when
	// false it is neither (paycb_refund_unregistered_total still counts
	// it). Env PAYCB_REFUNDS_PREREGISTERED. Default false.
	RefundsPreregistered bool `yaml:"refunds_preregistered"`
	// TenantMerchantsFile is the merchant binding (merchantbinding.Binding):
	// lines TENANT_ID CHANNEL MERCHANT_ID. When set, a callback whose
	// merchant is not bound to its envelope's tenant is dead-lettered
	// tenant_mismatch, and statement import refuses a file of a merchant not
	// bound to --tenant; the worker re-reads it when it changes. When empty,
	// callbacks are not checked against merchants, and statement import and
	// reconcile --publish-missing refuse to run. Validate checks it
	// (FileChecks.MerchantBinding). Env
	// PAYCB_TENANT_MERCHANTS_FILE. No default.
	TenantMerchantsFile string `yaml:"tenant_merchants_file"`
	// ChannelPublicKeysFile is the channels' public keys the worker
	// verifies query answers with (internal/channelkeys): a YAML list of
	// {channel: WECHAT, merchant_id, key_id, public_key_file} and
	// {channel: ALIPAY, app_id, public_key_file}, relative key files
	// relative to the YAML; the worker re-reads it, and the key files,
	// when they change. Validate checks it
	// (FileChecks.ChannelPublicKeys). Env PAYCB_CHANNEL_PUBLIC_KEYS_FILE.
	// No default: every WeChat and Alipay query answer is dead-lettered
	// unauthenticated.
	ChannelPublicKeysFile string `yaml:"channel_public_keys_file"`
}

// MaxBatch is the largest accepted Worker.BatchMax.
const MaxBatch = 65536

// Finalize derives the defaults that depend on other fields: Kafka.DLQTopic
// becomes Kafka.Topic + ".dlq" and Settled.Topic Kafka.Topic + ".settled"
// when empty. Load calls it after every source
// has been applied; call it yourself when assembling a Config by hand.
func (c *Config) Finalize() {
	if c.Kafka.DLQTopic == "" && c.Kafka.Topic != "" {
		c.Kafka.DLQTopic = c.Kafka.Topic + ".dlq"
	}
	if c.Settled.Topic == "" && c.Kafka.Topic != "" {
		c.Settled.Topic = c.Kafka.Topic + ".settled"
	}
}

// ErrInvalid is wrapped by every error Validate and ValidateFor return; test
// for it with errors.Is.
var ErrInvalid = errors.New("invalid configuration")

// ErrDSNRequired is wrapped by ValidateFor's error when the command needs a
// database and no DSN is set.
var ErrDSNRequired = errors.New("PAYCB_DB_DSN is required")

// FileChecks read the files a Config names by path, which this package
// does not parse, and say what is wrong with one (nil when nothing is).
// The packages that own the formats provide them (internal/app.FileChecks:
// internal/statementauth and internal/merchantbinding); a nil check reads
// nothing.
type FileChecks struct {
	// StatementKeys checks Statement.KeyFile.
	StatementKeys func(path string) error
	// MerchantBinding checks Worker.TenantMerchantsFile.
	MerchantBinding func(path string) error
	// ChannelPublicKeys checks Worker.ChannelPublicKeysFile.
	ChannelPublicKeys func(path string) error
}

// Validate checks every field that does not depend on the command, and
// through files the contents of the files it names. It reports all
// problems at once, each naming the YAML field and its environment
// variable; the error wraps ErrInvalid and never contains a secret's value.
// The DSN is checked for shape when set, but its absence is ValidateFor's
// concern.
func (c Config) Validate(files FileChecks) error {
	var errs []error
	bad := func(path, format string, args ...any) {
		name := path
		if s, ok := settingByPath[path]; ok {
			name = s.name()
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	for i := range settings {
		if msg := settings[i].checkBounds(&c); msg != "" {
			bad(settings[i].path, "%s", msg)
		}
	}

	k := c.Kafka
	if len(k.Brokers) == 0 {
		bad("kafka.brokers", "at least one broker is required")
	}
	for i, b := range k.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil || strings.ContainsAny(b, " \t,") {
			bad("kafka.brokers", "broker %d %q is not a host:port", i, b)
		}
	}
	if k.Topic == "" {
		bad("kafka.topic", "must not be empty")
	}
	if k.Group == "" {
		bad("kafka.group", "must not be empty")
	}
	switch k.DLQTopic {
	case "":
		bad("kafka.dlq_topic", "must not be empty (call Finalize to derive it)")
	case k.Topic:
		bad("kafka.dlq_topic", "must differ from kafka.topic %q", k.Topic)
	}
	switch c.Settled.Topic {
	case "":
		bad("settled.topic", "must not be empty (call Finalize to derive it)")
	case k.Topic, k.DLQTopic:
		bad("settled.topic", "must differ from kafka.topic %q and kafka.dlq_topic %q", k.Topic, k.DLQTopic)
	}
	if k.MaxBytes < k.MinBytes {
		bad("kafka.max_bytes", "must be at least kafka.min_bytes (%d), got %d", k.MinBytes, k.MaxBytes)
	}
	if k.HeartbeatInterval >= k.SessionTimeout {
		bad("kafka.heartbeat_interval", "must be less than kafka.session_timeout (%s), got %s", k.SessionTimeout, k.HeartbeatInterval)
	}
	if k.MaxWait >= k.SessionTimeout {
		bad("kafka.max_wait", "must be less than kafka.session_timeout (%s), got %s", k.SessionTimeout, k.MaxWait)
	}
	c.validateTLS("kafka.tls", k.TLS, bad)
	switch k.SASL.Mechanism {
	case "":
		if k.SASL.Username != "" {
			bad("kafka.sasl.username", "is set but kafka.sasl.mechanism is empty (SASL is off)")
		}
		if k.SASL.Password.IsSet() {
			bad("kafka.sasl.password", "is set but kafka.sasl.mechanism is empty (SASL is off)")
		}
	default:
		if k.SASL.Username == "" {
			bad("kafka.sasl.username", "is required with kafka.sasl.mechanism %s", k.SASL.Mechanism)
		}
		if !k.SASL.Password.IsSet() {
			bad("kafka.sasl.password", "is required with kafka.sasl.mechanism %s", k.SASL.Mechanism)
		}
	}

	if c.DB.DSN.IsSet() {
		if msg := checkDSN(c.DB.DSN.Reveal(), c.DB.TLS.Enabled || c.DB.TLS.Set()); msg != "" {
			bad("db.dsn", "%s", msg)
		}
	}
	c.validateTLS("db.tls", c.DB.TLS, bad)
	if c.DB.MaxIdleConns > c.DB.MaxOpenConns {
		bad("db.max_idle_conns", "must be at most db.max_open_conns (%d), got %d", c.DB.MaxOpenConns, c.DB.MaxIdleConns)
	}

	if c.Admin.Addr == "" {
		bad("admin.addr", "must not be empty")
	} else if _, _, err := net.SplitHostPort(c.Admin.Addr); err != nil {
		bad("admin.addr", "%q is not a host:port (\":9464\" listens on every interface)", c.Admin.Addr)
	}

	if c.WeChat.APIv3Key.IsSet() && len(c.WeChat.APIv3Key.Reveal()) != channels.APIv3KeyLen {
		bad("wechat.apiv3_key", "must be exactly %d bytes, got %d", channels.APIv3KeyLen, len(c.WeChat.APIv3Key.Reveal()))
	}
	for _, tenant := range slices.Sorted(maps.Keys(c.WeChat.APIv3Keys)) {
		keys := c.WeChat.APIv3Keys[tenant]
		path := "wechat.apiv3_keys[" + strconv.FormatInt(tenant, 10) + "]"
		if tenant <= 0 {
			bad(path, "tenant ID must be positive")
			continue
		}
		if len(keys) == 0 {
			bad(path, "has no key")
		}
		if len(keys) > MaxKeysPerTenant {
			bad(path, "has %d keys; at most %d (the current one and those still in flight)", len(keys), MaxKeysPerTenant)
		}
		seen := make(map[string]bool, len(keys))
		for i, key := range keys {
			switch {
			case len(key.Reveal()) != channels.APIv3KeyLen:
				bad(path, "key %d must be exactly %d bytes, got %d", i+1, channels.APIv3KeyLen, len(key.Reveal()))
			case seen[key.Reveal()]:
				bad(path, "key %d repeats an earlier key", i+1)
			}
			seen[key.Reveal()] = true
		}
	}

	if path := c.Statement.KeyFile; path != "" && files.StatementKeys != nil {
		if err := files.StatementKeys(path); err != nil {
			bad("statement.key_file", "%v", err)
		}
	}

	w := c.Worker
	if w.RetryBackoffMax < w.RetryBackoffMin {
		bad("worker.retry_backoff_max", "must be at least worker.retry_backoff_min (%s), got %s", w.RetryBackoffMin, w.RetryBackoffMax)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(w.Channels)))) != len(w.Channels) {
		bad("worker.channels", "names a channel twice: %s", strings.Join(w.Channels, ","))
	}
	if w.TenantMerchantsFile != "" && files.MerchantBinding != nil {
		if err := files.MerchantBinding(w.TenantMerchantsFile); err != nil {
			bad("worker.tenant_merchants_file", "%v", err)
		}
	}
	if w.ChannelPublicKeysFile != "" && files.ChannelPublicKeys != nil {
		if err := files.ChannelPublicKeys(w.ChannelPublicKeysFile); err != nil {
			bad("worker.channel_public_keys_file", "%v", err)
		}
	}

	for path, ch := range map[string]channels.Channel{
		"query.wechat_url": channels.WeChat, "query.alipay_url": channels.Alipay, "query.sqb_url": channels.SQB,
	} {
		if msg := checkQueryURL(ch, c.Query.BaseURLs()[ch]); msg != "" {
			bad(path, "%s", msg)
		}
	}

	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
}

// validateTLS checks one TLS setting: nothing set while it is off, and a
// client certificate and key given together.
func (c Config) validateTLS(path string, t TLS, bad func(path, format string, args ...any)) {
	if !t.Enabled {
		for _, f := range []struct{ name, value string }{
			{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"server_name", t.ServerName},
		} {
			if f.value != "" {
				bad(path+"."+f.name, "is set but %s.enabled is false", path)
			}
		}
		return
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad(path+".cert_file", "and %s.key_file go together: set both or neither", path)
	}
}

// checkDSN parses dsn the way the driver does and says which part is
// wrong, or "" when it is fine. tlsSettings reports whether any
// PAYCB_DB_TLS_* setting is in use, which a tls= parameter must not
// contradict. The message never quotes the DSN: it may hold a password.
func checkDSN(dsn string, tlsSettings bool) string {
	if !strings.Contains(dsn, "/") {
		return `is not a go-sql-driver/mysql DSN: missing "/dbname" (user:password@tcp(host:3306)/dbname)`
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "is not a go-sql-driver/mysql DSN: " + dsnProblem(dsn)
	}
	if cfg.DBName == "" {
		return `names no database: add it after the "/" (user:password@tcp(host:3306)/dbname)`
	}
	if cfg.TLSConfig != "" && tlsSettings {
		return "has a tls= parameter beside db.tls (PAYCB_DB_TLS_*): keep one; db.tls accepts a CA bundle and a client certificate"
	}
	return ""
}

// dsnProblem locates what the driver refused in dsn without quoting it.
func dsnProblem(dsn string) string {
	// Parameters start at the first '?' after the address; a value there
	// may hold a '/' (tls=/etc/ca.pem), which the driver cannot tell from
	// the database's slash.
	base, params, hasParams := dsn, "", false
	from := max(strings.LastIndexByte(dsn, ')'), strings.LastIndexByte(dsn, '@'), 0)
	if q := strings.IndexByte(dsn[from:], '?'); q >= 0 {
		base, params, hasParams = dsn[:from+q], dsn[from+q+1:], true
	}
	addrPart := base
	if slash := strings.LastIndexByte(base, '/'); slash >= 0 {
		addrPart = base[:slash]
	}
	if at := strings.LastIndexByte(addrPart, '@'); at >= 0 {
		addrPart = addrPart[at+1:]
	}
	if addrPart != "" && (!strings.Contains(addrPart, "(") || !strings.HasSuffix(addrPart, ")")) {
		return `the address must be written net(addr), e.g. tcp(db:3306)`
	}
	if hasParams {
		for param := range strings.SplitSeq(params, "&") {
			name, value, _ := strings.Cut(param, "=")
			probe := "u@tcp(h:3306)/d?" + name + "=" + value
			if _, err := mysql.ParseDSN(probe); err != nil {
				if name == "tls" {
					return "parameter tls= must be true, false, skip-verify or preferred; for a CA bundle or a client certificate use db.tls (PAYCB_DB_TLS_*)"
				}
				return "parameter " + name + "= has an invalid value"
			}
		}
	}
	return "invalid format"
}

// NeedsDB reports whether the named command (its path after "consumer":
// "run", "migrate", "demo", "dlq list", ...) talks to the configured
// database and so requires a DSN. It is decided by the first word, but for
// "query once", which asks a channel and may publish, never touching the
// database. "demo" uses an embedded database and "dlq", "replay" and
// "status" only Kafka; "publish" uses the database only when one is
// configured (without one it refuses unless told the tenant may have
// claims); unknown commands are assumed to need it.
func NeedsDB(command string) bool {
	if command == "query once" {
		return false
	}
	first, _, _ := strings.Cut(command, " ")
	switch first {
	case "demo", "dlq", "replay", "status", "publish", "help", "version":
		return false
	default:
		return true
	}
}

// ValidateFor runs Validate with files and then the checks that depend on
// command: when NeedsDB(command), a DSN must be set. The error wraps
// ErrInvalid, and also ErrDSNRequired when the DSN is missing.
func (c Config) ValidateFor(command string, files FileChecks) error {
	err := c.Validate(files)
	if NeedsDB(command) && !c.DB.DSN.IsSet() {
		dsnErr := fmt.Errorf("db.dsn: %w for %q (or set db.dsn in the config file, or --db-dsn)", ErrDSNRequired, command)
		if err == nil {
			return fmt.Errorf("%w: %w", ErrInvalid, dsnErr)
		}
		return errors.Join(err, dsnErr)
	}
	return err
}

// String returns the configuration as space-separated path=value pairs
// ("kafka.topic=channel-events db.dsn=root:***@tcp(db:3306)/paycb ..."),
// secrets masked. It is what LogValue shows, flattened.
func (c Config) String() string {
	var b strings.Builder
	var walk func(prefix string, attrs []slog.Attr)
	walk = func(prefix string, attrs []slog.Attr) {
		for _, a := range attrs {
			if a.Value.Kind() == slog.KindGroup {
				walk(prefix+a.Key+".", a.Value.Group())
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(prefix + a.Key + "=" + a.Value.String())
		}
	}
	walk("", c.LogValue().Group())
	return b.String()
}

// GoString returns String's masked form for %#v.
func (c Config) GoString() string { return "config.Config{" + c.String() + "}" }
