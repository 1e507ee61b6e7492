package settledpub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/logging"
)

// Writer writes messages to the settled-event topic; *kafka.Writer is the
// implementation (see NewKafkaWriter). A nil error means the broker
// acknowledged every message; an error may come as kafka.WriteErrors, one
// per message, nil for those acknowledged.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// maxWriteBytes and maxWriteMessages bound one write: under both, the
// messages of one write bound for one partition fit one batch of
// NewKafkaWriter's (kafka-go writes one partition's batches in order, and
// a batch is acknowledged or refused whole), so a later event of a trade is
// never acknowledged while an earlier one of the same write is refused.
//
// maxWriteMessages is also the writer's BatchSize, and kafka-go allocates
// a batch's message slice at that capacity (about 150 bytes a message) for
// every partition a write touches: a BatchSize of 1<<20 cost some 160 MB
// of garbage per partition per write, gigabytes of RSS and hundreds of
// milliseconds a publish. 128 messages keep that near 20 KB, and a
// sweeper's round of 500 rows takes a few writes.
const (
	maxWriteBytes    = 512 << 10
	maxWriteMessages = 128
)

// NewKafkaWriter is the writer of the settled-event topic: acknowledged by
// all in-sync replicas, keys placed by murmur2 as Java producers place
// them, and each write's messages for one partition sent as one batch (see
// maxWriteMessages). Each write is one attempt bounded by timeout (zero:
// DefaultPublishTimeout), never retried inside kafka-go: a retry still
// running after its caller gave up could land after the Sweeper published
// the same row and a later one of its trade; the Sweeper is the retry.
// transport is kafkaconn's (TLS, SASL); nil is kafka-go's default.
// kafka-go's errors are logged to logger at WARN (nil: discarded).
func NewKafkaWriter(brokers []string, topic string, transport kafka.RoundTripper, logger *slog.Logger, timeout time.Duration) *kafka.Writer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Transport:    transport,
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    maxWriteMessages,
		BatchBytes:   2 * maxWriteBytes,
		BatchTimeout: time.Millisecond,
		MaxAttempts:  1,
		WriteTimeout: or(timeout, DefaultPublishTimeout),
		ReadTimeout:  or(timeout, DefaultPublishTimeout),
		Logger:       logging.KafkaLogger(logger, slog.LevelDebug, nil),
		ErrorLogger:  logging.KafkaLogger(logger, slog.LevelWarn, logging.NewSuppressor(logger)),
	}
}

// publishable are the rows of own that may be published now, given every
// unpublished row of their trades (pending, trade by trade in trade_seq
// order): per trade, own's rows from the trade's first unpublished row up
// to the first that is not own's. blocked are own's other rows, which wait
// for an earlier event of their trade that someone else holds.
func publishable(pending []row, own map[int64]bool) (ready, blocked []row) {
	for i := 0; i < len(pending); {
		j := i
		for j < len(pending) && pending[j].trade() == pending[i].trade() {
			j++
		}
		open := true
		for _, r := range pending[i:j] {
			switch {
			case !own[r.ID]:
				open = false
			case open:
				ready = append(ready, r)
			default:
				blocked = append(blocked, r)
			}
		}
		i = j
	}
	return ready, blocked
}

// chunks cuts rows, in order, into writes of at most maxWriteMessages
// rows and maxWriteBytes of values (a larger value alone).
func chunks(rows []row) [][]row {
	var out [][]row
	for len(rows) > 0 {
		n, size := 0, 0
		for n < len(rows) && n < maxWriteMessages && (n == 0 || size+len(rows[n].Value) <= maxWriteBytes) {
			size += len(rows[n].Value)
			n++
		}
		out = append(out, rows[:n])
		rows = rows[n:]
	}
	return out
}

// writeChunk writes chunk's messages in one write and returns the ids the
// broker acknowledged.
func writeChunk(ctx context.Context, w Writer, chunk []row) ([]int64, error) {
	msgs := make([]kafka.Message, len(chunk))
	for i, r := range chunk {
		msgs[i] = r.message()
	}
	err := w.WriteMessages(ctx, msgs...)
	acked := make([]int64, 0, len(chunk))
	var werrs kafka.WriteErrors
	for i, r := range chunk {
		if err == nil || (errors.As(err, &werrs) && len(werrs) == len(chunk) && werrs[i] == nil) {
			acked = append(acked, r.ID)
		}
	}
	if err != nil {
		return acked, fmt.Errorf("publish %d settled events: %w", len(chunk), err)
	}
	return acked, nil
}

// write writes rows in order, a chunk at a time, and returns how many the
// broker acknowledged; it stops at the first write that fails, since a
// later write may hold a later event of a trade whose earlier one failed.
func write(ctx context.Context, w Writer, rows []row) (int, error) {
	done := 0
	for _, chunk := range chunks(rows) {
		acked, err := writeChunk(ctx, w, chunk)
		done += len(acked)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// layers deals rows (publishable, each trade's together in trade_seq
// order) into writes that hold at most one event of a trade: the k-th
// layer holds each trade's k-th row.
func layers(rows []row) [][]row {
	var out [][]row
	for i := 0; i < len(rows); {
		j := i
		for j < len(rows) && rows[j].trade() == rows[i].trade() {
			if k := j - i; k == len(out) {
				out = append(out, nil)
			}
			out[j-i] = append(out[j-i], rows[j])
			j++
		}
		i = j
	}
	return out
}

// send writes rows (publishable, each trade's together in trade_seq order)
// and marks published, after each write, those the broker acknowledged. A
// write holds at most one event of a trade (layers), and a trade's next
// event is written only after the write of the one before succeeded: a
// crash between a write and its marking then repeats at most that one
// event of each trade, after which the trade continues in order, so a
// trade's trade_seq never goes back on the topic. It stops at the first
// write that fails.
func send(ctx context.Context, db bun.IDB, w Writer, rows []row, now func() time.Time) (int, error) {
	var chunked [][]row
	for _, layer := range layers(rows) {
		chunked = append(chunked, chunks(layer)...)
	}
	done := 0
	for _, chunk := range chunked {
		acked, err := writeChunk(ctx, w, chunk)
		// Marked with a context of its own: an acknowledged event left
		// unmarked is published again.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		merr := markPublished(mctx, db, acked, now().UTC().Truncate(time.Microsecond))
		cancel()
		if merr == nil {
			done += len(acked)
		}
		if err != nil || merr != nil {
			return done, errors.Join(err, merr)
		}
	}
	return done, nil
}

// tradesOf are the distinct trades of items, in first-seen order.
func tradesOf[T any](items []T, of func(T) trade) []trade {
	var out []trade
	seen := map[trade]bool{}
	for _, it := range items {
		if t := of(it); !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}
