package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
)

// Dead-letter headers (contract).
const (
	HeaderErrorKind       = "x-error-kind"
	HeaderError           = "x-error"
	HeaderSourceTopic     = "x-source-topic"
	HeaderSourcePartition = "x-source-partition"
	HeaderSourceOffset    = "x-source-offset"
	// HeaderValueOmitted is present only on a dead letter whose value the
	// dead-letter topic refused for its size: the dead letter then has an
	// empty value and this header holds the original value's size in bytes
	// (decimal). The original is still at x-source-topic/x-source-partition
	// @x-source-offset while the input topic retains it.
	HeaderValueOmitted = "x-value-omitted"
)

// maxErrorHeader bounds the x-error header: a readable message, not a dump.
const maxErrorHeader = 1024

// defaultInputMaxBytes is the largest input message assumed when none is
// given: kafka-go's default batch limit, so a writer built without
// DeadLetterMaxMessageBytes behaves as before.
const defaultInputMaxBytes = 1 << 20

// headerRoom is what the dead-letter headers may add to an input message:
// the header names, x-error (at most maxErrorHeader bytes), a topic name (at
// most 249 bytes), the numbers and their length prefixes fit well within it.
const headerRoom = 4 << 10

// ErrDeadLetterTooLarge is returned (wrapped) by KafkaDeadLetterer.DeadLetter
// when the dead-letter topic refuses a message for its size even without its
// value: its key alone (with the headers) is over the topic's limit.
var ErrDeadLetterTooLarge = errors.New("dead letter too large even without its value")

// DeadLetterer writes messages that can never succeed to the dead-letter
// topic.
type DeadLetterer interface {
	// DeadLetter writes msg's key and value unchanged with the contract's
	// headers and msg's own x-paycb-statement-signature when it has one (or,
	// when the dead-letter topic refuses the message for its size, the key
	// with an empty value and HeaderValueOmitted), and returns only once
	// all in-sync replicas acknowledged it.
	DeadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error
}

// KafkaDeadLetterer writes dead letters with a kafka-go Writer that waits for
// acknowledgement from all in-sync replicas.
type KafkaDeadLetterer struct {
	w       *kafka.Writer
	timeout time.Duration
	logger  *slog.Logger
	repeats *logging.Suppressor // the writer's errors; cleared by a write
}

// DeadLetterOption configures a KafkaDeadLetterer.
type DeadLetterOption func(*deadLetterOptions)

type deadLetterOptions struct {
	inputMaxBytes int
	logger        *slog.Logger
	transport     kafka.RoundTripper
}

// DeadLetterTransport sets the transport the writer connects with: the
// Kafka TLS and SASL setting (kafkaconn.Conn.Transport). Nil keeps kafka-go's
// default transport: plain TCP, no authentication.
func DeadLetterTransport(t *kafka.Transport) DeadLetterOption {
	return func(o *deadLetterOptions) {
		if t != nil {
			o.transport = t
		}
	}
}

// DeadLetterMaxMessageBytes sets the largest message the input can deliver
// (the worker's fetch limit, PAYCB_KAFKA_MAX_BYTES), so that the writer
// itself never refuses a message the input delivered: its local limit is
// that size plus room for the dead-letter headers. Zero or less keeps the
// default, 1 MiB.
func DeadLetterMaxMessageBytes(n int) DeadLetterOption {
	return func(o *deadLetterOptions) {
		if n > 0 {
			o.inputMaxBytes = n
		}
	}
}

// DeadLetterLogger sets the logger that reports a dead letter written
// without its value and takes the kafka-go writer's own lines (default:
// slog.Default()).
func DeadLetterLogger(l *slog.Logger) DeadLetterOption {
	return func(o *deadLetterOptions) {
		if l != nil {
			o.logger = l
		}
	}
}

// NewKafkaDeadLetterer returns a dead-letter writer for topic on brokers;
// each write is bounded by timeout (default 10s). Close it when done.
//
// Each dead letter is sent in a produce request of its own, so the broker's
// size limit (the topic's max.message.bytes) judges that dead letter alone,
// never a batch of several.
func NewKafkaDeadLetterer(brokers []string, topic string, timeout time.Duration, opts ...DeadLetterOption) *KafkaDeadLetterer {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	o := deadLetterOptions{inputMaxBytes: defaultInputMaxBytes, logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	repeats := logging.NewSuppressor(o.logger)
	return &KafkaDeadLetterer{timeout: timeout, logger: o.logger, repeats: repeats, w: &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Transport:    o.transport,
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    1,
		BatchBytes:   int64(o.inputMaxBytes) + headerRoom,
		BatchTimeout: time.Millisecond,
		MaxAttempts:  3,
		Logger:       kafkaLogger(o.logger, slog.LevelDebug, nil),
		ErrorLogger:  kafkaLogger(o.logger, slog.LevelWarn, repeats),
	}}
}

// DeadLetter implements DeadLetterer. When the dead-letter topic (or the
// writer's own limit) refuses the message for its size, it writes instead
// the original key with an empty value, the same headers and
// HeaderValueOmitted. If that is refused for its size too, the error wraps
// ErrDeadLetterTooLarge. Any other error is returned as it is, for the
// caller to retry.
func (d *KafkaDeadLetterer) DeadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error {
	reason = strings.ToValidUTF8(reason, "?")
	if len(reason) > maxErrorHeader {
		reason = reason[:maxErrorHeader]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	headers := []kafka.Header{
		{Key: HeaderErrorKind, Value: []byte(kind)},
		{Key: HeaderError, Value: []byte(reason)},
		{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	}
	headers = keepSignature(headers, msg)
	err := d.write(ctx, kafka.Message{Key: msg.Key, Value: msg.Value, Headers: headers})
	if err == nil {
		return nil
	}
	if !tooLarge(err) {
		return fmt.Errorf("write dead letter (%s) for %s/%d@%d: %w", kind, msg.Topic, msg.Partition, msg.Offset, err)
	}
	refused := err
	headers = append(headers, kafka.Header{Key: HeaderValueOmitted, Value: []byte(strconv.Itoa(len(msg.Value)))})
	if err := d.write(ctx, kafka.Message{Key: msg.Key, Headers: headers}); err != nil {
		if tooLarge(err) {
			return fmt.Errorf("write dead letter (%s) for %s/%d@%d with a key of %d bytes: %w: %w",
				kind, msg.Topic, msg.Partition, msg.Offset, len(msg.Key), ErrDeadLetterTooLarge, err)
		}
		return fmt.Errorf("write dead letter (%s) for %s/%d@%d without its value: %w", kind, msg.Topic, msg.Partition, msg.Offset, err)
	}
	d.logger.Warn("dead letter written without its value: too large for the dead-letter topic",
		"kind", string(kind), "source_topic", msg.Topic, "source_partition", msg.Partition, "source_offset", msg.Offset,
		"value_bytes", len(msg.Value), "refusal", refused.Error())
	return nil
}

// keepSignature appends to headers the input message's
// x-paycb-statement-signature, when it has one, so that a statement event
// dead-lettered (for any reason, its value kept or omitted) can be
// redriven with it and verify again.
func keepSignature(headers []kafka.Header, msg kafka.Message) []kafka.Header {
	for _, h := range msg.Headers {
		if h.Key == statementauth.HeaderSignature {
			return append(headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	return headers
}

// statementSignature is msg's x-paycb-statement-signature header, "" when
// it has none.
func statementSignature(msg kafka.Message) string {
	for _, h := range msg.Headers {
		if h.Key == statementauth.HeaderSignature {
			return string(h.Value)
		}
	}
	return ""
}

// write writes one message, bounded by the writer's timeout.
func (d *KafkaDeadLetterer) write(ctx context.Context, m kafka.Message) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	if err := d.w.WriteMessages(ctx, m); err != nil {
		return err
	}
	d.repeats.Clear(ctx)
	return nil
}

// tooLarge reports whether a write of one message failed because the
// message is too large: refused by the writer's own limit
// (kafka.MessageTooLargeError) or by the broker (MESSAGE_TOO_LARGE,
// RECORD_LIST_TOO_LARGE).
func tooLarge(err error) bool {
	var local kafka.MessageTooLargeError
	if errors.As(err, &local) {
		return true
	}
	var each kafka.WriteErrors
	if errors.As(err, &each) {
		// One error per message written; a dead letter is written alone.
		n := 0
		for _, e := range each {
			if e == nil {
				continue
			}
			if !tooLarge(e) {
				return false
			}
			n++
		}
		return n > 0
	}
	return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge)
}

// Close flushes and closes the writer.
func (d *KafkaDeadLetterer) Close() error { return d.w.Close() }

// DeadLetterRecords is the record of the dead letters written
// (ss_dead_letter); *deadletters.Store is the implementation.
type DeadLetterRecords interface {
	// Recorded reports whether the dead letter id was written and
	// acknowledged before.
	Recorded(ctx context.Context, id deadletters.ID) (bool, error)
	// Record inserts r; a record already there is success.
	Record(ctx context.Context, r deadletters.Record) error
}

// ErrDeadLetterNotRecorded is wrapped by the error of a dead letter that
// was written and acknowledged but whose record could not be inserted: the
// message is retried, and the retry inserts the record without writing the
// dead letter again.
var ErrDeadLetterNotRecorded = errors.New("dead letter written but not recorded")

// maxUnrecorded bounds how many written-but-unrecorded dead letters a
// writer remembers (a database outage during a storm of dead letters).
const maxUnrecorded = 4096

// recordTimeout bounds the look-up and the insert of one record.
const recordTimeout = 5 * time.Second

// onceWriter writes each dead letter once: before the write it looks the
// record up (written by this or any earlier run, group or instance) and
// skips the write when it is there; after the acknowledged write it
// inserts the record. It remembers the dead letters written whose record
// insert failed, so that the message's retry inserts the record without a
// second write. The zero value is ready to use.
type onceWriter struct {
	mu         sync.Mutex
	unrecorded map[deadletters.ID]struct{}
}

// deadLetterWrite is one dead letter to write: the input message, its kind
// and reason, and its event as far as it decoded (the zero Event when the
// envelope did not parse; tenant and channel only when the body did not
// decode).
type deadLetterWrite struct {
	msg    kafka.Message
	kind   channels.ErrorKind
	reason string
	ev     channels.Event
}

// write writes d through dl unless recs holds its record, counts it in
// paycb_dead_letters_total when written, then records it in recs. With recs
// nil it only writes. An error wrapping ErrDeadLetterNotRecorded means the
// dead letter was written but not recorded; any other error means it was
// not written.
func (o *onceWriter) write(ctx context.Context, dl DeadLetterer, recs DeadLetterRecords, met *metrics.Metrics, logger *slog.Logger, d deadLetterWrite) error {
	if recs == nil {
		if err := dl.DeadLetter(ctx, d.msg, d.kind, d.reason); err != nil {
			return err
		}
		met.DeadLetter(metrics.DeadLetterKind(d.kind))
		return nil
	}
	id := deadletters.NewID(d.msg.Topic, d.msg.Partition, d.msg.Offset, d.msg.Key, d.msg.Value, string(d.kind))
	if !o.pending(id) {
		lctx, cancel := context.WithTimeout(ctx, recordTimeout)
		found, err := recs.Recorded(lctx, id)
		cancel()
		if err != nil {
			return err
		}
		if found {
			logger.Debug("dead letter already written for this message; not written again",
				"kind", string(d.kind), "topic", d.msg.Topic, "partition", d.msg.Partition, "offset", d.msg.Offset)
			return nil
		}
		if err := dl.DeadLetter(ctx, d.msg, d.kind, d.reason); err != nil {
			return err
		}
		met.DeadLetter(metrics.DeadLetterKind(d.kind))
		o.remember(id)
	}
	// The dead letter is written: record it even when ctx ends now.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := recs.Record(rctx, recordOf(id, d)); err != nil {
		return fmt.Errorf("%w: %w", ErrDeadLetterNotRecorded, err)
	}
	o.forget(id)
	return nil
}

// recordOf is the record of dead letter id: its event fields as far as
// the message decoded.
func recordOf(id deadletters.ID, d deadLetterWrite) deadletters.Record {
	r := deadletters.Record{ID: id, Error: d.reason}
	ev := d.ev
	if ev.TenantID > 0 {
		r.TenantID = ev.TenantID
	}
	if ev.Channel.Valid() {
		r.Channel = string(ev.Channel)
	}
	r.Key, r.Fingerprint, r.TradeNo = string(ev.Key), ev.Fingerprint, ev.TradeNo
	return r
}

func (o *onceWriter) pending(id deadletters.ID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.unrecorded[id]
	return ok
}

func (o *onceWriter) remember(id deadletters.ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.unrecorded == nil {
		o.unrecorded = map[deadletters.ID]struct{}{}
	}
	if len(o.unrecorded) >= maxUnrecorded {
		for old := range o.unrecorded { // forget one: at worst written twice
			delete(o.unrecorded, old)
			break
		}
	}
	o.unrecorded[id] = struct{}{}
}

func (o *onceWriter) forget(id deadletters.ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.unrecorded, id)
}
