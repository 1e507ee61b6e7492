package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/admin"
	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/internal/consumer"
	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/internal/registrations"
	"github.com/paycallback/paycallback/internal/settledpub"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/internal/watchfile"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"

	"github.com/paycallback/paycallback/internal/buildinfo"
	"github.com/paycallback/paycallback/internal/deadletters"
)

// Main is one worker process. Set Config (and optionally DB, Logger,
// Registry), then call Run.
type Main struct {
	// Config is the validated configuration.
	Config config.Config
	// DB is the database to use. When nil, Run opens Config.DB.DSN and
	// closes it on return; a DB set by the caller is left open.
	DB *bun.DB
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives every metric; defaults to metrics.NewRegistry().
	Registry *prometheus.Registry
	// Fault injects failures at message boundaries (the pipeline's fault
	// points and consumer.FaultBeforeCommit), for tests; nil in production.
	Fault pipeline.FaultFunc
	// StatementMetricsRefresh is how often the statement reconciliation
	// metrics are read from the database (a scrape reads none); zero is
	// metrics.DefaultStatementRefreshInterval. Tests shorten it.
	StatementMetricsRefresh time.Duration
	// SettledSweepInterval and SettledSweepGrace are the settled-event
	// sweeper's interval and grace (settledpub.Sweeper); zero is
	// settledpub.DefaultSweepInterval and DefaultSweepGrace. Tests shorten
	// them.
	SettledSweepInterval time.Duration
	SettledSweepGrace    time.Duration
	// SettledMetricsRefresh is how often paycb_settled_pending and
	// paycb_settled_oldest_pending_seconds are read from the outbox (a
	// scrape reads nothing); zero is metrics.DefaultSettledRefreshInterval.
	SettledMetricsRefresh time.Duration
	// RegistrationMetricsRefresh is how often the open registrations'
	// gauges (paycb_registrations_open and its companions) are read, and
	// the payment registrations that missed their posted payment settled;
	// zero is metrics.DefaultRegistrationRefresh.
	RegistrationMetricsRefresh time.Duration

	mu     sync.Mutex
	worker *consumer.Worker
	admin  *admin.Server
	stkeys *statementKeys
	ready  chan struct{}
	bg     *background // Start's Run, for Close
}

// Run starts every part and blocks until ctx ends, then shuts down in order:
// stop fetching, finish in-flight messages and commit them, leave the group,
// stop the sweeper and the admin server, close the database. It returns the
// first error that stopped the worker, or nil after a clean shutdown.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	logger := m.Logger
	if logger == nil {
		logger = slog.Default()
	}
	sqldb.SetLogger(logger)
	reg := m.Registry
	if reg == nil {
		reg = metrics.NewRegistry()
		m.Registry = reg
	}
	// Every Kafka client below connects with this one TLS and SASL setting.
	kconn, err := kafkaconn.New(cfg.Kafka)
	if err != nil {
		// An unreadable CA bundle or a key that does not match its
		// certificate is the configuration's fault.
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	defer kconn.Close()
	db := m.DB
	if db == nil {
		var err error
		db, err = sqldb.Open(cfg.DB)
		if err != nil {
			return fmt.Errorf("%w: %w", config.ErrInvalid, err) // sqldb.Open does not connect
		}
		defer db.Close()
	}
	// Nothing joins the group before every start-up check passes
	// (preflight.go); a signal stops the checks at once. The admin server
	// answers from before the first connection attempt: /healthz is 200
	// while the checks wait for a dependency, and /readyz 503 saying what
	// they wait for, so a liveness probe never kills an instance that is
	// only waiting.
	var starting atomic.Pointer[string]
	setStarting := func(what string) { starting.Store(&what) }
	setStarting("starting: checking the configuration")
	pf := &preflight{cfg: cfg, db: db, kafka: kconn, logger: logger, waiting: setStarting}
	adminLn, err := pf.listen(ctx)
	if err != nil {
		return err
	}
	// The contract's metrics are served from the first scrape, start-up
	// included: paycb_group_joined is 0 until a generation is joined.
	met, err := metrics.New(reg)
	if err != nil {
		_ = adminLn.Close()
		return fmt.Errorf("register metrics: %w", err)
	}
	srv := admin.New(cfg.Admin.Addr, reg, []admin.Check{
		{Name: "startup", Check: func(context.Context) error {
			if what := *starting.Load(); what != "" {
				return errors.New(what)
			}
			return nil
		}},
		{Name: "database", Check: func(ctx context.Context) error { return db.PingContext(ctx) }},
		{Name: "consumer", Check: func(context.Context) error {
			if w := m.Worker(); w != nil {
				return w.Ready()
			}
			return errors.New("the worker has not started")
		}},
	}, logger, admin.WithPprof(cfg.Admin.Pprof),
		// What each owned partition holds up and why, for `consumer status`.
		admin.WithJSON(consumer.PartitionsPath, func() any {
			if w := m.Worker(); w != nil {
				return w.Partitions()
			}
			return []consumer.PartitionReport{}
		}))
	m.mu.Lock()
	m.admin = srv
	m.mu.Unlock()
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, adminLn) }() // Serve closes the listener
	adminStopped := false
	stopAdmin := func() error {
		if adminStopped {
			return nil
		}
		adminStopped = true
		stopServe()
		if err := <-served; err != nil {
			return fmt.Errorf("admin server: %w", err)
		}
		return nil
	}
	defer func() { _ = stopAdmin() }()

	if kconn.Secured() {
		// A refused password or an untrusted broker certificate fails the
		// start at once, with what to check; an unreachable broker is left
		// to the start-up checks, which retry.
		setStarting("starting: checking the broker's TLS and SASL settings")
		if err := kconn.Check(ctx, 5*time.Second); errors.Is(err, kafkaconn.ErrRejected) {
			return err
		}
	}
	if err := pf.dependencies(ctx); err != nil {
		if ctx.Err() != nil {
			logger.Info("stopped during the start-up checks")
			return nil
		}
		return err
	}
	setStarting("starting: wiring the worker")

	// The statement reconciliation metrics (`consumer statement reconcile`
	// records the results) are read from the database on a timer, never by
	// a scrape: a scrape storm on the unauthenticated /metrics costs the
	// database nothing.
	stmtMetricOpts := []metrics.StatementOption{}
	if m.StatementMetricsRefresh > 0 {
		stmtMetricOpts = append(stmtMetricOpts, metrics.WithStatementRefreshInterval(m.StatementMetricsRefresh))
	}
	stmtMetrics := metrics.NewStatementCollector(func(ctx context.Context, now time.Time, days int) ([]metrics.StatementStanding, error) {
		return statementbook.StatementStandings(ctx, db, now, days)
	}, logger, stmtMetricOpts...)
	if err := reg.Register(stmtMetrics); err != nil {
		return fmt.Errorf("register statement metrics: %w", err)
	}
	// The outbox's backlog, likewise on a timer.
	settledMetrics := metrics.NewSettledCollector(func(ctx context.Context) (int64, time.Time, error) {
		return settledpub.Pending(ctx, db)
	}, logger, m.SettledMetricsRefresh)
	if err := reg.Register(settledMetrics); err != nil {
		return fmt.Errorf("register settled-event metrics: %w", err)
	}
	keys := channels.StaticKeys{Default: cfg.WeChat.APIv3Key.Reveal(), Tenants: map[int64][]string{}}
	for tenant, k := range cfg.WeChat.APIv3Keys {
		keys.Tenants[tenant] = k.Reveal() // current key first
	}
	if err := keys.Validate(); err != nil {
		return fmt.Errorf("%w: wechat apiv3 keys: %w", config.ErrInvalid, err)
	}
	stmtKeys, err := loadStatementKeys(cfg, logger)
	if err != nil {
		return err
	}
	accepted, err := channels.ParseChannels(cfg.Worker.Channels)
	if err != nil {
		return fmt.Errorf("%w: worker.channels: %w", config.ErrInvalid, err)
	}
	merchants, err := loadMerchants(cfg, logger)
	if err != nil {
		return err
	}
	queryKeys, err := loadChannelKeys(cfg, logger)
	if err != nil {
		return err
	}
	claims := idempotent.NewStore(db)
	settler, err := settlement.New(db, claims, logger, reg)
	if err != nil {
		return fmt.Errorf("start settlement: %w", err)
	}
	// The open registrations, likewise on a timer; each refresh first
	// settles the payment registrations whose payment is posted and that
	// missed it (settlement.Service.SettleFromOrders: the backstop of the
	// either-order rule on engines whose locking reads do not wait).
	regStore := registrations.NewStore(db)
	regMetrics := metrics.NewRegistrationCollector(func(ctx context.Context) ([]metrics.RegistrationStanding, error) {
		if _, err := settler.SettleFromOrders(ctx, 0); err != nil {
			return nil, err
		}
		stats, err := regStore.Stats(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]metrics.RegistrationStanding, len(stats))
		for i, st := range stats {
			out[i] = metrics.RegistrationStanding{
				Channel: string(st.Channel), Kind: string(st.Kind), Open: st.Open, Oldest: st.Oldest, PastExpiry: st.PastExpiry,
			}
		}
		return out, nil
	}, logger, m.RegistrationMetricsRefresh)
	if err := reg.Register(regMetrics); err != nil {
		return fmt.Errorf("register registration metrics: %w", err)
	}
	settler.SetRefundsPreregistered(cfg.Worker.RefundsPreregistered)
	settler.SetSettledEvents(cfg.Settled.Enabled())
	dlq := deadletters.NewKafkaWriter(cfg.Kafka.Brokers, cfg.Kafka.DLQTopic, cfg.Kafka.DLQWriteTimeout,
		deadletters.WithMaxMessageBytes(cfg.Kafka.MaxBytes), deadletters.WithLogger(logger),
		deadletters.WithTransport(kconn.Transport()))
	defer dlq.Close()
	records := deadletters.NewStore(db)
	// Settled events: the settling worker publishes a settlement's rows
	// right after its commit, and every worker's outbox sweeper what that
	// left behind (internal/settledpub).
	var settledPub *settledpub.Publisher
	var outboxSweeper *settledpub.Sweeper
	if cfg.Settled.Enabled() {
		grace := m.SettledSweepGrace
		if grace <= 0 {
			grace = settledpub.DefaultSweepGrace
		}
		sw := settledpub.NewKafkaWriter(cfg.Kafka.Brokers, cfg.Settled.Topic, kconn.Transport(), logger, grace/3)
		defer sw.Close()
		settledPub = settledpub.NewPublisher(db, sw, logger, grace)
		outboxSweeper = &settledpub.Sweeper{
			DB: db, Writer: sw, Logger: logger, Interval: m.SettledSweepInterval, Grace: grace,
		}
	}
	pipe := &pipeline.Pipeline{
		Decoder: channels.NewDecoder(keys, channels.Accept("PAYCB_CHANNELS", accepted...),
			channels.VerifyStatements(stmtKeys), queryKeys.option()),
		Claims:       claims,
		Settler:      settler,
		DeadLetterer: dlq,
		Metrics:      met,
		Logger:       logger,
		Fault:        m.Fault,

		StatementTimeout:  cfg.DB.StatementTimeout,
		MergeMax:          mergeMax(cfg.Worker),
		MergeWait:         cfg.Worker.MergeWait,
		DeadLetterRecords: records,
		Merchants:         merchants,
		Settled:           settledPub,
		QueryClosed:       registrations.Closer{Store: regStore},
		Orders: func(ctx context.Context, tenantID int64, ch channels.Channel, tradeNo string) (settlement.Order, error) {
			return settlement.GetOrder(ctx, db, tenantID, ch, tradeNo)
		},
	}
	w := consumer.New(consumer.Config{
		Brokers:           cfg.Kafka.Brokers,
		Topic:             cfg.Kafka.Topic,
		GroupID:           cfg.Kafka.Group,
		BatchMax:          cfg.Worker.BatchMax,
		Backoff:           consumer.Backoff{Min: cfg.Worker.RetryBackoffMin, Max: cfg.Worker.RetryBackoffMax},
		StallAfter:        cfg.Worker.StallThreshold,
		LagInterval:       cfg.Worker.LagInterval,
		Client:            kconn.Client(5 * time.Second),
		ShutdownTimeout:   cfg.Worker.ShutdownTimeout,
		SessionTimeout:    cfg.Kafka.SessionTimeout,
		HeartbeatInterval: cfg.Kafka.HeartbeatInterval,
		RebalanceTimeout:  cfg.Kafka.RebalanceTimeout,
		MaxWait:           cfg.Kafka.MaxWait,
		MinBytes:          cfg.Kafka.MinBytes,
		MaxBytes:          cfg.Kafka.MaxBytes,
		StartOffset:       startOffset(cfg.Kafka.StartOffset),

		PartitionWatchInterval: cfg.Kafka.PartitionWatchInterval,
		CommitInterval:         cfg.Kafka.CommitInterval,
		// A topic deleted while running is never recreated; the client ID
		// announces the admin server to `consumer status`.
		Dialer: consumer.WithClientID(neverCreateTopics(kconn.Dialer()), consumer.ClientID(adminLn.Addr())),
		Fault:  m.Fault,
	}, pipe, met, logger)
	if err := reg.Register(w.ReaderStats()); err != nil {
		return fmt.Errorf("register reader statistics: %w", err)
	}
	sweeper := &pipeline.Sweeper{
		Claims:      claims,
		Settler:     settler,
		Metrics:     met,
		Logger:      logger,
		OrphanAfter: cfg.Worker.OrphanAfter,
		Interval:    cfg.Worker.SweepInterval,

		Originals:         pipeline.KafkaOriginals{Brokers: cfg.Kafka.Brokers, Dialer: kconn.Dialer()},
		DeadLetterer:      dlq,
		DeadLetterRecords: records,
		Settled:           settledPub,
	}
	sweeper.Merchantless = &pipeline.MerchantlessRedrive{
		Pipeline: pipe, Topic: cfg.Kafka.Topic, Letters: records, Originals: sweeper.Originals, Logger: logger,
	}
	m.mu.Lock()
	m.worker = w
	m.stkeys = stmtKeys
	m.mu.Unlock()

	build := buildinfo.Read()
	logger.Info("starting worker", "version", build.Version, "revision", build.Revision, "goversion", build.GoVersion,
		"channels", strings.Join(cfg.Worker.Channels, ","), "config", cfg)
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = sweeper.Run(bg) }()
	wg.Add(1)
	go func() { defer wg.Done(); stmtKeys.watch(bg, logger) }()
	wg.Go(func() { queryKeys.watch(bg, logger) })
	wg.Go(func() { _ = stmtMetrics.Run(bg) })
	wg.Go(func() { _ = settledMetrics.Run(bg) })
	wg.Go(func() { _ = regMetrics.Run(bg) })
	if settledPub != nil {
		wg.Go(func() { _ = settledPub.Run(bg) })
		wg.Go(func() { _ = outboxSweeper.Run(bg) })
	}
	if merchants != nil {
		// A new terminal or sub-merchant needs no restart; a bad edit is
		// logged and the last good binding stays in force.
		wg.Go(func() { merchants.Watch(bg, watchfile.DefaultInterval, logger, nil) })
	}
	setStarting("")
	m.signalReady()

	runErr := w.Run(ctx)
	stopBg()
	wg.Wait()
	runErr = errors.Join(runErr, stopAdmin())
	logger.Info("worker stopped")
	return runErr
}

// channelKeys are the channels' public keys of
// PAYCB_CHANNEL_PUBLIC_KEYS_FILE as last read good, or none.
type channelKeys struct {
	file *channelkeys.File // nil: not configured
}

// loadChannelKeys reads the channels' public keys when a file is
// configured; a bad file is a configuration error.
func loadChannelKeys(cfg config.Config, logger *slog.Logger) (*channelKeys, error) {
	path := cfg.Worker.ChannelPublicKeysFile
	if path == "" {
		logger.Warn("no channel public keys (PAYCB_CHANNEL_PUBLIC_KEYS_FILE): every WeChat and Alipay query answer is dead-lettered unauthenticated")
		return &channelKeys{}, nil
	}
	f, err := channelkeys.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%w: worker.channel_public_keys_file (PAYCB_CHANNEL_PUBLIC_KEYS_FILE): %w", config.ErrInvalid, err)
	}
	logger.Info("query answers are verified with the channels' public keys", "file", path, "keys", f.Current().Len())
	return &channelKeys{file: f}, nil
}

// option is the decoder's option: the file's keys, or none.
func (k *channelKeys) option() channels.DecoderOption {
	if k.file == nil {
		return channels.VerifyQueryAnswers(nil)
	}
	return channels.VerifyQueryAnswers(k.file)
}

// watch re-reads the file and its key files until ctx ends; a change
// refused keeps the last good keys.
func (k *channelKeys) watch(ctx context.Context, logger *slog.Logger) {
	if k.file == nil {
		return
	}
	k.file.Watch(ctx, 0, logger, func(ks channels.ChannelPublicKeys) {
		logger.Info("channel public keys in force", "file", k.file.Path(), "keys", ks.Len())
	})
}

// loadMerchants reads the merchant binding when one is configured, and
// otherwise says, once, that callbacks are not checked against merchants.
func loadMerchants(cfg config.Config, logger *slog.Logger) (*merchantbinding.File, error) {
	path := cfg.Worker.TenantMerchantsFile
	if path == "" {
		logger.Warn("PAYCB_TENANT_MERCHANTS_FILE is not set: callbacks are not checked against merchants " +
			"(a callback of any merchant is posted to the tenant its envelope names)")
		return nil, nil
	}
	f, err := merchantbinding.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%w: worker.tenant_merchants_file (PAYCB_TENANT_MERCHANTS_FILE): %w", config.ErrInvalid, err)
	}
	logger.Info("callbacks are checked against the merchant binding", "file", path,
		"bindings", f.Current().Len(), "tenants", len(f.Current().Tenants()))
	return f, nil
}

// Worker returns the running worker (nil before Run has wired it).
func (m *Main) Worker() *consumer.Worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.worker
}

// StatementKeyIDs are the ids of the statement keys the worker verifies
// with now, current first (nil before Run has wired it, or without a key
// file): a re-read key file shows here.
func (m *Main) StatementKeyIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stkeys == nil {
		return nil
	}
	return m.stkeys.ids()
}

// Admin returns the admin server (nil before Run has wired it).
func (m *Main) Admin() *admin.Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.admin
}

// Ready is closed once Run has wired every part.
func (m *Main) Ready() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	return m.ready
}

func (m *Main) signalReady() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	close(m.ready)
}

// startOffset maps the configured start ("first" or "last") to kafka-go's.
func startOffset(s string) int64 {
	if s == "last" {
		return kafka.LastOffset
	}
	return kafka.FirstOffset
}

// mergeMax is the pipeline's MergeMax: cfg's, except that the per-message
// pipeline (BatchMax 1) never merges.
func mergeMax(cfg config.Worker) int {
	if cfg.BatchMax <= 1 {
		return 1
	}
	return cfg.MergeMax
}
