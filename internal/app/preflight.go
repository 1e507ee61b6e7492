package app

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/admin"
	"github.com/paycallback/paycallback/internal/kafkaconn"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/schema"
)

// ErrStartup is wrapped by every error of the start-up checks that Run makes
// before the worker joins its group: a dependency missing, unreachable or
// refusing this instance. The worker never joined; nothing was consumed or
// committed.
var ErrStartup = errors.New("start-up check failed")

// Start-up check retry bounds: the database and the broker are asked again
// after startupBackoffFirst, doubling up to startupBackoffCap, until
// config.Worker.StartupTimeout runs out.
const (
	startupBackoffFirst = 250 * time.Millisecond
	startupBackoffCap   = 5 * time.Second
	// startupAttemptTimeout bounds one attempt of a start-up check.
	startupAttemptTimeout = 5 * time.Second
	// defaultStartupTimeout applies when the configuration sets none.
	defaultStartupTimeout = time.Minute
)

// preflight is the start-up checks of one Run: what the worker needs
// before it may join the group. Each failure is one line naming what is
// wrong and what to do.
type preflight struct {
	cfg    config.Config
	db     *bun.DB
	kafka  *kafkaconn.Conn
	logger *slog.Logger
	// waiting, when set, is told what the checks wait for, for /readyz.
	waiting func(what string)
}

// listen and dependencies make every check in order, cheapest first;
// listen returns the bound admin listener (the caller serves on it). The database and
// the broker are retried until the start-up timeout, except a database
// answer that waiting will not heal (access denied, unknown database, a
// missing privilege: sqldb.Permanent), which fails at once; a missing key, an
// unusable admin address, a schema that is not current, a missing topic or
// a fetch limit below the topic's are not. The error wraps ErrStartup, and
// also config.ErrInvalid when the configuration itself is at fault. When
// ctx ends the checks stop at once with ctx's error.
//
// listen makes the checks that need no connection (the keys) and binds the
// admin address, which the caller serves on at once; dependencies makes
// the rest.
func (p *preflight) listen(ctx context.Context) (net.Listener, error) {
	if err := p.checkKeys(); err != nil {
		return nil, err
	}
	ln, err := admin.Listen(ctx, p.cfg.Admin.Addr)
	if err != nil {
		return nil, p.fail("admin", fmt.Errorf("%w: the address is unusable; free it or change admin.addr (PAYCB_ADMIN_ADDR)", err))
	}
	return ln, nil
}

// wait tells readiness what the checks wait for now.
func (p *preflight) wait(what string) {
	if p.waiting != nil {
		p.waiting("starting: " + what)
	}
}

// dependencies checks the database (and logs its engine,
// "engine=mariadb version=…"), its schema, the broker, the topics and the
// fetch limit. The database and the broker share one deadline, the
// start-up timeout.
func (p *preflight) dependencies(ctx context.Context) error {
	timeout := p.cfg.Worker.StartupTimeout
	if timeout <= 0 {
		timeout = defaultStartupTimeout
	}
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var engine dbengine.Info
	p.wait("waiting for the database (PAYCB_DB_DSN)")
	err := p.retry(deadline, ctx, timeout, "database", func(ctx context.Context) error {
		if err := sqldb.Ping(ctx, p.db, startupAttemptTimeout); err != nil {
			if _, permanent := sqldb.Permanent(err); permanent {
				return sqldb.PermanentError(p.cfg.DB.DSN, err)
			}
			return fmt.Errorf("PAYCB_DB_DSN (%s): %w", p.cfg.DB.DSN, err)
		}
		if sqldb.IsSQLite(p.db) {
			return nil
		}
		actx, cancel := context.WithTimeout(ctx, startupAttemptTimeout)
		defer cancel()
		var err error
		engine, err = dbengine.Detect(actx, p.db)
		return err
	}, func(err error) bool { _, permanent := sqldb.Permanent(err); return permanent })
	if err != nil {
		return err
	}
	if engine.Engine != "" {
		// What the server is, as the settlement will find it: never read
		// from its configurable VERSION().
		p.logger.Info("database engine", "engine", string(engine.Engine), "version", engine.Version)
	}
	p.wait("checking the schema")
	if err := p.checkSchema(ctx); err != nil {
		return err
	}
	var meta *kafka.MetadataResponse
	p.wait("waiting for the broker (PAYCB_KAFKA_BROKERS) and the topics")
	err = p.retry(deadline, ctx, timeout, "kafka", func(ctx context.Context) error {
		client, done := p.client()
		defer done()
		var err error
		meta, err = client.Metadata(ctx, &kafka.MetadataRequest{Topics: p.topics()})
		if err != nil {
			return p.kafka.Explain(fmt.Errorf("connect to kafka %v: %w", p.cfg.Kafka.Brokers, err))
		}
		return nil
	}, func(err error) bool { return errors.Is(err, kafkaconn.ErrRejected) })
	if err != nil {
		return err
	}
	if err := p.checkTopics(meta); err != nil {
		return err
	}
	return p.checkFetchLimit(ctx, meta)
}

// fail wraps err as the failure of the named check.
func (p *preflight) fail(check string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrStartup, check, err)
}

// checkKeys refuses to start a channel that needs an APIv3 key
// (channels.Spec.NeedsAPIv3Key) without any: every callback of it would be
// dead-lettered no_key.
func (p *preflight) checkKeys() error {
	if p.cfg.WeChat.HasAnyKey() {
		return nil
	}
	for _, code := range p.cfg.Worker.Channels {
		if spec, ok := channels.Lookup(channels.Channel(code)); !ok || !spec.NeedsAPIv3Key {
			continue
		}
		return p.fail("wechat", fmt.Errorf("%w: no APIv3 key is set while %s is in worker.channels (PAYCB_CHANNELS): "+
			"set wechat.apiv3_key (PAYCB_WECHAT_APIV3_KEY or PAYCB_WECHAT_APIV3_KEY_FILE) or per-tenant keys "+
			"(PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE), or leave %s out of PAYCB_CHANNELS", config.ErrInvalid, code, code))
	}
	return nil
}

// checkSchema refuses a database that is not migrated, or migrated to less
// than this binary expects; a newer schema (a rolling deploy) starts with a
// warning.
func (p *preflight) checkSchema(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startupAttemptTimeout)
	defer cancel()
	st, err := schema.Check(ctx, p.db)
	switch {
	case errors.Is(err, schema.ErrNotMigrated), errors.Is(err, schema.ErrOutdated):
		return p.fail("schema", fmt.Errorf("%w; run `consumer migrate` first", err))
	case err != nil:
		return p.fail("schema", err)
	}
	if len(st.Newer) > 0 {
		p.logger.Warn("database schema is newer than this binary; starting, as in a rolling deploy",
			"binary_version", st.Embedded, "newer_versions", st.Newer)
	}
	return nil
}

// topicCheck is a topic run needs, what it is for and the setting naming it.
type topicCheck struct{ name, role, setting string }

// wantTopics are the topics run needs: the input, the dead-letter and,
// unless settled events are off, the settled-event topic.
func (p *preflight) wantTopics() []topicCheck {
	want := []topicCheck{
		{p.cfg.Kafka.Topic, "input", "kafka.topic (PAYCB_KAFKA_TOPIC)"},
		{p.cfg.Kafka.DLQTopic, "dead-letter", "kafka.dlq_topic (PAYCB_KAFKA_DLQ_TOPIC)"},
	}
	if p.cfg.Settled.Enabled() {
		want = append(want, topicCheck{
			p.cfg.Settled.Topic, "settled-event",
			"settled.topic (PAYCB_SETTLED_TOPIC; none turns settled events off)",
		})
	}
	return want
}

// topics are the names of wantTopics.
func (p *preflight) topics() []string {
	var names []string
	for _, t := range p.wantTopics() {
		names = append(names, t.name)
	}
	return names
}

// checkTopics refuses to start when the input, the dead-letter or the
// settled-event topic does not exist: this binary never creates topics.
func (p *preflight) checkTopics(meta *kafka.MetadataResponse) error {
	for _, want := range p.wantTopics() {
		i := slices.IndexFunc(meta.Topics, func(t kafka.Topic) bool { return t.Name == want.name })
		var err error
		switch {
		case i < 0:
			err = kafka.UnknownTopicOrPartition
		case meta.Topics[i].Error != nil:
			err = meta.Topics[i].Error
		case len(meta.Topics[i].Partitions) == 0:
			err = errors.New("it has no partitions")
		}
		switch {
		case errors.Is(err, kafka.UnknownTopicOrPartition):
			return p.fail("kafka", fmt.Errorf("%s topic %q does not exist; this binary never creates topics: create it, or correct %s",
				want.role, want.name, want.setting))
		case err != nil:
			return p.fail("kafka", fmt.Errorf("%s topic %q: %w", want.role, want.name, err))
		}
	}
	return nil
}

// checkFetchLimit refuses a fetch limit below the largest message the input
// topic accepts: such a message could never be fetched, and its partition
// would stall on it. The topic's max.message.bytes is read from the broker;
// without it, the broker's message.max.bytes.
func (p *preflight) checkFetchLimit(ctx context.Context, meta *kafka.MetadataResponse) error {
	client, done := p.client()
	defer done()
	ctx, cancel := context.WithTimeout(ctx, startupAttemptTimeout)
	defer cancel()
	topic := p.cfg.Kafka.Topic
	limit, source, err := describeInt(ctx, client, kafka.ResourceTypeTopic, topic, "max.message.bytes")
	if err == nil && source == "" && len(meta.Brokers) > 0 {
		broker := strconv.Itoa(meta.Brokers[0].ID)
		limit, source, err = describeInt(ctx, client, kafka.ResourceTypeBroker, broker, "message.max.bytes")
	}
	if err != nil {
		return p.fail("kafka", fmt.Errorf("read the largest message topic %q accepts: %w", topic, err))
	}
	if source == "" {
		p.logger.Warn("the broker did not say how large a message the input topic accepts; fetch limit not checked", "topic", topic)
		return nil
	}
	if int64(p.cfg.Kafka.MaxBytes) < limit {
		return p.fail("kafka", fmt.Errorf("kafka.max_bytes (PAYCB_KAFKA_MAX_BYTES) is %d, below the %d bytes topic %q accepts (%s): "+
			"a message that large could never be fetched; set PAYCB_KAFKA_MAX_BYTES to at least %d",
			p.cfg.Kafka.MaxBytes, limit, topic, source, limit))
	}
	return nil
}

// describeInt reads one integer setting of a topic or broker. source is
// the setting's name, or "" when the broker returned no value.
func describeInt(ctx context.Context, client *kafka.Client, typ kafka.ResourceType, name, key string) (int64, string, error) {
	resp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{ResourceType: typ, ResourceName: name, ConfigNames: []string{key}}},
	})
	if err != nil {
		return 0, "", fmt.Errorf("describe configs: %w", err)
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return 0, "", fmt.Errorf("describe configs of %s: %w", name, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName != key || e.ConfigValue == "" {
				continue
			}
			v, err := strconv.ParseInt(e.ConfigValue, 10, 64)
			if err != nil {
				return 0, "", fmt.Errorf("%s of %s: %q is not a number", key, name, e.ConfigValue)
			}
			return v, key, nil
		}
	}
	return 0, "", nil
}

// client returns a Kafka client for the checks with a transport of its own,
// so that every attempt reads the brokers' metadata afresh rather than from
// a cache another client filled (kafka-go answers metadata requests from
// its transport's cache); done releases its connections. It connects as
// every other Kafka client of the binary does (TLS, SASL).
func (p *preflight) client() (*kafka.Client, func()) {
	base := p.kafka.Transport()
	t := &kafka.Transport{
		Dial:        base.Dial,
		DialTimeout: base.DialTimeout,
		ClientID:    base.ClientID,
		TLS:         base.TLS,
		SASL:        base.SASL,
		Resolver:    base.Resolver,
	}
	return &kafka.Client{Addr: kafka.TCP(p.kafka.Brokers()...), Timeout: startupAttemptTimeout, Transport: t}, t.CloseIdleConnections
}

// retry runs check until it succeeds, it fails permanently (permanent may
// be nil), or deadline ends, waiting with doubling backoff between attempts
// and logging each failure at WARN with its attempt count. When parent ends
// it returns parent's error at once; when only the deadline ends, the last
// failure, as the named check's.
func (p *preflight) retry(deadline, parent context.Context, timeout time.Duration, name string,
	check func(context.Context) error, permanent func(error) bool,
) error {
	wait := startupBackoffFirst
	var last error
	for attempt := 1; ; attempt++ {
		err := check(deadline)
		if err == nil {
			if attempt > 1 {
				p.logger.Info("start-up check passed", "check", name, "attempts", attempt)
			}
			return nil
		}
		if parent.Err() != nil {
			return parent.Err()
		}
		if permanent != nil && permanent(err) {
			return p.fail(name, err)
		}
		if deadline.Err() == nil || last == nil {
			// An attempt the deadline cut short says less than the one
			// before it.
			last = err
		}
		if deadline.Err() != nil {
			return p.fail(name, fmt.Errorf("still failing after %s (PAYCB_STARTUP_TIMEOUT), %d attempts: %w", timeout, attempt, last))
		}
		p.logger.Warn("start-up check failed; retrying", "check", name, "attempt", attempt,
			"retry_in", wait.String(), "error", err.Error())
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-deadline.Done():
			t.Stop()
			if parent.Err() != nil {
				return parent.Err()
			}
			return p.fail(name, fmt.Errorf("still failing after %s (PAYCB_STARTUP_TIMEOUT), %d attempts: %w", timeout, attempt, last))
		}
		wait = min(2*wait, startupBackoffCap)
	}
}

// neverCreateTopics returns a copy of d whose connections never ask a
// broker to create a topic. kafka-go's consumer group lists its topic's
// partitions with a metadata request that asks for auto-creation (at each
// rebalance, and in the leader's partition watch), so a topic deleted while
// the worker runs would come back empty under a broker that allows it. The
// connection clears that flag in every metadata request of versions 4 to 8
// (the versions kafka-go sends) before it leaves. TLS, when d has it, is
// done here, below the rewriting, as kafka-go would do it.
func neverCreateTopics(d *kafka.Dialer) *kafka.Dialer {
	out := *d
	tlsConfig := d.TLS
	out.TLS = nil
	dial := d.DialFunc
	if dial == nil {
		dial = (&net.Dialer{LocalAddr: d.LocalAddr, FallbackDelay: d.FallbackDelay, KeepAlive: d.KeepAlive}).DialContext
	}
	out.DialFunc = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if tlsConfig != nil {
			cfg := tlsConfig
			if cfg.ServerName == "" {
				cfg = tlsConfig.Clone()
				host, _, err := net.SplitHostPort(address)
				if err != nil {
					host = address
				}
				cfg.ServerName = host
			}
			tc := tls.Client(c, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = c.Close()
				return nil, err
			}
			c = tc
		}
		return &noAutoCreateConn{Conn: c}, nil
	}
	return &out
}

// noAutoCreateConn forwards whole request frames (a 4-byte big-endian size,
// then the request), clearing AllowAutoTopicCreation in metadata requests.
type noAutoCreateConn struct {
	net.Conn
	mu      sync.Mutex
	pending []byte
}

// Write implements net.Conn: it holds an incomplete frame until the rest
// arrives (kafka-go writes each request whole, then flushes).
func (c *noAutoCreateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, p...)
	for len(c.pending) >= 4 {
		size := int(binary.BigEndian.Uint32(c.pending))
		if len(c.pending) < 4+size {
			break
		}
		frame := c.pending[:4+size]
		clearAutoCreate(frame)
		if _, err := c.Conn.Write(frame); err != nil {
			return 0, err
		}
		c.pending = c.pending[4+size:]
	}
	if len(c.pending) == 0 {
		c.pending = nil
	}
	return len(p), nil
}

// metadataAPIKey is the Kafka protocol's Metadata request key.
const metadataAPIKey = 3

// clearAutoCreate clears AllowAutoTopicCreation in frame when it is a
// metadata request of version 4 to 8: the flag is its last byte up to
// version 7, and the third from last in version 8 (two flags follow it).
func clearAutoCreate(frame []byte) {
	if len(frame) < 8+3 || binary.BigEndian.Uint16(frame[4:]) != metadataAPIKey {
		return
	}
	switch v := binary.BigEndian.Uint16(frame[6:]); {
	case v >= 4 && v <= 7:
		frame[len(frame)-1] = 0
	case v == 8:
		frame[len(frame)-3] = 0
	}
}
