package config

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// setting is one configuration value. The settings table below is the one
// place that says, for every value: its YAML path (which must match the
// struct's yaml tags; TestSettingsCoverConfig checks), its environment
// variable and flag, its default, its bounds, whether it is a secret, and
// where it lives in Config. Default, ApplyEnv, the flags, the bounds checks
// in Validate and LogValue are all driven by it.
type setting struct {
	path   string // YAML path, used in messages
	env    string // environment variable, "" for none
	flag   string // flag name, "" for none
	usage  string // what the setting means, for -help
	secret bool   // never echo the value
	file   bool   // env NAME_FILE may name a file holding the value
	def    string // default, written as the environment would give it; "" for none
	// min and max bound a number or a duration, written as the environment
	// would give it; "" for no bound.
	min, max string
	// oneOf lists the accepted values of a string setting (exact match
	// after the setting's normalisation).
	oneOf []string
	// choices, when set, gives oneOf at the time of asking, and the
	// default is all of them, comma-separated: worker.channels ranges over
	// the channel registry (channels.All).
	choices func() []string
	// field returns a pointer to the value in c: *string, *int, *bool,
	// *time.Duration, *[]string, *Secret, *DSN or *map[int64]Keys (the last
	// is YAML only).
	field func(c *Config) any
}

// values is the setting's accepted values: choices() when set, else oneOf.
func (s setting) values() []string {
	if s.choices != nil {
		return s.choices()
	}
	return s.oneOf
}

// defaultText is the setting's default as the environment would give it:
// every choice, comma-separated, when choices is set, else def.
func (s setting) defaultText() string {
	if s.choices != nil {
		return strings.Join(s.choices(), ",")
	}
	return s.def
}

// Bounds. Every number and duration has a least and a greatest value a
// person could mean; values outside are refused at start.
var settings = []setting{
	{
		path: "kafka.brokers", env: "PAYCB_KAFKA_BROKERS", flag: "kafka-brokers", usage: "comma-separated bootstrap brokers",
		def: "127.0.0.1:9092", field: func(c *Config) any { return &c.Kafka.Brokers },
	},
	{
		path: "kafka.topic", env: "PAYCB_KAFKA_TOPIC", flag: "kafka-topic", usage: "input topic",
		def: "channel-events", field: func(c *Config) any { return &c.Kafka.Topic },
	},
	{
		path: "kafka.group", env: "PAYCB_KAFKA_GROUP", flag: "kafka-group", usage: "consumer group",
		def: "settlement-consumer", field: func(c *Config) any { return &c.Kafka.Group },
	},
	{
		path: "kafka.dlq_topic", env: "PAYCB_KAFKA_DLQ_TOPIC", flag: "kafka-dlq-topic", usage: "dead-letter topic, different from the input topic (default: the input topic + \".dlq\")",
		field: func(c *Config) any { return &c.Kafka.DLQTopic },
	},
	{
		path: "kafka.min_bytes", env: "PAYCB_KAFKA_MIN_BYTES", usage: "least bytes a fetch waits for",
		def: "1", min: "1", max: "1048576", field: func(c *Config) any { return &c.Kafka.MinBytes },
	},
	{
		path: "kafka.max_bytes", env: "PAYCB_KAFKA_MAX_BYTES", usage: "most bytes one fetch returns per partition; at least the input topic's max.message.bytes",
		def: "10485760", min: "16384", max: "268435456", field: func(c *Config) any { return &c.Kafka.MaxBytes },
	},
	{
		path: "kafka.max_wait", env: "PAYCB_KAFKA_MAX_WAIT", usage: "how long a fetch waits for min_bytes",
		def: "500ms", min: "10ms", max: "30s", field: func(c *Config) any { return &c.Kafka.MaxWait },
	},
	{
		path: "kafka.start_offset", env: "PAYCB_KAFKA_START_OFFSET", usage: "where a partition with no committed offset starts",
		def: "first", oneOf: []string{"first", "last"}, field: func(c *Config) any { return &c.Kafka.StartOffset },
	},
	{
		path: "kafka.session_timeout", env: "PAYCB_KAFKA_SESSION_TIMEOUT", usage: "consumer-group session timeout",
		def: "30s", min: "6s", max: "30m", field: func(c *Config) any { return &c.Kafka.SessionTimeout },
	},
	{
		path: "kafka.heartbeat_interval", env: "PAYCB_KAFKA_HEARTBEAT_INTERVAL", usage: "group heartbeat interval, less than the session timeout",
		def: "3s", min: "100ms", max: "1m", field: func(c *Config) any { return &c.Kafka.HeartbeatInterval },
	},
	{
		path: "kafka.rebalance_timeout", env: "PAYCB_KAFKA_REBALANCE_TIMEOUT", usage: "how long members have to rejoin during a rebalance",
		def: "30s", min: "1s", max: "30m", field: func(c *Config) any { return &c.Kafka.RebalanceTimeout },
	},
	{
		path: "kafka.commit_interval", env: "PAYCB_KAFKA_COMMIT_INTERVAL", usage: "longest a handled message's offset waits to be committed: offsets are committed in the background, one request for all partitions per interval, and at once when partitions are revoked or the worker stops",
		def: "100ms", min: "1ms", max: "1m", field: func(c *Config) any { return &c.Kafka.CommitInterval },
	},
	{
		path: "kafka.partition_watch_interval", env: "PAYCB_KAFKA_PARTITION_WATCH_INTERVAL", usage: "how often the group leader looks for new partitions",
		def: "5s", min: "1s", max: "1h", field: func(c *Config) any { return &c.Kafka.PartitionWatchInterval },
	},
	{
		path: "kafka.dlq_write_timeout", env: "PAYCB_KAFKA_DLQ_WRITE_TIMEOUT", usage: "bound on one dead-letter write",
		def: "10s", min: "1s", max: "5m", field: func(c *Config) any { return &c.Kafka.DLQWriteTimeout },
	},
	{path: "kafka.tls.enabled", env: "PAYCB_KAFKA_TLS_ENABLED", usage: "TLS to the brokers", def: "false", field: func(c *Config) any { return &c.Kafka.TLS.Enabled }},
	{path: "kafka.tls.ca_file", env: "PAYCB_KAFKA_TLS_CA_FILE", usage: "CA bundle (PEM) for the brokers' certificates; system roots when empty", field: func(c *Config) any { return &c.Kafka.TLS.CAFile }},
	{path: "kafka.tls.cert_file", env: "PAYCB_KAFKA_TLS_CERT_FILE", usage: "client certificate (PEM)", field: func(c *Config) any { return &c.Kafka.TLS.CertFile }},
	{path: "kafka.tls.key_file", env: "PAYCB_KAFKA_TLS_KEY_FILE", usage: "client certificate's key (PEM)", field: func(c *Config) any { return &c.Kafka.TLS.KeyFile }},
	{path: "kafka.tls.server_name", env: "PAYCB_KAFKA_TLS_SERVER_NAME", usage: "name the brokers' certificates must carry; the host dialled when empty", field: func(c *Config) any { return &c.Kafka.TLS.ServerName }},
	{
		path: "kafka.sasl.mechanism", env: "PAYCB_KAFKA_SASL_MECHANISM", usage: "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty is off",
		oneOf: []string{"", SASLPlain, SASLScramSHA256, SASLScramSHA512}, field: func(c *Config) any { return &c.Kafka.SASL.Mechanism },
	},
	{path: "kafka.sasl.username", env: "PAYCB_KAFKA_SASL_USERNAME", usage: "SASL user", field: func(c *Config) any { return &c.Kafka.SASL.Username }},
	{
		path: "kafka.sasl.password", env: "PAYCB_KAFKA_SASL_PASSWORD", usage: "SASL password", secret: true, file: true,
		field: func(c *Config) any { return &c.Kafka.SASL.Password },
	},

	{
		path: "db.dsn", env: "PAYCB_DB_DSN", flag: "db-dsn", secret: true, file: true,
		usage: "go-sql-driver/mysql DSN (visible in process listings; prefer PAYCB_DB_DSN or PAYCB_DB_DSN_FILE)",
		field: func(c *Config) any { return &c.DB.DSN },
	},
	{path: "db.tls.enabled", env: "PAYCB_DB_TLS_ENABLED", usage: "TLS to MySQL, required when on", def: "false", field: func(c *Config) any { return &c.DB.TLS.Enabled }},
	{path: "db.tls.ca_file", env: "PAYCB_DB_TLS_CA_FILE", usage: "CA bundle (PEM) for the server's certificate; system roots when empty", field: func(c *Config) any { return &c.DB.TLS.CAFile }},
	{path: "db.tls.cert_file", env: "PAYCB_DB_TLS_CERT_FILE", usage: "client certificate (PEM)", field: func(c *Config) any { return &c.DB.TLS.CertFile }},
	{path: "db.tls.key_file", env: "PAYCB_DB_TLS_KEY_FILE", usage: "client certificate's key (PEM)", field: func(c *Config) any { return &c.DB.TLS.KeyFile }},
	{path: "db.tls.server_name", env: "PAYCB_DB_TLS_SERVER_NAME", usage: "name the server's certificate must carry; the DSN's host when empty", field: func(c *Config) any { return &c.DB.TLS.ServerName }},
	{
		path: "db.max_open_conns", env: "PAYCB_DB_MAX_OPEN_CONNS", usage: "cap on open connections",
		def: "32", min: "1", max: "1024", field: func(c *Config) any { return &c.DB.MaxOpenConns },
	},
	{
		path: "db.max_idle_conns", env: "PAYCB_DB_MAX_IDLE_CONNS", usage: "cap on idle connections, at most max_open_conns",
		def: "32", min: "0", max: "1024", field: func(c *Config) any { return &c.DB.MaxIdleConns },
	},
	{
		path: "db.conn_max_lifetime", env: "PAYCB_DB_CONN_MAX_LIFETIME", usage: "connections older than this are recycled",
		def: "5m", min: "1s", max: "24h", field: func(c *Config) any { return &c.DB.ConnMaxLifetime },
	},
	{
		path: "db.statement_timeout", env: "PAYCB_DB_STATEMENT_TIMEOUT", usage: "bound on each database step of a batch; half of it (at least 1s) is the session's innodb_lock_wait_timeout",
		def: "10s", min: "1s", max: "10m", field: func(c *Config) any { return &c.DB.StatementTimeout },
	},

	{
		path: "admin.addr", env: "PAYCB_ADMIN_ADDR", flag: "admin-addr", usage: "HTTP address for /metrics, /healthz, /readyz",
		def: ":9464", field: func(c *Config) any { return &c.Admin.Addr },
	},
	{path: "admin.pprof", env: "PAYCB_ADMIN_PPROF", usage: "serve /debug/pprof/ on the admin address", def: "false", field: func(c *Config) any { return &c.Admin.Pprof }},

	{
		path: "wechat.apiv3_key", env: "PAYCB_WECHAT_APIV3_KEY", usage: "APIv3 key for every tenant without keys of its own", secret: true, file: true,
		field: func(c *Config) any { return &c.WeChat.APIv3Key },
	},
	{path: "wechat.apiv3_keys", usage: "per-tenant APIv3 keys, current first (YAML only)", secret: true, field: func(c *Config) any { return &c.WeChat.APIv3Keys }},
	{
		path: "wechat.tenant_keys_file", env: "PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE", usage: "file of per-tenant APIv3 keys, lines TENANT_ID=KEY, current first",
		field: func(c *Config) any { return &c.WeChat.TenantKeysFile },
	},

	{
		path: "statement.key_file", env: "PAYCB_STATEMENT_KEY_FILE", usage: "file of the keys that sign statement events, lines KEY_ID=SECRET (secret at least 32 bytes), current first; re-read when it changes",
		field: func(c *Config) any { return &c.Statement.KeyFile },
	},

	{
		path: "settled.topic", env: "PAYCB_SETTLED_TOPIC", usage: "settled-event topic, never created by the worker; none turns settled events off (default: the input topic + \".settled\")",
		field: func(c *Config) any { return &c.Settled.Topic },
	},
	{
		path: "settled.retention", env: "PAYCB_SETTLED_RETENTION", usage: "how long a published settled event stays re-publishable before consumer purge deletes it",
		def: "168h", min: "1h", max: "8760h", field: func(c *Config) any { return &c.Settled.Retention },
	},

	{
		path: "query.credentials_file", env: "PAYCB_QUERY_CREDENTIALS_FILE",
		usage: "the querier's API credentials per merchant (YAML list; keys can move money out); read by consumer query only, never by run",
		field: func(c *Config) any { return &c.Query.CredentialsFile },
	},
	{
		path: "query.wechat_url", env: "PAYCB_QUERY_WECHAT_URL", usage: "WeChat Pay API base URL, https://host[:port] only",
		def: wechat.QueryBaseURL, field: func(c *Config) any { return &c.Query.WeChatURL },
	},
	{
		path: "query.alipay_url", env: "PAYCB_QUERY_ALIPAY_URL", usage: "Alipay gateway URL (https)",
		def: alipay.DefaultGatewayURL, field: func(c *Config) any { return &c.Query.AlipayURL },
	},
	{
		path: "query.sqb_url", env: "PAYCB_QUERY_SQB_URL", usage: "Shouqianba API base URL (https; the host its documentation names, UNCONFIRMED as current)",
		def: sqb.DefaultQueryBaseURL, field: func(c *Config) any { return &c.Query.SQBURL },
	},
	{
		path: "query.tls_ca_file", env: "PAYCB_QUERY_TLS_CA_FILE", usage: "CA bundle (PEM) trusted for the channels' APIs besides the system roots",
		field: func(c *Config) any { return &c.Query.TLSCAFile },
	},
	{
		path: "query.first_wait", env: "PAYCB_QUERY_FIRST_WAIT", usage: "how long a registration waits for its callback before the first query (WeChat's guidance: about a minute)",
		def: "60s", min: "1s", max: "24h", field: func(c *Config) any { return &c.Query.FirstWait },
	},
	{
		path: "query.rate", env: "PAYCB_QUERY_RATE", usage: "queries a second each merchant may be sent, by all the queriers together (the same on every querier of a database)",
		def: "5", min: "1", max: "1000", field: func(c *Config) any { return &c.Query.Rate },
	},
	{
		path: "query.burst", env: "PAYCB_QUERY_BURST", usage: "most queries a merchant is sent at once after a quiet period (the same on every querier of a database)",
		def: "10", min: "1", max: "1000", field: func(c *Config) any { return &c.Query.Burst },
	},

	{
		path: "log.level", env: "PAYCB_LOG_LEVEL", flag: "log-level", usage: "debug, info, warn or error",
		def: "info", oneOf: []string{"debug", "info", "warn", "error"}, field: func(c *Config) any { return &c.Log.Level },
	},
	{
		path: "log.format", env: "PAYCB_LOG_FORMAT", flag: "log-format", usage: "text or json",
		def: "text", oneOf: []string{"text", "json"}, field: func(c *Config) any { return &c.Log.Format },
	},

	{
		path: "worker.batch_max", env: "PAYCB_BATCH_MAX", flag: "batch-max", usage: "most events handled as one batch per partition; 1 is the per-message pipeline (batches of one)",
		def: "256", min: "1", max: strconv.Itoa(MaxBatch), field: func(c *Config) any { return &c.Worker.BatchMax },
	},
	{
		path: "worker.merge_max", env: "PAYCB_MERGE_MAX", usage: "most events one merged transaction holds: small batches (under 8 distinct keys) that several partitions have ready at once share one claims insert and one business transaction; 1 merges nothing, and PAYCB_BATCH_MAX=1 never merges",
		def: "64", min: "1", max: strconv.Itoa(MaxBatch), field: func(c *Config) any { return &c.Worker.MergeMax },
	},
	{
		path: "worker.merge_wait", env: "PAYCB_MERGE_WAIT", usage: "least time from one merged transaction's start to the next's: at steady load each gathers the small batches that come meanwhile, so there are fewer and larger ones, at the cost of up to this much latency; a worker idle this long starts one at once; 0s starts each as soon as the one before ends",
		def: "3ms", min: "0s", max: "100ms", field: func(c *Config) any { return &c.Worker.MergeWait },
	},
	{
		path: "worker.orphan_after", env: "PAYCB_ORPHAN_AFTER", flag: "orphan-after", usage: "how long a claim may stay ACQUIRED before the sweeper settles it",
		def: "2m", min: "100ms", max: "24h", field: func(c *Config) any { return &c.Worker.OrphanAfter },
	},
	{
		path: "worker.sweep_interval", env: "PAYCB_SWEEP_INTERVAL", usage: "how often the orphan sweeper runs",
		def: "30s", min: "100ms", max: "1h", field: func(c *Config) any { return &c.Worker.SweepInterval },
	},
	{
		path: "worker.stall_threshold", env: "PAYCB_STALL_THRESHOLD", usage: "how long a partition may retry one message before /readyz reports it stalled",
		def: "1m", min: "1s", max: "1h", field: func(c *Config) any { return &c.Worker.StallThreshold },
	},
	{
		path: "worker.lag_interval", env: "PAYCB_LAG_INTERVAL", usage: "how often each instance asks the broker for its partitions' end and committed offsets (paycb_consumer_lag)",
		def: "10s", min: "100ms", max: "5m", field: func(c *Config) any { return &c.Worker.LagInterval },
	},
	{
		path: "worker.retry_backoff_min", env: "PAYCB_RETRY_BACKOFF_MIN", usage: "first retry delay of a failing message",
		def: "10ms", min: "1ms", max: "10s", field: func(c *Config) any { return &c.Worker.RetryBackoffMin },
	},
	{
		path: "worker.retry_backoff_max", env: "PAYCB_RETRY_BACKOFF_MAX", usage: "cap on the retry delay",
		def: "30s", min: "10ms", max: "10m", field: func(c *Config) any { return &c.Worker.RetryBackoffMax },
	},
	{
		path: "worker.shutdown_timeout", env: "PAYCB_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", usage: "cap on finishing in-flight messages at shutdown; leaving the group and closing take a few seconds more, so the default leaves margin under Kubernetes' default 30s grace period",
		def: "20s", min: "100ms", max: "10m", field: func(c *Config) any { return &c.Worker.ShutdownTimeout },
	},
	{
		path: "worker.startup_timeout", env: "PAYCB_STARTUP_TIMEOUT", usage: "how long run keeps trying to reach the database and the broker at start",
		def: "1m", min: "1s", max: "10m", field: func(c *Config) any { return &c.Worker.StartupTimeout },
	},
	{
		path: "worker.channels", env: "PAYCB_CHANNELS", usage: "channels accepted, comma-separated; others are dead-lettered unknown_channel",
		choices: channels.CodeStrings, field: func(c *Config) any { return &c.Worker.Channels },
	},
	{
		path: "worker.refunds_preregistered", env: "PAYCB_REFUNDS_PREREGISTERED", usage: "whether every refund is expected to be registered before the channel reports it; when true an unregistered refund is a WARN and a reconciliation discrepancy",
		def: "false", field: func(c *Config) any { return &c.Worker.RefundsPreregistered },
	},
	{
		path: "worker.tenant_merchants_file", env: "PAYCB_TENANT_MERCHANTS_FILE",
		usage: "merchant binding, lines TENANT_ID CHANNEL MERCHANT_ID (or TENANT_ID ALIPAY app_id APP_ID); re-read when it changes; empty: callbacks unchecked, statement import refused",
		field: func(c *Config) any { return &c.Worker.TenantMerchantsFile },
	},
	{
		path: "worker.channel_public_keys_file", env: "PAYCB_CHANNEL_PUBLIC_KEYS_FILE",
		usage: "the channels' public keys query answers are verified with (YAML list); re-read, with its key files, when they change; empty: every WeChat and Alipay query answer is unauthenticated",
		field: func(c *Config) any { return &c.Worker.ChannelPublicKeysFile },
	},
}

var settingByPath = func() map[string]*setting {
	m := make(map[string]*setting, len(settings))
	for i := range settings {
		m[settings[i].path] = &settings[i]
	}
	return m
}()

// set parses v, written as the environment would give it, into s's field
// of c. Errors never quote a secret.
func (s *setting) set(c *Config, v string) error {
	switch p := s.field(c).(type) {
	case *string:
		*p = v
	case *Secret:
		*p = Secret(v)
	case *DSN:
		*p = DSN(v)
	case *[]string:
		if s.values() != nil {
			v = strings.ToUpper(v)
		}
		*p = splitList(v)
	case *int:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("parse integer %q: want a whole number", v)
		}
		*p = n
	case *bool:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("parse boolean %q: want true or false", v)
		}
		*p = b
	case *time.Duration:
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("parse duration %q: want a Go duration such as 500ms, 30s or 2m", v)
		}
		*p = d
	default:
		return fmt.Errorf("%s cannot be set from text", s.path)
	}
	return nil
}

// text returns s's value in c as the environment would give it, secrets
// masked.
func (s *setting) text(c *Config) string {
	switch p := s.field(c).(type) {
	case *string:
		return *p
	case *Secret:
		return p.String()
	case *DSN:
		return p.String()
	case *[]string:
		return strings.Join(*p, ",")
	case *int:
		return strconv.Itoa(*p)
	case *bool:
		return strconv.FormatBool(*p)
	case *time.Duration:
		return p.String()
	case *map[int64]Keys:
		parts := make([]string, 0, len(*p))
		for _, tenant := range slices.Sorted(maps.Keys(*p)) {
			parts = append(parts, strconv.FormatInt(tenant, 10)+"="+(*p)[tenant].String())
		}
		return strings.Join(parts, ",")
	default:
		panic("config: setting " + s.path + " has an unsupported type")
	}
}

// logValue returns s's value in c for the log, typed where slog has a
// kind for it, durations as strings, secrets masked.
func (s *setting) logValue(c *Config) slog.Value {
	switch p := s.field(c).(type) {
	case *int:
		return slog.IntValue(*p)
	case *bool:
		return slog.BoolValue(*p)
	case *map[int64]Keys:
		attrs := make([]slog.Attr, 0, len(*p))
		for _, tenant := range slices.Sorted(maps.Keys(*p)) {
			attrs = append(attrs, slog.String(strconv.FormatInt(tenant, 10), (*p)[tenant].String()))
		}
		return slog.GroupValue(attrs...)
	default:
		return slog.StringValue(s.text(c))
	}
}

// name is how messages refer to s: its YAML path and, when it has one, its
// environment variable.
func (s *setting) name() string {
	if s.env == "" {
		return s.path
	}
	return s.path + " (" + s.env + ")"
}

// checkBounds reports s's value in c outside its bounds or its accepted
// values, or "" when it is within them.
func (s *setting) checkBounds(c *Config) string {
	switch p := s.field(c).(type) {
	case *int:
		lo, hi := boundInt(s.min), boundInt(s.max)
		if (s.min != "" && *p < lo) || (s.max != "" && *p > hi) {
			return fmt.Sprintf("must be between %s and %s, got %d", s.min, s.max, *p)
		}
	case *time.Duration:
		lo, hi := boundDuration(s.min), boundDuration(s.max)
		if (s.min != "" && *p < lo) || (s.max != "" && *p > hi) {
			return fmt.Sprintf("must be between %s and %s, got %s", lo, hi, *p)
		}
	case *string:
		if oneOf := s.values(); oneOf != nil && !slices.Contains(oneOf, *p) {
			return fmt.Sprintf("must be one of %s; got %q", listed(oneOf), *p)
		}
	case *[]string:
		oneOf := s.values()
		if oneOf == nil {
			return ""
		}
		if len(*p) == 0 {
			return fmt.Sprintf("must name at least one of %s", listed(oneOf))
		}
		for _, v := range *p {
			if !slices.Contains(oneOf, v) {
				return fmt.Sprintf("must name only %s; got %q", listed(oneOf), v)
			}
		}
	}
	return ""
}

// listed writes values for a message, the empty value as "(empty)".
func listed(values []string) string {
	out := make([]string, len(values))
	for i, v := range values {
		if v == "" {
			v = "(empty)"
		}
		out[i] = v
	}
	return strings.Join(out, ", ")
}

func boundInt(v string) int {
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		panic("config: bad integer bound " + v)
	}
	return n
}

func boundDuration(v string) time.Duration {
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic("config: bad duration bound " + v)
	}
	return d
}

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

// Default returns the configuration with every documented default and no
// secrets. Kafka.DLQTopic and Settled.Topic are left empty: Load derives
// them from the final topic.
func Default() Config {
	var c Config
	for i := range settings {
		s := &settings[i]
		def := s.defaultText()
		if def == "" {
			continue
		}
		if err := s.set(&c, def); err != nil {
			panic("config: default of " + s.path + ": " + err.Error())
		}
	}
	return c
}

// LogValue implements slog.LogValuer: the whole configuration as nested
// groups in the settings' order, durations as Go duration strings, secrets
// masked.
func (c Config) LogValue() slog.Value {
	type node struct {
		attrs    []slog.Attr
		children map[string]*node
		order    []string
	}
	root := &node{children: map[string]*node{}}
	for i := range settings {
		s := &settings[i]
		parts := strings.Split(s.path, ".")
		n := root
		for _, part := range parts[:len(parts)-1] {
			child := n.children[part]
			if child == nil {
				child = &node{children: map[string]*node{}}
				n.children[part] = child
				n.order = append(n.order, part)
			}
			n = child
		}
		n.attrs = append(n.attrs, slog.Attr{Key: parts[len(parts)-1], Value: s.logValue(&c)})
	}
	var build func(n *node) slog.Value
	build = func(n *node) slog.Value {
		attrs := slices.Clone(n.attrs)
		for _, name := range n.order {
			attrs = append(attrs, slog.Attr{Key: name, Value: build(n.children[name])})
		}
		return slog.GroupValue(attrs...)
	}
	return build(root)
}
