package kafkaops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaconn"
)

// Option adjusts how the functions of this package reach the brokers.
type Option func(*options)

type options struct {
	conn *kafkaconn.Conn
}

// WithConn connects with c's TLS and SASL setting (its transport for
// writers and clients, its dialer for readers). Without it, connections
// are plain TCP with no authentication.
func WithConn(c *kafkaconn.Conn) Option {
	return func(o *options) { o.conn = c }
}

func apply(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (o options) client(brokers []string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: o.conn.Transport()}
}

// Message is one message to produce.
type Message struct {
	Key, Value []byte
	// Headers are the message's headers, in order; none when nil.
	Headers []kafka.Header
}

// Produce writes msgs to topic in order, keyed messages hashed to their
// partition (kafka-go's Hash, murmur2-compatible with the Java client's
// default partitioner), unkeyed ones spread round-robin. It returns once all
// in-sync replicas acknowledged every message.
func Produce(ctx context.Context, brokers []string, topic string, msgs []Message, opts ...Option) error {
	p := NewProducer(brokers, topic, opts...)
	err := p.Produce(ctx, msgs)
	if cerr := p.Close(); err == nil && cerr != nil {
		return fmt.Errorf("produce to %s: close the writer: %w", topic, cerr)
	}
	return err
}

// Producer is Produce's writer kept open, for a process that publishes
// message after message (the querier's answers): its connections and the
// topic's metadata are reused, and the messages of concurrent callers are
// sent in shared batches. It is safe for concurrent use; Close it when
// done.
type Producer struct {
	topic string
	w     *kafka.Writer
}

// NewProducer returns a Producer writing to topic as Produce does.
func NewProducer(brokers []string, topic string, opts ...Option) *Producer {
	return &Producer{topic: topic, w: &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Transport:    apply(opts).conn.Transport(),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    1000,
		BatchTimeout: 5 * time.Millisecond,
	}}
}

// Produce writes msgs in order, as the package's Produce does, and returns
// once all in-sync replicas acknowledged every one.
func (p *Producer) Produce(ctx context.Context, msgs []Message) error {
	const chunk = 1000
	for len(msgs) > 0 {
		n := min(chunk, len(msgs))
		out := make([]kafka.Message, n)
		for i, m := range msgs[:n] {
			out[i] = kafka.Message{Key: m.Key, Value: m.Value, Headers: m.Headers}
		}
		if err := p.w.WriteMessages(ctx, out...); err != nil {
			return fmt.Errorf("produce to %s: %w", p.topic, err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// Close flushes and closes the writer.
func (p *Producer) Close() error { return p.w.Close() }

// PartitionOf is the partition Produce sends key to on a topic of
// partitions partitions (kafka-go's murmur2 hash, as the Java client's
// default partitioner).
func PartitionOf(key []byte, partitions int) int {
	ids := make([]int, partitions)
	for i := range ids {
		ids[i] = i
	}
	return (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: key}, ids...)
}

// PartitionProgress is one partition's committed offset against its end.
type PartitionProgress struct {
	Partition int
	Committed int64 // -1 when the group committed nothing
	End       int64 // the next offset the partition will be given
}

// Lag is how many messages the group has not committed.
func (p PartitionProgress) Lag() int64 {
	if p.Committed < 0 {
		return p.End
	}
	return max(p.End-p.Committed, 0)
}

// Progress reads the group's committed offsets and each partition's end.
func Progress(ctx context.Context, brokers []string, group, topic string, opts ...Option) ([]PartitionProgress, error) {
	o := apply(opts)
	client := o.client(brokers)
	parts, err := o.conn.Partitions(ctx, brokers, topic)
	if err != nil {
		return nil, err
	}
	ends := make([]kafka.OffsetRequest, len(parts))
	for i, p := range parts {
		ends[i] = kafka.LastOffsetOf(p)
	}
	lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: ends}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	of, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	if of.Error != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, of.Error)
	}
	committed := map[int]int64{}
	for _, p := range of.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("fetch offset of %s/%d: %w", topic, p.Partition, p.Error)
		}
		committed[p.Partition] = p.CommittedOffset
	}
	var out []PartitionProgress
	for _, p := range lo.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("list offset of %s/%d: %w", topic, p.Partition, p.Error)
		}
		c, ok := committed[p.Partition]
		if !ok {
			c = -1
		}
		out = append(out, PartitionProgress{Partition: p.Partition, Committed: c, End: p.LastOffset})
	}
	return out, nil
}

// TotalLag sums Lag over partitions.
func TotalLag(ps []PartitionProgress) int64 {
	var n int64
	for _, p := range ps {
		n += p.Lag()
	}
	return n
}

// WaitConsumed polls Progress every interval until the group has committed
// every partition to its end, or ctx ends. report, when set, is called with
// each reading.
func WaitConsumed(ctx context.Context, brokers []string, group, topic string, interval time.Duration, report func([]PartitionProgress), opts ...Option) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ps, err := Progress(ctx, brokers, group, topic, opts...)
		if err == nil {
			if report != nil {
				report(ps)
			}
			if TotalLag(ps) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("wait for group %s: %w (last error: %w)", group, ctx.Err(), err)
			}
			return fmt.Errorf("wait for group %s: %w", group, ctx.Err())
		case <-t.C:
		}
	}
}

// ReadAll reads every message currently in topic, all partitions, in
// partition then offset order.
func ReadAll(ctx context.Context, brokers []string, topic string, opts ...Option) ([]kafka.Message, error) {
	o := apply(opts)
	dialer := o.conn.Dialer()
	parts, err := o.conn.Partitions(ctx, brokers, topic)
	if err != nil {
		return nil, err
	}
	return ReadRetained(ctx, brokers, o.client(brokers), dialer, topic, parts, 0)
}

// ReadRetained reads every message topic retains in parts, partition by
// partition from its first retained offset to its end, in partition then
// offset order. Reading one partition is bounded by perPartition (0: only
// by ctx), so a partition whose last offsets hold no readable record
// (transaction markers) cannot hang the caller.
func ReadRetained(ctx context.Context, brokers []string, client *kafka.Client, dialer *kafka.Dialer, topic string,
	parts []int, perPartition time.Duration,
) ([]kafka.Message, error) {
	first, err := ListOffsets(ctx, client, topic, parts, kafka.FirstOffset)
	if err != nil {
		return nil, err
	}
	end, err := ListOffsets(ctx, client, topic, parts, kafka.LastOffset)
	if err != nil {
		return nil, err
	}
	var out []kafka.Message
	for _, p := range parts {
		if end[p] <= first[p] {
			continue
		}
		msgs, err := ReadRange(ctx, brokers, dialer, topic, p, first[p], end[p], perPartition)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// ListOffsets asks client for one offset per partition of topic, one kind
// per request: ts is kafka.FirstOffset, kafka.LastOffset or a time in Unix
// milliseconds. A partition with no message at or after a time gets -1.
// Mixing first and last offsets of one partition in one request is unsafe:
// kafka-go files each answer by the timestamp the broker returns (-1 for
// both on real brokers), so one overwrites the other.
func ListOffsets(ctx context.Context, client *kafka.Client, topic string, parts []int, ts int64) (map[int]int64, error) {
	reqs := make([]kafka.OffsetRequest, len(parts))
	for i, p := range parts {
		reqs[i] = kafka.OffsetRequest{Partition: p, Timestamp: ts}
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	out := make(map[int]int64, len(parts))
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("list offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		// kafka-go files the answer by the timestamp the broker returned
		// (-1 for earliest and latest queries since v1), not by the query's.
		off := int64(-1)
		switch {
		case len(po.Offsets) > 0:
			for o := range po.Offsets {
				off = o
			}
		case po.LastOffset >= 0:
			off = po.LastOffset
		case ts == kafka.FirstOffset && po.FirstOffset >= 0:
			off = po.FirstOffset
		}
		out[po.Partition] = off
	}
	for _, p := range parts {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("list offsets of %s/%d: no answer", topic, p)
		}
	}
	return out, nil
}

// ErrTopicNotFound is returned, wrapped, when the topic an operation works
// on does not exist. The operations never create topics.
var ErrTopicNotFound = errors.New("topic does not exist")

// RequireTopic returns an error wrapping ErrTopicNotFound when topic does
// not exist, asking the brokers through client without letting them create
// it (kafka-go's Conn.ReadPartitions asks for auto-creation; its
// Client.Metadata does not). The request goes over a transport of its own
// (client's dial, TLS and SASL settings), so the answer is the brokers' now,
// not a cached one.
func RequireTopic(ctx context.Context, client *kafka.Client, topic string) error {
	c := *client
	base, _ := c.Transport.(*kafka.Transport)
	if base == nil {
		base = &kafka.Transport{}
	}
	fresh := &kafka.Transport{
		Dial: base.Dial, DialTimeout: base.DialTimeout, ClientID: base.ClientID,
		TLS: base.TLS, SASL: base.SASL, Resolver: base.Resolver,
	}
	defer fresh.CloseIdleConnections()
	c.Transport = fresh
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
			break
		}
		if t.Error != nil {
			return fmt.Errorf("read metadata of %s: %w", topic, t.Error)
		}
		return nil
	}
	return fmt.Errorf("topic %q: %w (check kafka.topic, PAYCB_KAFKA_TOPIC); nothing was created", topic, ErrTopicNotFound)
}

// TopicPartitions lists topic's partition IDs in ascending order
// (conn.Partitions; conn nil: plain TCP). A missing topic is an error
// wrapping ErrTopicNotFound (RequireTopic through client), and is never
// created: the partition listing would ask the brokers to create it.
func TopicPartitions(ctx context.Context, client *kafka.Client, conn *kafkaconn.Conn, brokers []string, topic string) ([]int, error) {
	if err := RequireTopic(ctx, client, topic); err != nil {
		return nil, err
	}
	return conn.Partitions(ctx, brokers, topic)
}

// ReadRange reads the messages of topic's partition p from offset from up
// to end (exclusive), connecting with dialer; the whole read is bounded by
// timeout (when positive), so a range whose last offsets hold no readable
// record (transaction markers) cannot hang the caller.
func ReadRange(ctx context.Context, brokers []string, dialer *kafka.Dialer, topic string, p int, from, end int64, timeout time.Duration) ([]kafka.Message, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, Dialer: dialer, MaxWait: 100 * time.Millisecond})
	defer func() { _ = r.Close() }()
	if err := r.SetOffset(from); err != nil {
		return nil, fmt.Errorf("read %s/%d: %w", topic, p, err)
	}
	out := make([]kafka.Message, 0, end-from)
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read %s/%d at %d of [%d, %d): %w", topic, p, len(out), from, end, err)
		}
		out = append(out, m)
		if m.Offset+1 >= end {
			return out, nil
		}
	}
}
