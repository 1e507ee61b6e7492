package worker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Dead-letter headers (contract).
const (
	HeaderErrorKind       = "x-error-kind"
	HeaderError           = "x-error"
	HeaderSourceTopic     = "x-source-topic"
	HeaderSourcePartition = "x-source-partition"
	HeaderSourceOffset    = "x-source-offset"
)

// maxErrorHeader bounds the x-error header: a readable message, not a dump.
const maxErrorHeader = 1024

// DeadLetterer writes messages that can never succeed to the dead-letter
// topic.
type DeadLetterer interface {
	// DeadLetter writes msg's key and value unchanged with the contract's
	// headers, and returns only once all in-sync replicas acknowledged it.
	DeadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error
}

// KafkaDeadLetterer writes dead letters with a kafka-go Writer that waits for
// acknowledgement from all in-sync replicas.
type KafkaDeadLetterer struct {
	w       *kafka.Writer
	timeout time.Duration
}

// NewKafkaDeadLetterer returns a dead-letter writer for topic on brokers;
// each write is bounded by timeout (default 10s). Close it when done.
func NewKafkaDeadLetterer(brokers []string, topic string, timeout time.Duration) *KafkaDeadLetterer {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &KafkaDeadLetterer{timeout: timeout, w: &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond,
		MaxAttempts:  3,
	}}
}

// DeadLetter implements DeadLetterer.
func (d *KafkaDeadLetterer) DeadLetter(ctx context.Context, msg kafka.Message, kind channels.ErrorKind, reason string) error {
	reason = strings.ToValidUTF8(reason, "?")
	if len(reason) > maxErrorHeader {
		reason = reason[:maxErrorHeader]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	out := kafka.Message{
		Key:   msg.Key,
		Value: msg.Value,
		Headers: []kafka.Header{
			{Key: HeaderErrorKind, Value: []byte(kind)},
			{Key: HeaderError, Value: []byte(reason)},
			{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
			{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
			{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
		},
	}
	if err := d.w.WriteMessages(ctx, out); err != nil {
		return fmt.Errorf("write dead letter (%s) for %s/%d@%d: %w", kind, msg.Topic, msg.Partition, msg.Offset, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (d *KafkaDeadLetterer) Close() error { return d.w.Close() }
