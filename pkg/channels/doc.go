// Package channels turns one payment-channel callback, as carried in the
// worker's Kafka envelope, into one canonical event, or into a typed reason
// why not.
//
// Three channels are understood: WeChat Pay API v3 (WECHAT, JSON with an
// AES-256-GCM encrypted resource), Alipay trade_status_sync notifications
// (ALIPAY, form-urlencoded, amounts in yuan strings) and Shouqianba upay
// (SQB, JSON whose values are all strings). The wire formats and their traps
// are described, with their sources, in docs/channels.md; the envelope, key
// format and dead-letter kinds in docs/contract.md.
//
// A fourth content type, ContentTypeStatement, carries no callback but an
// Event rebuilt from a channel statement, with the key and fingerprint the
// channel's callback of the same event has; NewStatementEvent and
// StatementEnvelope build it, the Decoder checks it like any input.
//
// A decoded callback is one of:
//
//   - a money-moving Event (PAYMENT_RECEIVED or REFUND_SUCCEEDED) with its
//     idempotency key and payload fingerprint;
//   - an ignored Result (no money moves: an unpaid close, a refund that is
//     not final, a failed operation), with the reason;
//   - an *Error whose ErrorKind is one of the contract's dead-letter kinds.
//
// Every failure is permanent: decoding the same bytes again gives the same
// answer, so the caller dead-letters it. There are no transient errors here.
//
// The amounts on an Event are the amounts the channel reported, never
// derived: the order total; for WeChat refunds this refund's own amount; for
// Alipay and Shouqianba refunds the cumulative amount refunded so far. How
// much one cumulative refund moves depends on what was recorded before, and
// is decided by settlement.
//
// This package must never:
//
//   - hold state or depend on what was seen before (refund deltas, "is there
//     a payment yet" belong to settlement);
//   - do I/O, log, or read the environment or clock (keys come through a
//     KeyProvider);
//   - import anything that talks to a database (bun, the MySQL and SQLite
//     drivers, pkg/idempotent, pkg/settlement, internal/sqldb): keys and
//     event types come from the pure pkg/eventkey, and a depguard rule in
//     .golangci.yml keeps it so;
//   - represent money as float64 (amounts are int64 fen, parsed from their
//     decimal text exactly);
//   - hash or key on the raw body: the fingerprint covers only the event
//     type, the reported amounts, the currency and the merchant order
//     number, so redeliveries that differ in delivery fields (Alipay
//     notify_time, WeChat id, nonce, ciphertext) fingerprint the same;
//   - put an APIv3 key into an error or a String.
//
// A Decoder is stateless and safe for concurrent use. Package channelstest
// builds realistic envelopes for tests, demos and simulations.
package channels
