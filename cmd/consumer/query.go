package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/admin"
	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/querier"
	"github.com/paycallback/paycallback/internal/querybudget"
	"github.com/paycallback/paycallback/internal/queryclient"
	"github.com/paycallback/paycallback/internal/querycreds"
	"github.com/paycallback/paycallback/internal/queryplan"
	"github.com/paycallback/paycallback/internal/querywork"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/internal/watchfile"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/schema"
)

func queryCmd() command {
	return command{
		name:    "query",
		summary: "the active query: ask the channels about registrations no callback settled",
		description: `The active query (docs/querier.md): a process apart from the worker, holding
the channels' API credentials (PAYCB_QUERY_CREDENTIALS_FILE), that asks each
channel about the payment and refund registrations whose callback did not
come, on the channels' own schedule and within a budget per merchant, and
publishes the answers that prove money moved for the worker to settle; and
an operator's one query, printed and, if asked, published.`,
		verbs: []command{
			queryRunCmd(),
			queryOnceCmd(),
		},
	}
}

// The querier's defaults (flags of consumer query run).
const (
	defaultQueryInterval = time.Second
	defaultQueryBatch    = 100
	defaultQueryParallel = 8
	defaultQueryLease    = time.Minute
	// queryShutdownGrace is how long a round in flight at SIGTERM may go on
	// to record its answers; what it has not recorded is asked again after
	// its lease.
	queryShutdownGrace = 15 * time.Second
)

func queryRunCmd() command {
	return command{
		name:     "run",
		summary:  "the querier: ask the channels about open registrations until interrupted",
		synopsis: "[--interval D] [--batch N] [--parallel N] [--lease D]",
		description: `Every --interval, leases the open payment and refund registrations that are
due (past PAYCB_QUERY_FIRST_WAIT, then on the schedule of docs/querier.md),
asks each channel within the merchant's budget, verifies and reads the
answer, publishes a proving one to the input topic signed with the statement
key (the worker settles it through the claim), and records the answer and
the next ask, until interrupted (SIGINT or SIGTERM: the round in flight
records what it can, for up to 15s). Several may run against one database;
never one registration by two at once. It never joins the consumer group
and never creates a topic. Needs the credentials file, the statement key
file (answers are signed with its current key), the database migrated
(consumer migrate) and the input topic; the channels' public keys
(PAYCB_CHANNEL_PUBLIC_KEYS_FILE) to read WeChat and Alipay answers. Serves
/metrics, /healthz and /readyz on PAYCB_ADMIN_ADDR (empty: none).`,
		exits: []exitStatus{
			{exitFailure, "a runtime failure: the database unreachable or not migrated, the input topic missing, the admin address taken"},
			{exitUsage, "a usage or configuration error: no or a bad credentials file, statement key file, public keys file, CA file or base URL, no DSN"},
		},
		setup: queryRunCommand,
	}
}

func queryRunCommand(fs *flag.FlagSet) runFunc {
	interval := fs.Duration("interval", defaultQueryInterval, "how often a round leases the registrations due")
	batch := fs.Int("batch", defaultQueryBatch, "most registrations one round leases")
	parallel := fs.Int("parallel", defaultQueryParallel, "most queries in flight at once")
	lease := fs.Duration("lease", defaultQueryLease, "how long a leased registration is this querier's: longer than a query's timeout (10s) and its recording")
	return func(ctx context.Context, env *environment, _ []string) error {
		if *interval <= 0 || *batch < 1 || *parallel < 1 || *lease <= queryclient.DefaultTimeout {
			return usagef("query run: --interval must be positive, --batch and --parallel at least 1, --lease longer than %s", queryclient.DefaultTimeout)
		}
		return runQuerier(ctx, env, querierSettings{interval: *interval, batch: *batch, parallel: *parallel, lease: *lease})
	}
}

// querierSettings are consumer query run's flags.
type querierSettings struct {
	interval       time.Duration
	batch          int
	parallel       int
	lease          time.Duration
	policyAdjuster func(*queryplan.Policy) // tests only: shorten the schedule
}

// runQuerier wires the querier from the configuration and runs a round
// every interval until ctx ends.
func runQuerier(ctx context.Context, env *environment, s querierSettings) error {
	cfg, log := env.cfg, env.logger

	// The files first: a configuration at fault exits 2 before anything
	// is connected.
	if cfg.Query.CredentialsFile == "" {
		return usagef("query run: no query credentials: set query.credentials_file (PAYCB_QUERY_CREDENTIALS_FILE)")
	}
	creds, err := querycreds.Open(cfg.Query.CredentialsFile)
	if err != nil {
		return usagef("query run: query.credentials_file (PAYCB_QUERY_CREDENTIALS_FILE): %w", err)
	}
	if cfg.Statement.KeyFile == "" {
		return usagef("query run: no statement key to sign answers with: set statement.key_file (PAYCB_STATEMENT_KEY_FILE); " +
			"an unsigned answer is dead-lettered unauthenticated by every worker")
	}
	stmtKeys, err := watchfile.Load(cfg.Statement.KeyFile, statementauth.Parse)
	if err != nil {
		return usagef("query run: statement.key_file (PAYCB_STATEMENT_KEY_FILE): %w", err)
	}
	publicKeys := func() channels.ChannelPublicKeys { return channels.ChannelPublicKeys{} }
	var pubFile *channelkeys.File
	if path := cfg.Worker.ChannelPublicKeysFile; path != "" {
		pubFile, err = channelkeys.Load(path)
		if err != nil {
			return usagef("query run: worker.channel_public_keys_file (PAYCB_CHANNEL_PUBLIC_KEYS_FILE): %w", err)
		}
		publicKeys = pubFile.Current
	} else {
		log.Warn("no channel public keys (PAYCB_CHANNEL_PUBLIC_KEYS_FILE): every WeChat and Alipay answer reads unauthenticated and is never published")
	}
	roots, err := queryclient.SystemRootsWith(cfg.Query.TLSCAFile)
	if err != nil {
		return usagef("query run: query.tls_ca_file (PAYCB_QUERY_TLS_CA_FILE): %w", err)
	}
	client, err := queryclient.New(queryclient.Config{BaseURLs: cfg.Query.BaseURLs(), RootCAs: roots}, creds)
	if err != nil {
		return usagef("query run: %w", err)
	}
	policy := queryplan.DefaultPolicy()
	policy.FirstWait = cfg.Query.FirstWait
	if s.policyAdjuster != nil {
		s.policyAdjuster(&policy)
	}
	if err := policy.Validate(); err != nil {
		return usagef("query run: query.first_wait (PAYCB_QUERY_FIRST_WAIT): %w", err)
	}

	db, err := openQuerierDB(ctx, env, s.parallel)
	if err != nil {
		return err
	}
	defer db.Close()
	k, err := opsKafka(ctx, env)
	if err != nil {
		return err
	}
	if err := k.RequireTopic(ctx, k.Topic); err != nil {
		return fmt.Errorf("query run: the input topic PAYCB_KAFKA_TOPIC %q: %w (the querier never creates it)", k.Topic, err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	qm, err := metrics.NewQueryMetrics(reg)
	if err != nil {
		return fmt.Errorf("register query metrics: %w", err)
	}
	budgetCfg := queryplan.DefaultBudget()
	budgetCfg.PerSecond, budgetCfg.Burst = float64(cfg.Query.Rate), cfg.Query.Burst
	budget, err := querybudget.New(db, budgetCfg)
	if err != nil {
		return usagef("query run: query.rate and query.burst (PAYCB_QUERY_RATE, PAYCB_QUERY_BURST): %w", err)
	}
	// The backstop only: no settlement metrics are registered here, they
	// are the worker's.
	backstop, err := settlement.New(db, idempotent.NewStore(db), log, nil)
	if err != nil {
		return fmt.Errorf("settlement backstop: %w", err)
	}
	// One writer for the querier's life: its answers share connections
	// and batches.
	producer := kafkaops.NewProducer(k.Brokers, k.Topic, kafkaops.WithConn(k.Conn))
	defer func() {
		if err := producer.Close(); err != nil {
			log.Warn("query run: closing the answers' writer", "err", err)
		}
	}()
	pub := querier.TopicPublisher{
		Produce: producer.Produce,
		Keys:    stmtKeys.Current,
		Headers: querier.SpecHeaders,
	}
	owner, err := querierName()
	if err != nil {
		return err
	}
	q, err := querier.New(querier.Config{Owner: owner, Policy: policy, Lease: s.lease, Batch: s.batch, Parallel: s.parallel},
		querywork.New(db, policy, backstop), client, querier.SpecReader{Keys: publicKeys}, pub, budget, qm, log)
	if err != nil {
		return usagef("query run: %w", err)
	}

	// The files are re-read while it runs: a rotated credential or key
	// needs no restart.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go creds.Watch(watchCtx, 0, log)
	go stmtKeys.Watch(watchCtx, 0, log, func(ks statementauth.Keys) {
		log.Info("statement keys in force", "file", cfg.Statement.KeyFile, "keys", ks.IDs())
	})
	if pubFile != nil {
		go pubFile.Watch(watchCtx, 0, log, func(ks channels.ChannelPublicKeys) {
			log.Info("channel public keys in force", "file", pubFile.Path(), "keys", ks.Len())
		})
	}

	served := make(chan error, 1)
	if cfg.Admin.Addr != "" {
		ln, err := admin.Listen(ctx, cfg.Admin.Addr)
		if err != nil {
			return fmt.Errorf("admin address PAYCB_ADMIN_ADDR %q: %w", cfg.Admin.Addr, err)
		}
		srv := admin.New(cfg.Admin.Addr, reg, []admin.Check{
			{Name: "database", Check: func(ctx context.Context) error { return db.PingContext(ctx) }},
		}, log, admin.WithPprof(cfg.Admin.Pprof))
		go func() { served <- srv.Serve(watchCtx, ln) }()
		log.Info("querier admin server", "addr", ln.Addr().String())
	} else {
		served <- nil
	}

	log.Info("querier started", "owner", owner, "interval", s.interval, "batch", s.batch, "parallel", s.parallel,
		"lease", s.lease, "first_wait", policy.FirstWait, "rate", budgetCfg.PerSecond, "burst", budgetCfg.Burst, "credentials", creds.Current().Len())
	runErr := queryRounds(ctx, q, s.interval, log)
	stopWatch()
	if err := <-served; err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("admin server: %w", err))
	}
	log.Info("querier stopped", "owner", owner)
	return runErr
}

// queryRounds runs a round every interval until ctx ends. A round in
// flight when ctx ends goes on for queryShutdownGrace, so that what it
// asked is recorded; a round's error (the database away) is logged and
// the next round tries again.
func queryRounds(ctx context.Context, q *querier.Querier, interval time.Duration, log interface {
	Warn(string, ...any)
},
) error {
	roundCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(queryShutdownGrace, cancel) })
	defer stop()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := q.Round(roundCtx); err != nil && roundCtx.Err() == nil {
			log.Warn("query round failed; the next round tries again", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// openQuerierDB opens the configured database with enough connections for
// parallel queries, checks that it answers and that its schema is what
// this binary expects (consumer migrate is not run here).
func openQuerierDB(ctx context.Context, env *environment, parallel int) (*bun.DB, error) {
	c := env.cfg.DB
	if c.MaxOpenConns < parallel+2 {
		c.MaxOpenConns, c.MaxIdleConns = parallel+2, parallel+2
	}
	db, err := sqldb.Open(c)
	if err != nil {
		return nil, usagef("query run: %w", err)
	}
	if err := sqldb.Ping(ctx, db, 10*time.Second); err != nil {
		_ = db.Close()
		if _, permanent := sqldb.Permanent(err); permanent {
			return nil, sqldb.PermanentError(c.DSN, err)
		}
		return nil, err
	}
	st, err := schema.Check(ctx, db)
	switch {
	case errors.Is(err, schema.ErrNotMigrated), errors.Is(err, schema.ErrOutdated):
		_ = db.Close()
		return nil, fmt.Errorf("query run: %w; run `consumer migrate` first", err)
	case err != nil:
		_ = db.Close()
		return nil, fmt.Errorf("query run: check the schema: %w", err)
	}
	if len(st.Newer) > 0 {
		env.logger.Warn("database schema is newer than this binary; starting, as in a rolling deploy",
			"binary_version", st.Embedded, "newer_versions", st.Newer)
	}
	return db, nil
}

// querierName names this process in leases and in the query log: host,
// process id and a random suffix, unique per process.
func querierName() (string, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "querier"
	}
	if len(host) > 40 {
		host = host[:40]
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("querier name: %w", err)
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b)), nil
}
