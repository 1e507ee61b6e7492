package settlement

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
)

// outboxRow is one ss_settled_outbox row: a settled event written by the
// transaction that settled it, for the publisher to send after the commit.
type outboxRow struct {
	bun.BaseModel `bun:"table:ss_settled_outbox"`

	ID            int64  `bun:"id,pk,autoincrement"`
	TenantID      int64  `bun:"tenant_id"`
	IdempotentKey string `bun:"idempotent_key"`
	Channel       string `bun:"channel_code"`
	TradeNo       string `bun:"channel_trade_no"`
	TradeSeq      int64  `bun:"trade_seq"`
	EventType     string `bun:"event_type"`
	Source        string `bun:"source"`
	// Value is the encoded event (settled.Encode), published as it is.
	Value     []byte    `bun:"value"`
	SettledAt time.Time `bun:"settled_at"`
	// PublishedAt is notYetPublished when written; the row's published
	// column, 0 by default, says whether it was published, and
	// PublishedAt means something only once that is 1.
	PublishedAt time.Time `bun:"published_at"`
}

// notYetPublished is the published_at an outbox row is written with: a
// value, not NULL, so that marking the row published rewrites eight bytes
// in place rather than growing the row, which InnoDB does by rewriting the
// record (migration 0018 measured the difference: the mark's server CPU
// halved). Nothing reads it: published says whether the row was published.
var notYetPublished = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

// settledClaim names the claim a settled event is of and what it moved:
// the event's own claim, or the claim of a Shouqianba cancel whose
// reversal a payment's settlement posts.
type settledClaim struct {
	tenant     int64
	key        idempotent.Key
	typ        idempotent.EventType
	refundNo   string
	amount     int64
	occurredAt time.Time
	source     settled.Source
}

// claimOf is the settled claim of ev itself, which moved amount.
func claimOf(ev channels.Event, amount int64, src settled.Source) settledClaim {
	return settledClaim{
		tenant: ev.TenantID, key: ev.Key, typ: ev.Type, refundNo: ev.RefundNo, amount: amount,
		occurredAt: ev.OccurredAt, source: src,
	}
}

// outboxEvent advances the trade's counter on its locked order row ord and
// returns the row of c's settled event, whose order fields are view's (the
// order as it stands after c, which for a payment reversed at once is not
// yet ord's final state). now is the transaction's time.
func outboxEvent(ord *Order, view Order, c settledClaim, now time.Time) (outboxRow, error) {
	ord.SettledSeq++
	e := settled.Event{
		EventID:         settled.EventID(c.tenant, string(c.key)),
		EventType:       string(c.typ),
		TenantID:        c.tenant,
		Channel:         string(ord.Channel),
		ChannelTradeNo:  ord.TradeNo,
		MerchantOrderNo: ord.MerchantOrderNo,
		RefundNo:        c.refundNo,
		Amount:          c.amount,
		Currency:        ord.Currency,
		OrderStatus:     string(view.Status),
		OrderAmount:     view.Amount,
		RefundedAmount:  view.RefundedAmount,
		TradeSeq:        ord.SettledSeq,
		OccurredAt:      c.occurredAt.UTC(),
		SettledAt:       dbTime(now),
		Source:          c.source,
	}
	value, err := settled.Encode(e)
	if err != nil {
		return outboxRow{}, fmt.Errorf("%s: %w", c.key, err)
	}
	return outboxRow{
		TenantID: c.tenant, IdempotentKey: string(c.key), Channel: string(ord.Channel), TradeNo: ord.TradeNo,
		TradeSeq: e.TradeSeq, EventType: e.EventType, Source: string(e.Source), Value: value, SettledAt: e.SettledAt,
		PublishedAt: notYetPublished,
	}, nil
}

// insertOutbox writes the transaction's settled events with one INSERT. A
// duplicate key is an error like any other: the event's own key means its
// event was written without its claim (the ledger's check, made before,
// catches that first), a trade_seq already taken means two settlers
// advanced one counter, which the order row's lock (and on Galera and
// TiDB the write of that row) makes impossible.
func insertOutbox(ctx context.Context, tx bun.IDB, rows []outboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := tx.NewInsert().Model(&rows).
		Column("tenant_id", "idempotent_key", "channel_code", "channel_trade_no", "trade_seq", "event_type",
			"source", "value", "settled_at", "published_at").
		Returning("").Exec(ctx)
	if err != nil {
		return fmt.Errorf("write %d settled events: %w", len(rows), idempotent.ClassifyDuplicate(err))
	}
	return nil
}

// sourceOf is the source of events[i] in sources, which is nil (every
// event a callback's) or as long as the events; "" is a callback.
func sourceOf(sources []settled.Source, i int) settled.Source {
	if sources == nil || sources[i] == "" {
		return settled.SourceCallback
	}
	return sources[i]
}

// checkSources refuses a sources slice that does not fit evs.
func checkSources(evs []channels.Event, sources []settled.Source) error {
	if sources == nil {
		return nil
	}
	if len(sources) != len(evs) {
		return fmt.Errorf("%w: %d sources for %d events", ErrInvalidEvent, len(sources), len(evs))
	}
	for i, src := range sources {
		if src != "" && !src.Valid() {
			return fmt.Errorf("%w: %s: source %q", ErrInvalidEvent, evs[i].Key, src)
		}
	}
	return nil
}

// SourceOf is what produced a decoded money event, as its settled event's
// source says: a statement line's event (res.FromStatement) is a
// statement's, a channel's query answer's (res.FromQuery) a query's,
// anything else a callback's. It is the one place the source is derived.
func SourceOf(res channels.Result) settled.Source {
	switch {
	case res.FromStatement:
		return settled.SourceStatement
	case res.FromQuery:
		return settled.SourceQuery
	}
	return settled.SourceCallback
}

// AppendStoredEvent appends ev as a claim stores it (idempotent.Claim.Event):
// channels.Event's JSON (Event.AppendJSON) and, when src is not a callback,
// a "source" member beside its fields, which SettleStored reads back so that
// a claim settled without its message (the orphan sweeper, a redelivery
// finding it ACQUIRED, an operator) says what produced it. A callback's
// event is stored as before, byte for byte; channels.Event has no source
// field, so json.Unmarshal into it ignores the member.
func AppendStoredEvent(b []byte, ev channels.Event, src settled.Source) []byte {
	b = ev.AppendJSON(b)
	if src == settled.SourceCallback || !src.Valid() {
		return b
	}
	b = append(b[:len(b)-1], `,"source":"`...)
	b = append(b, src...)
	return append(b, `"}`...)
}

// storedOrigin reads, from the event stored on a claim (channels.Event as
// JSON), when the event occurred and what produced it: its "source" member
// when the worker stored one (channels.Event has no such field and
// ignores it), else a callback. ok is false when the claim holds no event
// that decodes.
func storedOrigin(stored []byte) (occurredAt time.Time, src settled.Source, ok bool) {
	if len(stored) == 0 {
		return time.Time{}, "", false
	}
	var v struct {
		OccurredAt time.Time      `json:"occurred_at"`
		Source     settled.Source `json:"source"`
	}
	if err := json.Unmarshal(stored, &v); err != nil || v.OccurredAt.IsZero() {
		return time.Time{}, "", false
	}
	if !v.Source.Valid() {
		v.Source = settled.SourceCallback
	}
	return v.OccurredAt.UTC(), v.Source, true
}
