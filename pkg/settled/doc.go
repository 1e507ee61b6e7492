// Package settled is the settled-event message for the systems downstream
// of the worker: one Kafka message on PAYCB_SETTLED_TOPIC for each
// settlement that moved money or changed an order's state
// (docs/contract.md, "Output: settled events"). It gives the value's type
// (Event, with the contract's JSON names), its deterministic encoder
// (Encode: the same event is always the same bytes, so a republished event
// is byte-for-byte the first), its strict decoder (Decode), the message key
// (MessageKey) and the header names and content type (HeaderEventID,
// HeaderContentType, ContentType). docs/settled-event.schema.json is the
// value's JSON Schema.
//
// A downstream service reads a trade's events in trade_seq order (1, 2, 3,
// … with no gaps, only increasing on the topic per trade, since a trade's
// events share a key and so a partition); at least once, so it drops a
// trade_seq it has already applied (see the example).
//
// The rules this package keeps:
//
//   - It imports the standard library only: nothing under internal/, nothing
//     that talks to a database or a broker, so a downstream service takes it
//     alone.
//   - Encode writes the members in the contract's order, times in UTC as
//     RFC 3339 with the fraction's trailing zeros dropped, and refuses an
//     event that fails Validate rather than write one.
//   - Decode refuses a value that is not one JSON object, a repeated member
//     name, a missing, null or mistyped member, a number that is not an
//     integer, and an event that fails Validate. It ignores members it does
//     not know, so that a later version may add one without breaking
//     readers of this one (the schema describes what this version writes,
//     and allows no others).
package settled
