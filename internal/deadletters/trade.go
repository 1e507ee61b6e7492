package deadletters

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
)

// TradeQuery names one trade and how far back to look for its dead
// letters.
type TradeQuery struct {
	TenantID int64
	Channel  channels.Channel
	TradeNo  string
	// Kafka, when set, is scanned for the trade's dead letters in its
	// DLQTopic from Since on; nil reads only the ss_dead_letter table.
	Kafka *kafkaops.Kafka
	// Since bounds the dead-letter topic scan: only messages written at or
	// after it are read (the zero time reads everything retained).
	Since time.Time
	// Decoder decodes dead letters' values to find the trade they name;
	// nil decodes without WeChat keys (WeChat dead letters are then matched
	// by their Kafka key).
	Decoder *channels.Decoder
}

// ForTrade returns the dead letters that name q's trade: its
// ss_dead_letter rows and, when q.Kafka is set, the dead letters of the
// topic written since q.Since whose decoded event, or failing that whose
// Kafka key, names the trade; a row and a message that are the same dead
// letter (same source coordinates and kind) are one entry. It only reads.
// A missing dead-letter topic is an error wrapping
// kafkaops.ErrTopicNotFound.
func ForTrade(ctx context.Context, db bun.IDB, q TradeQuery) ([]TradeLetter, error) {
	recorded, err := tradeDeadLetterRows(ctx, db, q)
	if err != nil {
		return nil, err
	}
	if q.Kafka == nil {
		return recorded, nil
	}
	scanned, err := scanTradeLetters(ctx, *q.Kafka, q)
	if err != nil {
		return nil, err
	}
	return mergeDeadLetters(recorded, scanned), nil
}

// TradeLetter is one dead letter that names the trade, from the
// ss_dead_letter table, the dead-letter topic, or both (matched by source
// coordinates and kind).
type TradeLetter struct {
	Kind  string    `json:"kind"`
	Error string    `json:"error"`
	At    time.Time `json:"at"`
	// Source is where the original message was consumed from
	// (topic/partition@offset).
	Source string `json:"source"`
	// Position is where the dead letter is in the dead-letter topic
	// (topic/partition@offset); empty when the scan did not see it.
	Position string `json:"position,omitempty"`
	// MessageKey is the Kafka key of the dead letter (the original key).
	MessageKey string `json:"message_key,omitempty"`
	// IdempotentKey and Fingerprint are the decoded event's, when known.
	IdempotentKey string `json:"idempotent_key,omitempty"`
	Fingerprint   string `json:"fingerprint,omitempty"`
	// MatchedBy says how the dead letter was found to name the trade:
	// "event" (its decoded event), "key" (its Kafka key, the value not
	// decodable) or "table" (its ss_dead_letter row).
	MatchedBy string `json:"matched_by"`
	// Recorded is true when an ss_dead_letter row exists for it.
	Recorded  bool       `json:"recorded"`
	ClosedAt  *time.Time `json:"closed_at,omitempty"`
	ClosedBy  string     `json:"closed_by,omitempty"`
	CloseNote string     `json:"close_note,omitempty"`
}

// deadLetterRow is one ss_dead_letter row.
type deadLetterRow struct {
	Kind            string     `bun:"kind"`
	Error           string     `bun:"error"`
	SourceTopic     string     `bun:"source_topic"`
	SourcePartition int        `bun:"source_partition"`
	SourceOffset    int64      `bun:"source_offset"`
	IdempotentKey   *string    `bun:"idempotent_key"`
	Fingerprint     *string    `bun:"fingerprint"`
	CreatedAt       time.Time  `bun:"created_at"`
	ClosedAt        *time.Time `bun:"closed_at"`
	ClosedBy        *string    `bun:"closed_by"`
	CloseNote       *string    `bun:"close_note"`
}

func tradeDeadLetterRows(ctx context.Context, db bun.IDB, q TradeQuery) ([]TradeLetter, error) {
	var rows []deadLetterRow
	if err := db.NewSelect().TableExpr("ss_dead_letter").
		Column("kind", "error", "source_topic", "source_partition", "source_offset", "idempotent_key", "fingerprint",
			"created_at", "closed_at", "closed_by", "close_note").
		Where("tenant_id = ?", q.TenantID).Where("channel_code = ?", string(q.Channel)).Where("channel_trade_no = ?", q.TradeNo).
		OrderExpr("created_at, id").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("read dead letters of %s:%s: %w", q.Channel, q.TradeNo, err)
	}
	out := make([]TradeLetter, 0, len(rows))
	for _, r := range rows {
		out = append(out, TradeLetter{
			Kind: r.Kind, Error: r.Error, At: r.CreatedAt,
			Source:        r.SourceTopic + "/" + strconv.Itoa(r.SourcePartition) + "@" + strconv.FormatInt(r.SourceOffset, 10),
			IdempotentKey: value(r.IdempotentKey), Fingerprint: value(r.Fingerprint),
			MatchedBy: "table", Recorded: true,
			ClosedAt: r.ClosedAt, ClosedBy: value(r.ClosedBy), CloseNote: value(r.CloseNote),
		})
	}
	return out, nil
}

// scanTradeLetters reads the dead-letter topic from q.Since (the first
// offset of each partition written at or after it) to its end and keeps
// the dead letters that name the trade.
func scanTradeLetters(ctx context.Context, k kafkaops.Kafka, q TradeQuery) ([]TradeLetter, error) {
	parts, err := k.Partitions(ctx, k.DLQTopic)
	if err != nil {
		return nil, fmt.Errorf("scan dead letters: %w", err)
	}
	first, err := k.ListOffsets(ctx, k.DLQTopic, parts, kafka.FirstOffset)
	if err != nil {
		return nil, fmt.Errorf("scan dead letters: %w", err)
	}
	if !q.Since.IsZero() {
		// The earliest offset whose timestamp is at or after Since; -1 when
		// nothing that recent was written.
		from, err := k.ListOffsets(ctx, k.DLQTopic, parts, q.Since.UnixMilli())
		if err != nil {
			return nil, fmt.Errorf("scan dead letters: %w", err)
		}
		first = from
	}
	end, err := k.ListOffsets(ctx, k.DLQTopic, parts, kafka.LastOffset)
	if err != nil {
		return nil, fmt.Errorf("scan dead letters: %w", err)
	}
	dec := q.Decoder
	if dec == nil {
		dec = channels.NewDecoder(channels.StaticKeys{})
	}
	keyPrefix := string(q.Channel) + ":" + q.TradeNo
	var out []TradeLetter
	for _, p := range parts {
		if first[p] < 0 || end[p] <= first[p] {
			continue
		}
		msgs, err := kafkaops.ReadRange(ctx, k.Brokers, k.Conn.Dialer(), k.DLQTopic, p, first[p], end[p], 3*k.RequestTimeout())
		if err != nil {
			return nil, fmt.Errorf("scan dead letters: %w", err)
		}
		for _, m := range msgs {
			if !q.Since.IsZero() && m.Time.Before(q.Since) {
				continue
			}
			d, ok := matchDeadLetter(dec, q, keyPrefix, m)
			if !ok {
				continue
			}
			d.Position = k.DLQTopic + "/" + strconv.Itoa(m.Partition) + "@" + strconv.FormatInt(m.Offset, 10)
			out = append(out, d)
		}
	}
	return out, nil
}

// matchDeadLetter decodes m's headers and value and reports whether it
// names the trade: by its decoded event when the value decodes, else by
// its Kafka key "<CHANNEL>:<trade no>" (and the envelope's tenant, when the
// envelope can be read).
func matchDeadLetter(dec *channels.Decoder, q TradeQuery, keyPrefix string, m kafka.Message) (TradeLetter, bool) {
	dl := deadLetterOf(m)
	d := TradeLetter{At: m.Time.UTC(), MessageKey: string(m.Key), Kind: dl.Kind, Error: dl.Error, Source: dl.Source}
	res, err := dec.Decode(m.Value)
	if err == nil && res.Event.TradeNo != "" {
		ev := res.Event
		if ev.TenantID != q.TenantID || ev.Channel != q.Channel || ev.TradeNo != q.TradeNo {
			return d, false
		}
		d.MatchedBy, d.IdempotentKey, d.Fingerprint = "event", string(ev.Key), ev.Fingerprint
		return d, true
	}
	if string(m.Key) != keyPrefix {
		return d, false
	}
	var env struct {
		TenantID int64 `json:"tenant_id"`
	}
	if channels.DecodeJSON(m.Value, &env) == nil && env.TenantID != 0 && env.TenantID != q.TenantID {
		return d, false
	}
	d.MatchedBy = "key"
	return d, true
}

// mergeDeadLetters joins the table's rows and the topic's messages that
// are the same dead letter (same source coordinates and kind), keeping
// both sides' facts; the rest are listed as they are.
func mergeDeadLetters(recorded, scanned []TradeLetter) []TradeLetter {
	out := append([]TradeLetter(nil), recorded...)
	index := map[string]int{}
	for i, d := range out {
		index[d.Source+"\x00"+d.Kind] = i
	}
	for _, s := range scanned {
		i, ok := index[s.Source+"\x00"+s.Kind]
		if !ok {
			out = append(out, s)
			continue
		}
		r := &out[i]
		r.Position, r.MessageKey, r.MatchedBy = s.Position, s.MessageKey, s.MatchedBy
		if r.IdempotentKey == "" {
			r.IdempotentKey, r.Fingerprint = s.IdempotentKey, s.Fingerprint
		}
		if r.Error == "" {
			r.Error = s.Error
		}
	}
	return out
}
