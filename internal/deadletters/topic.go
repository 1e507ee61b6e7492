package deadletters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/statementauth"
)

// HeaderRedrivenFrom is added to a redriven message: the dead letter it was
// copied from, as topic/partition@offset. The worker ignores it; it is for
// people reading the input topic.
const HeaderRedrivenFrom = "x-redriven-from"

// Message is one message of the dead-letter topic with its contract
// headers decoded.
type Message struct {
	Partition int
	Offset    int64
	Time      time.Time
	Key       []byte
	Value     []byte
	Kind      string
	Error     string
	Source    string // x-source-topic/x-source-partition@x-source-offset
	// SourceTopic is x-source-topic: where the message was consumed from.
	SourceTopic string
	// SourcePartition and SourceOffset are x-source-partition and
	// x-source-offset; -1 when the header is missing or not a number.
	SourcePartition int
	SourceOffset    int64
	// Headers are all the dead letter's headers, in order.
	Headers []kafka.Header
	// ValueOmitted is set when the dead letter carries x-value-omitted: the
	// dead-letter topic refused the message for its size, so Value is empty
	// and the original is only at Source (while the input topic retains it).
	ValueOmitted bool
	// OmittedBytes is x-value-omitted, the original value's size in bytes;
	// -1 when the header is not a decimal number, 0 when ValueOmitted is
	// false.
	OmittedBytes int64
	// BodyLost is set on a dead letter known only from its ss_dead_letter
	// row: the dead-letter topic no longer holds it (retention, or a topic
	// deleted and recreated). Its Key, Value and Headers are then empty,
	// Time is when the row was written, and Partition and Offset are its
	// last recorded position, -1 when none was recorded.
	BodyLost bool
	// topic is the dead-letter topic it was read from.
	topic string
}

// ErrValueOmitted is wrapped by the errors that refuse to redrive a dead
// letter whose value was omitted (Message.ValueOmitted).
var ErrValueOmitted = errors.New("value omitted from the dead letter")

// ErrBodyLost is wrapped by the errors that refuse to redrive a dead
// letter whose body the dead-letter topic no longer holds
// (Message.BodyLost).
var ErrBodyLost = errors.New("the dead-letter topic no longer holds the dead letter")

// RedriveRefusal returns nil when d can be redriven, or why not: an error
// wrapping ErrValueOmitted or ErrBodyLost that says where the original
// message is.
func (d Message) RedriveRefusal() error {
	if d.BodyLost {
		return fmt.Errorf("%w (retention, or the topic was recreated): its key and value are lost and there is nothing to redrive; the original was at %s while the input topic retains it; close it with a note once handled",
			ErrBodyLost, d.Source)
	}
	if !d.ValueOmitted {
		return nil
	}
	value := "its value"
	if d.OmittedBytes >= 0 {
		value = "its value (" + strconv.FormatInt(d.OmittedBytes, 10) + " bytes)"
	}
	return fmt.Errorf("%w: the message was too large for the dead-letter topic, so %s was left out and redriving would publish an empty message; the original is at %s while the input topic retains it",
		ErrValueOmitted, value, d.Source)
}

// Refusal is a dead letter that Redrive refuses, and why.
type Refusal struct {
	Message Message
	Reason  error // wraps ErrValueOmitted or ErrBodyLost
}

// SplitRedrive separates the dead letters Redrive accepts from those it
// refuses (RedriveRefusal), keeping their order.
func SplitRedrive(ds []Message) (ok []Message, refused []Refusal) {
	for _, d := range ds {
		if err := d.RedriveRefusal(); err != nil {
			refused = append(refused, Refusal{Message: d, Reason: err})
			continue
		}
		ok = append(ok, d)
	}
	return ok, refused
}

// Filter selects dead letters; zero fields select everything.
type Filter struct {
	Kind         string
	Since, Until time.Time // Since inclusive, Until exclusive
}

func (f Filter) match(d Message) bool {
	if f.Kind != "" && d.Kind != f.Kind {
		return false
	}
	if !f.Since.IsZero() && d.Time.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !d.Time.Before(f.Until) {
		return false
	}
	return true
}

// ReadTopic reads every dead letter currently retained in
// k.DLQTopic that f selects, in partition then offset order.
func ReadTopic(ctx context.Context, k kafkaops.Kafka, f Filter) ([]Message, error) {
	msgs, err := readTopic(ctx, k, k.DLQTopic)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if d := deadLetterOf(m); f.match(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// deadLetterOf decodes a message of the dead-letter topic.
func deadLetterOf(m kafka.Message) Message {
	d := Message{
		Partition: m.Partition, Offset: m.Offset, Time: m.Time, Key: m.Key, Value: m.Value,
		SourcePartition: -1, SourceOffset: -1, Headers: m.Headers, topic: m.Topic,
	}
	var part, off string
	for _, h := range m.Headers {
		switch h.Key {
		case HeaderErrorKind:
			d.Kind = string(h.Value)
		case HeaderError:
			d.Error = string(h.Value)
		case HeaderSourceTopic:
			d.SourceTopic = string(h.Value)
		case HeaderSourcePartition:
			part = string(h.Value)
			if n, err := strconv.Atoi(part); err == nil {
				d.SourcePartition = n
			}
		case HeaderSourceOffset:
			off = string(h.Value)
			if n, err := strconv.ParseInt(off, 10, 64); err == nil {
				d.SourceOffset = n
			}
		case HeaderValueOmitted:
			d.ValueOmitted = true
			d.OmittedBytes = -1
			if n, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && n >= 0 {
				d.OmittedBytes = n
			}
		}
	}
	d.Source = d.SourceTopic + "/" + part + "@" + off
	return d
}

// Position is where the dead letter is: dlqTopic/partition@offset, or
// "lost" for a dead letter whose body the topic no longer holds.
func (d Message) Position(dlqTopic string) string {
	if d.BodyLost {
		return "lost"
	}
	return dlqTopic + "/" + strconv.Itoa(d.Partition) + "@" + strconv.FormatInt(d.Offset, 10)
}

// At is a position in a topic: a partition and an offset (P:O on the
// command line).
type At struct {
	Partition int
	Offset    int64
}

// ParseAt parses "P:O" (partition and offset, both non-negative decimal).
func ParseAt(s string) (At, error) {
	p, o, ok := strings.Cut(s, ":")
	if !ok {
		return At{}, fmt.Errorf("%q is not PARTITION:OFFSET", s)
	}
	part, err1 := strconv.Atoi(p)
	off, err2 := strconv.ParseInt(o, 10, 64)
	if err1 != nil || err2 != nil || part < 0 || off < 0 {
		return At{}, fmt.Errorf("%q is not PARTITION:OFFSET (two non-negative numbers)", s)
	}
	return At{Partition: part, Offset: off}, nil
}

// String formats at as P:O.
func (a At) String() string { return strconv.Itoa(a.Partition) + ":" + strconv.FormatInt(a.Offset, 10) }

// ErrNoDeadLetter is returned (wrapped) by ReadAt when the
// dead-letter topic holds no message at the position asked for.
var ErrNoDeadLetter = errors.New("no dead letter there")

// ReadAt reads the one dead letter at a in k.DLQTopic. The error
// wraps ErrNoDeadLetter when the partition does not exist or the offset is
// not retained (say which offsets are).
func ReadAt(ctx context.Context, k kafkaops.Kafka, a At) (Message, error) {
	parts, err := k.Partitions(ctx, k.DLQTopic)
	if err != nil {
		return Message{}, fmt.Errorf("read dead letter %s: %w", a, err)
	}
	if !slices.Contains(parts, a.Partition) {
		return Message{}, fmt.Errorf("%s: %w: %s has partitions 0..%d", a, ErrNoDeadLetter, k.DLQTopic, len(parts)-1)
	}
	first, err := k.ListOffsets(ctx, k.DLQTopic, []int{a.Partition}, kafka.FirstOffset)
	if err != nil {
		return Message{}, fmt.Errorf("read dead letter %s: %w", a, err)
	}
	end, err := k.ListOffsets(ctx, k.DLQTopic, []int{a.Partition}, kafka.LastOffset)
	if err != nil {
		return Message{}, fmt.Errorf("read dead letter %s: %w", a, err)
	}
	lo, hi := first[a.Partition], end[a.Partition]
	if a.Offset < lo || a.Offset >= hi {
		return Message{}, fmt.Errorf("%s: %w: partition %d of %s holds offsets [%d, %d)", a, ErrNoDeadLetter, a.Partition, k.DLQTopic, lo, hi)
	}
	msgs, err := kafkaops.ReadRange(ctx, k.Brokers, k.Conn.Dialer(), k.DLQTopic, a.Partition, a.Offset, a.Offset+1, 3*k.RequestTimeout())
	if err != nil {
		return Message{}, fmt.Errorf("read dead letter %s: %w", a, err)
	}
	if len(msgs) == 0 || msgs[0].Offset != a.Offset {
		return Message{}, fmt.Errorf("%s: %w (a compacted or control record)", a, ErrNoDeadLetter)
	}
	return deadLetterOf(msgs[0]), nil
}

// KindSummary is the dead letters of one kind.
type KindSummary struct {
	Kind        string
	Count       int
	First, Last time.Time
}

// Summarize counts ds by kind with the earliest and latest
// message time, kinds in descending count order.
func Summarize(ds []Message) []KindSummary {
	byKind := map[string]*KindSummary{}
	for _, d := range ds {
		s := byKind[d.Kind]
		if s == nil {
			s = &KindSummary{Kind: d.Kind, First: d.Time, Last: d.Time}
			byKind[d.Kind] = s
		}
		s.Count++
		if d.Time.Before(s.First) {
			s.First = d.Time
		}
		if d.Time.After(s.Last) {
			s.Last = d.Time
		}
	}
	out := make([]KindSummary, 0, len(byKind))
	for _, s := range byKind {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// Redrive re-publishes each dead letter's original key and value, unchanged,
// to the input topic k.Topic, keyed as before (so a trade's events share a
// partition), with HeaderRedrivenFrom added and the statement signature
// the dead letter kept (x-paycb-statement-signature) restored. It returns
// once all in-sync replicas acknowledged every message. Redriving is safe
// to repeat: the worker's claim store decides whether each event was
// already handled. Call NoteRedriven first when a database is at hand, so
// that a redrive that fails again finds its dead letter by position.
//
// Redrive publishes nothing and returns an error wrapping ErrValueOmitted
// or ErrBodyLost when any of ds has its value omitted or its body lost;
// SplitRedrive separates those first. A dead letter larger than 1 MiB is
// published alone, so the input topic's size limit judges it as it judged
// the original.
func Redrive(ctx context.Context, k kafkaops.Kafka, ds []Message) error {
	if len(ds) == 0 {
		return nil
	}
	largest := 0
	for _, d := range ds {
		if err := d.RedriveRefusal(); err != nil {
			return fmt.Errorf("redrive %s/%d@%d: %w", k.DLQTopic, d.Partition, d.Offset, err)
		}
		largest = max(largest, len(d.Key)+len(d.Value))
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(k.Brokers...),
		Transport:    k.Conn.Transport(),
		Topic:        k.Topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    500,
		BatchTimeout: 5 * time.Millisecond,
		MaxAttempts:  5,
	}
	if largest+redriveHeaderRoom > defaultBatchBytes {
		w.BatchBytes = int64(largest + redriveHeaderRoom)
		w.BatchSize = 1
	}
	defer func() { _ = w.Close() }()
	const chunk = 500
	for start := 0; start < len(ds); start += chunk {
		batch := ds[start:min(start+chunk, len(ds))]
		msgs := make([]kafka.Message, len(batch))
		for i, d := range batch {
			from := k.DLQTopic + "/" + strconv.Itoa(d.Partition) + "@" + strconv.FormatInt(d.Offset, 10)
			msgs[i] = kafka.Message{Key: d.Key, Value: d.Value, Headers: redriveHeaders(d, from)}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("redrive to %s after %d of %d: %w", k.Topic, start, len(ds), err)
		}
	}
	return nil
}

// redriveHeaders are the headers of d's redriven message: HeaderRedrivenFrom
// from, and the input message's x-paycb-statement-signature, which the dead
// letter kept, so that a statement event verifies again.
func redriveHeaders(d Message, from string) []kafka.Header {
	hs := []kafka.Header{{Key: HeaderRedrivenFrom, Value: []byte(from)}}
	for _, h := range d.Headers {
		if h.Key == statementauth.HeaderSignature {
			hs = append(hs, kafka.Header{Key: h.Key, Value: h.Value})
			break
		}
	}
	return hs
}

// defaultBatchBytes is kafka-go's default limit on one produce batch.
const defaultBatchBytes = 1 << 20

// redriveHeaderRoom bounds what the x-redriven-from header and the record
// framing add to a dead letter's key and value.
const redriveHeaderRoom = 1 << 10

// readTopic reads every message currently retained in topic, partition by
// partition from its first retained offset to its end. Reading one
// partition is bounded by k.Timeout × 3 so a partition whose last offsets
// hold no readable record (transaction markers) cannot hang the tool.
func readTopic(ctx context.Context, k kafkaops.Kafka, topic string) ([]kafka.Message, error) {
	parts, err := k.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	return kafkaops.ReadRetained(ctx, k.Brokers, k.Client(), k.Conn.Dialer(), topic, parts, 3*k.RequestTimeout())
}
