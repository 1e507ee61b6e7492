// Package channels turns one payment-channel callback, as carried in the
// worker's Kafka envelope, into one canonical event, or into a typed reason
// why not.
//
// Three channels are built in: WeChat Pay API v3 (WECHAT, JSON with an
// AES-256-GCM encrypted resource), Alipay trade_status_sync notifications
// (ALIPAY, form-urlencoded, amounts in yuan strings) and Shouqianba upay
// (SQB, JSON whose values are all strings). The wire formats and their traps
// are described, with their sources, in docs/channels.md; the envelope, key
// format and dead-letter kinds in docs/contract.md.
//
// # The channel registry: one place per channel
//
// Every channel is one Spec in the registry (registry.go): its code, name,
// content type, decoder (Spec.Decode), refund model (PerRefund or
// CumulativeRefunds), cancel (Spec.CancelRefundNo: Shouqianba's CANCELED,
// which nets a trade to zero), the callback's and the statement's merchant
// fields, the callback fields its fingerprint covers, and its metric
// label (Spec.MetricLabel, the code). All lists them in a fixed order
// (WECHAT, ALIPAY, SQB), Lookup finds one by code; Channel.Valid,
// Cumulative, ContentType, HasCancel and CancelKey read them. The rest of
// the worker ranges over the registry instead of naming channels: the
// configuration's accepted channels and their default (PAYCB_CHANNELS),
// the metrics' label values (a channel not registered is UNKNOWN), the
// merchant binding, settlement's refund arithmetic and cancels,
// reconciliation's accounts and refund checks, the demo's stream, and the
// tests that cover every channel.
//
// Statement parsers cannot be named here: package statements imports this
// one. It keeps its parsers keyed by Spec.Code (statements.ParserOf), and
// its TestParsersCoverRegistry fails for a registered channel without one;
// at run time statements.Parse refuses such a channel by name
// (statements.ErrNoParser), never with an empty statement. Likewise
// channelstest keeps each channel's test-body builders (channelstest.Bodies)
// and a test here checks that every registered channel has them.
//
// Adding a channel is: its decoder file here and its Spec in builtin(); its
// parser in package statements; its Bodies in channelstest. Nothing else
// names it. The registry is fixed when the package initialises: production
// code cannot add to it. The one door is channelstest.Register, which needs
// a testing.TB (so only a test binary can call it), reaches the registry
// through pkg/internal/registry (which only packages under
// pkg can import), and removes the channel when the test ends.
// Reads are one atomic load, so decoding never takes a lock.
//
// Another content type, ContentTypeStatement, carries no callback but an
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
//   - put an APIv3 key into an error or a String;
//   - add to the channel registry outside a test (channelstest.Register).
//
// A Decoder is stateless and safe for concurrent use. Package sample
// builds realistic envelopes of every registered channel for tests, demos
// and simulations.
package channels
