package deadletters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/textcut"
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
// WithMaxMessageBytes behaves as before.
const defaultInputMaxBytes = 1 << 20

// headerRoom is what the dead-letter headers may add to an input message:
// the header names, x-error (at most maxErrorHeader bytes), a topic name (at
// most 249 bytes), the numbers and their length prefixes fit well within it.
const headerRoom = 4 << 10

// ErrTooLarge is returned (wrapped) by KafkaWriter.Message
// when the dead-letter topic refuses a message for its size even without its
// value: its key alone (with the headers) is over the topic's limit.
var ErrTooLarge = errors.New("dead letter too large even without its value")

// Sender writes messages that can never succeed to the dead-letter topic;
// *KafkaWriter is the implementation.
type Sender interface {
	// DeadLetter writes msg's key and value unchanged with the contract's
	// headers and msg's own x-paycb-statement-signature and x-redriven-from
	// when it has them (or,
	// when the dead-letter topic refuses the message for its size, the key
	// with an empty value and HeaderValueOmitted), and returns only once
	// all in-sync replicas acknowledged it.
	DeadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error
}

// KafkaWriter writes dead letters with a kafka-go Writer that waits for
// acknowledgement from all in-sync replicas.
type KafkaWriter struct {
	w       *kafka.Writer
	timeout time.Duration
	logger  *slog.Logger
	repeats *logging.Suppressor // the writer's errors; cleared by a write
}

// WriterOption configures a KafkaWriter.
type WriterOption func(*writerOptions)

type writerOptions struct {
	inputMaxBytes int
	logger        *slog.Logger
	transport     kafka.RoundTripper
}

// WithTransport sets the transport the writer connects with: the
// Kafka TLS and SASL setting (kafkaconn.Conn.Transport). Nil keeps kafka-go's
// default transport: plain TCP, no authentication.
func WithTransport(t *kafka.Transport) WriterOption {
	return func(o *writerOptions) {
		if t != nil {
			o.transport = t
		}
	}
}

// WithMaxMessageBytes sets the largest message the input can deliver
// (the worker's fetch limit, PAYCB_KAFKA_MAX_BYTES), so that the writer
// itself never refuses a message the input delivered: its local limit is
// that size plus room for the dead-letter headers. Zero or less keeps the
// default, 1 MiB.
func WithMaxMessageBytes(n int) WriterOption {
	return func(o *writerOptions) {
		if n > 0 {
			o.inputMaxBytes = n
		}
	}
}

// WithLogger sets the logger that reports a dead letter written
// without its value and takes the kafka-go writer's own lines (default:
// slog.Default()).
func WithLogger(l *slog.Logger) WriterOption {
	return func(o *writerOptions) {
		if l != nil {
			o.logger = l
		}
	}
}

// NewKafkaWriter returns a dead-letter writer for topic on brokers;
// each write is bounded by timeout (default 10s). Close it when done.
//
// Each dead letter is sent in a produce request of its own, so the broker's
// size limit (the topic's max.message.bytes) judges that dead letter alone,
// never a batch of several.
func NewKafkaWriter(brokers []string, topic string, timeout time.Duration, opts ...WriterOption) *KafkaWriter {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	o := writerOptions{inputMaxBytes: defaultInputMaxBytes, logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	repeats := logging.NewSuppressor(o.logger)
	return &KafkaWriter{timeout: timeout, logger: o.logger, repeats: repeats, w: &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Transport:    o.transport,
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    1,
		BatchBytes:   int64(o.inputMaxBytes) + headerRoom,
		BatchTimeout: time.Millisecond,
		MaxAttempts:  3,
		Logger:       logging.KafkaLogger(o.logger, slog.LevelDebug, nil),
		ErrorLogger:  logging.KafkaLogger(o.logger, slog.LevelWarn, repeats),
	}}
}

// DeadLetter implements Sender. When the dead-letter topic (or the
// writer's own limit) refuses the message for its size, it writes instead
// the original key with an empty value, the same headers and
// HeaderValueOmitted. If that is refused for its size too, the error wraps
// ErrTooLarge. Any other error is returned as it is, for the
// caller to retry.
func (d *KafkaWriter) DeadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error {
	reason = textcut.Truncate(reason, maxErrorHeader)
	headers := []kafka.Header{
		{Key: HeaderErrorKind, Value: []byte(kind)},
		{Key: HeaderError, Value: []byte(reason)},
		{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	}
	headers = keepHeaders(headers, msg)
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
				kind, msg.Topic, msg.Partition, msg.Offset, len(msg.Key), ErrTooLarge, err)
		}
		return fmt.Errorf("write dead letter (%s) for %s/%d@%d without its value: %w", kind, msg.Topic, msg.Partition, msg.Offset, err)
	}
	d.logger.Warn("dead letter written without its value: too large for the dead-letter topic",
		"kind", string(kind), "source_topic", msg.Topic, "source_partition", msg.Partition, "source_offset", msg.Offset,
		"value_bytes", len(msg.Value), "refusal", refused.Error())
	return nil
}

// keepHeaders appends to headers the input message's
// x-paycb-statement-signature, when it has one, so that a statement event
// dead-lettered (for any reason, its value kept or omitted) can be
// redriven with it and verify again; and its x-redriven-from, when it was
// a redrive, so that the dead letter of a redrive that failed again names
// the dead letter it was redriven from.
func keepHeaders(headers []kafka.Header, msg kafka.Message) []kafka.Header {
	for _, key := range []string{statementauth.HeaderSignature, HeaderRedrivenFrom} {
		for _, h := range msg.Headers {
			if h.Key == key {
				headers = append(headers, kafka.Header{Key: h.Key, Value: h.Value})
				break
			}
		}
	}
	return headers
}

// write writes one message, bounded by the writer's timeout.
func (d *KafkaWriter) write(ctx context.Context, m kafka.Message) error {
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
func (d *KafkaWriter) Close() error { return d.w.Close() }
