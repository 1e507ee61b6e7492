package kafkaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/tlsclient"
)

// ErrRejected is wrapped by the errors of Check and Explain when the brokers
// refused this client's security setting: SASL authentication failed, the
// SASL mechanism is not enabled on the brokers, or a TLS handshake failed.
// Retrying does not help; the setting must change.
var ErrRejected = errors.New("the brokers rejected the security setting")

// Conn is the connection setting shared by every Kafka client. The nil
// *Conn is valid and connects as kafka-go does by default: plain TCP, no
// authentication. A Conn is safe for concurrent use.
type Conn struct {
	brokers   []string
	tls       *tls.Config
	mechanism sasl.Mechanism
	username  string
	transport *kafka.Transport // nil: kafka.DefaultTransport
}

// New builds the connection setting from k: the CA bundle (PEM) and the
// optional client certificate and key are read now, TLS is at least 1.2,
// and the SASL mechanism is made ready. With TLS off and no SASL mechanism
// it returns a Conn whose clients behave exactly as kafka-go's defaults.
//
// Its errors name the setting at fault (its YAML key and environment
// variable) and never contain the password.
func New(k config.Kafka) (*Conn, error) {
	c := &Conn{brokers: slices.Clone(k.Brokers)}
	var err error
	// An empty server name: kafka-go verifies the host it dials.
	if c.tls, err = tlsclient.Config(k.TLS, tlsclient.Kafka, ""); err != nil {
		return nil, err
	}
	if c.mechanism, err = mechanism(k.SASL); err != nil {
		return nil, err
	}
	c.username = k.SASL.Username
	if c.tls != nil || c.mechanism != nil {
		c.transport = &kafka.Transport{
			// The same dialling as kafka.DefaultTransport.
			Dial: (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
			TLS:  c.tls,
			SASL: c.mechanism,
		}
	}
	return c, nil
}

func mechanism(s config.SASL) (sasl.Mechanism, error) {
	if s.Mechanism == "" {
		if s.Username != "" || s.Password.IsSet() {
			return nil, errors.New("kafka.sasl.mechanism (PAYCB_KAFKA_SASL_MECHANISM): required when a SASL username or password is set")
		}
		return nil, nil
	}
	if s.Username == "" {
		return nil, fmt.Errorf("kafka.sasl.username (PAYCB_KAFKA_SASL_USERNAME): required with mechanism %s", s.Mechanism)
	}
	if !s.Password.IsSet() {
		return nil, fmt.Errorf("kafka.sasl.password (PAYCB_KAFKA_SASL_PASSWORD): required with mechanism %s", s.Mechanism)
	}
	var algo scram.Algorithm
	switch s.Mechanism {
	case config.SASLPlain:
		return plain.Mechanism{Username: s.Username, Password: s.Password.Reveal()}, nil
	case config.SASLScramSHA256:
		algo = scram.SHA256
	case config.SASLScramSHA512:
		algo = scram.SHA512
	default:
		return nil, fmt.Errorf("kafka.sasl.mechanism (PAYCB_KAFKA_SASL_MECHANISM): %q is not one of %s, %s, %s",
			s.Mechanism, config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512)
	}
	m, err := scram.Mechanism(algo, s.Username, s.Password.Reveal())
	if err != nil {
		// The library's error quotes the value it refused, which may be
		// the password: name the setting instead.
		if _, uerr := scram.Mechanism(algo, s.Username, "x"); uerr != nil {
			return nil, fmt.Errorf("kafka.sasl.username (PAYCB_KAFKA_SASL_USERNAME): %s cannot use it (SASLprep refuses its characters)", s.Mechanism)
		}
		return nil, fmt.Errorf("kafka.sasl.password (PAYCB_KAFKA_SASL_PASSWORD): %s cannot use it (SASLprep refuses its characters)", s.Mechanism)
	}
	return m, nil
}

// Brokers returns the bootstrap brokers (nil for a nil Conn).
func (c *Conn) Brokers() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.brokers)
}

// Secured reports whether TLS or SASL is on.
func (c *Conn) Secured() bool { return c != nil && (c.tls != nil || c.mechanism != nil) }

// Dialer returns a new kafka-go dialer for readers and consumer groups
// (kafka.ReaderConfig.Dialer, kafka.ConsumerGroupConfig.Dialer): kafka-go's
// default dialer with this TLS and SASL setting. The caller may change the
// copy it gets.
func (c *Conn) Dialer() *kafka.Dialer {
	d := *kafka.DefaultDialer
	if c != nil {
		d.TLS = c.tls
		d.SASLMechanism = c.mechanism
	}
	return &d
}

// Transport returns the transport for writers and clients
// (kafka.Writer.Transport, kafka.Client.Transport). It is shared by every
// caller, so that they share its connections; for a nil or insecure Conn it
// is kafka.DefaultTransport itself. Do not modify it.
func (c *Conn) Transport() *kafka.Transport {
	if c != nil && c.transport != nil {
		return c.transport
	}
	if t, ok := kafka.DefaultTransport.(*kafka.Transport); ok {
		return t
	}
	return &kafka.Transport{}
}

// Client returns a client of the brokers using Transport, each request
// bounded by timeout (kafka-go's default, 5s, when zero or less).
func (c *Conn) Client(timeout time.Duration) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(c.Brokers()...), Timeout: max(timeout, 0), Transport: c.Transport()}
}

// Partitions lists topic's partition IDs in ascending order, asking each
// of brokers in turn over Dialer until one answers. A topic with no
// partition is an error; so is a broker list none of which answers (the
// last error, through Explain). Beware that the brokers may create a
// missing topic on this request (auto.create.topics.enable): a caller that
// must never create one checks that it exists first.
func (c *Conn) Partitions(ctx context.Context, brokers []string, topic string) ([]int, error) {
	d := c.Dialer()
	var lastErr error
	for _, b := range brokers {
		kc, err := d.DialContext(ctx, "tcp", b)
		if err != nil {
			lastErr = c.Explain(err)
			continue
		}
		ps, err := kc.ReadPartitions(topic)
		_ = kc.Close()
		if err != nil {
			lastErr = err
			continue
		}
		out := make([]int, 0, len(ps))
		for _, p := range ps {
			if p.Topic == topic {
				out = append(out, p.ID)
			}
		}
		slices.Sort(out)
		if len(out) == 0 {
			return nil, fmt.Errorf("read partitions of %s: topic has no partitions", topic)
		}
		return out, nil
	}
	if lastErr == nil {
		lastErr = errors.New("no brokers configured")
	}
	return nil, fmt.Errorf("read partitions of %s: %w", topic, lastErr)
}

// Check asks the brokers for their metadata once, which connects,
// completes the TLS handshake and authenticates. Its error goes through
// Explain: one that wraps ErrRejected means the security setting is
// wrong; any other (an unreachable broker, a timeout) may pass.
//
// Some brokers answer a failed SASL exchange by closing the connection, which
// reaches kafka-go as a bare EOF; Check follows the exchange on a transport
// of its own, so that it can still say that authentication failed.
func (c *Conn) Check(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := c.Client(timeout)
	var tracked *trackedMechanism
	if c.Secured() {
		tr := &kafka.Transport{Dial: c.transport.Dial, TLS: c.tls}
		if c.mechanism != nil {
			tracked = &trackedMechanism{Mechanism: c.mechanism}
			tr.SASL = tracked
		}
		defer tr.CloseIdleConnections()
		client.Transport = tr
	}
	_, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err == nil {
		return nil
	}
	return c.explain(fmt.Errorf("connect to kafka %v: %w", c.Brokers(), err), tracked != nil && tracked.unfinished())
}

// trackedMechanism records whether a SASL exchange was started and whether
// one completed.
type trackedMechanism struct {
	sasl.Mechanism
	started, completed atomic.Bool
}

func (m *trackedMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	sm, ir, err := m.Mechanism.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	m.started.Store(true)
	return trackedSession{sm, m}, ir, nil
}

// unfinished reports whether an exchange started and none completed.
func (m *trackedMechanism) unfinished() bool { return m.started.Load() && !m.completed.Load() }

type trackedSession struct {
	sasl.StateMachine
	m *trackedMechanism
}

func (s trackedSession) Next(ctx context.Context, challenge []byte) (bool, []byte, error) {
	done, resp, err := s.StateMachine.Next(ctx, challenge)
	if done && err == nil {
		s.m.completed.Store(true)
	}
	return done, resp, err
}

// Explain returns err prefixed with what a person should check when it
// comes from the security setting: SASL authentication refused, a SASL
// mechanism the brokers do not enable, a broker certificate that does not
// verify, or a broker that does not speak TLS. Such errors wrap ErrRejected
// as well as err. Any other error is returned unchanged, nil as nil.
func (c *Conn) Explain(err error) error {
	return c.explain(err, false)
}

// explain is Explain; saslUnfinished says that a SASL exchange started and
// the connection failed before it completed.
func (c *Conn) explain(err error, saslUnfinished bool) error {
	if err == nil {
		return nil
	}
	var mech, user string
	if c != nil && c.mechanism != nil {
		mech, user = c.mechanism.Name(), c.username
	}
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		verify     *tls.CertificateVerificationError
		recordHdr  tls.RecordHeaderError
		opErr      *net.OpError
		kafkaError kafka.Error
	)
	const checkCredentials = "check kafka.sasl.username and kafka.sasl.password (PAYCB_KAFKA_SASL_USERNAME, PAYCB_KAFKA_SASL_PASSWORD)" //nolint:gosec // names of settings, not a credential
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return rejected(err, "kafka sasl authentication failed: the brokers refused user %q with %s; %s", user, mech, checkCredentials)
	case saslUnfinished:
		return rejected(err, "kafka sasl authentication failed: the brokers closed the connection during the %s exchange for user %q; %s", mech, user, checkCredentials)
	case errors.Is(err, kafka.UnsupportedSASLMechanism):
		return rejected(err, "kafka sasl authentication failed: the brokers do not enable mechanism %s; check kafka.sasl.mechanism (PAYCB_KAFKA_SASL_MECHANISM)", mech)
	case errors.As(err, &kafkaError) && kafkaError == kafka.IllegalSASLState:
		return rejected(err, "kafka sasl authentication failed: the brokers expect another exchange; check kafka.sasl.mechanism (PAYCB_KAFKA_SASL_MECHANISM)")
	case errors.As(err, &unknownCA):
		return rejected(err, "kafka tls: the broker's certificate is signed by an authority not in kafka.tls.ca_file (PAYCB_KAFKA_TLS_CA_FILE) or the system roots")
	case errors.As(err, &hostname):
		return rejected(err, "kafka tls: the broker's certificate is not valid for the name dialled; check kafka.tls.server_name (PAYCB_KAFKA_TLS_SERVER_NAME)")
	case errors.As(err, &invalid), errors.As(err, &verify):
		return rejected(err, "kafka tls: the broker's certificate does not verify")
	case errors.As(err, &recordHdr):
		return rejected(err, "kafka tls: the broker did not answer in TLS; check kafka.tls.enabled (PAYCB_KAFKA_TLS_ENABLED) against the listener")
	case errors.As(err, &opErr) && opErr.Op == "remote error": // a TLS alert from the broker
		return rejected(err, "kafka tls: the broker refused the handshake, for example a missing or untrusted client certificate; check kafka.tls.cert_file and kafka.tls.key_file (PAYCB_KAFKA_TLS_CERT_FILE, PAYCB_KAFKA_TLS_KEY_FILE)")
	}
	return err
}

// rejectedError is an error caused by the security setting: its message
// says what to check, and it wraps both ErrRejected and the cause.
type rejectedError struct {
	msg   string
	cause error
}

func rejected(cause error, format string, a ...any) error {
	return &rejectedError{msg: fmt.Sprintf(format, a...), cause: cause}
}

func (e *rejectedError) Error() string   { return e.msg + ": " + e.cause.Error() }
func (e *rejectedError) Unwrap() []error { return []error{ErrRejected, e.cause} }

// Close closes the idle connections of a secured Conn's transport. Clients
// still using it reconnect on their next request.
func (c *Conn) Close() {
	if c != nil && c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}
