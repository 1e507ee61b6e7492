// Package channels turns one payment-channel callback, as carried in the
// worker's Kafka envelope, into one canonical event, or into a typed reason
// why not.
//
// Each channel is one package under pkg/channels: wechat (WeChat Pay API
// v3, WECHAT, JSON with an AES-256-GCM encrypted resource), alipay (Alipay
// trade_status_sync notifications, ALIPAY, form-urlencoded, amounts in
// yuan strings) and sqb (Shouqianba upay, SQB, JSON whose values are all
// strings). The wire formats and their traps are described, with their
// sources, in docs/channels.md; the envelope, key format and dead-letter
// kinds in docs/contract.md. This package is the core they share: the
// envelope, the canonical event and its fingerprint, the typed errors,
// amounts, the Decoder, the KeyProvider, the helpers a channel's decoder
// builds its Result with (kit.go) and the channel registry.
//
// # The channel registry: one package per channel, one place registers them
//
// A channel package holds everything the worker knows of its channel:
//
//   - its Spec (spec.go): code, name, content type, decoder (Spec.Decode),
//     refund model (PerRefund or CumulativeRefunds), cancel
//     (Spec.CancelRefundNo: Shouqianba's CANCELED, which nets a trade to
//     zero), the callback's and the statement's merchant fields, the
//     callback fields its fingerprint covers, and the facts the rest of
//     the worker asks instead of naming it: a refund that may name no
//     merchant (RefundMayNameNoMerchant), a need for an APIv3 key
//     (NeedsAPIv3Key), how an operator views its encrypted resource in
//     dlq show (ViewResource), and the query APIs messages send an
//     operator to (RefundQuery, OrderQuery);
//   - its statement parser (statement.go, parser.go: a statements.Parser,
//     with how a line's status reads, settled or cancel, and how the
//     statement's merchant maps to the binding's);
//   - its realistic sample callbacks and statements (sample.go,
//     sample_statement.go: a sample.Bodies), production code without
//     testing, so the demo can use them;
//   - its tests, fuzz targets, fixtures and published samples (testdata).
//
// Package statements cannot be named in a Spec (it imports this one), so
// the statement parsers and the sample builders have registries of their
// own, keyed by code (statements.ParserOf, sample.BodiesOf). One place
// registers a channel in all three: package allchannels, whose init adds
// each channel package's Spec, Parser and Bodies, in the fixed order
// every list of channels shows (WECHAT, ALIPAY, SQB), through the doors
// of pkg/internal/registry, which only packages under pkg can import. A
// binary or test that needs the channels imports allchannels (cmd/consumer,
// cmd/paycb-bench, config for PAYCB_CHANNELS' default, channelstest); no
// other production code can register a channel. channelstest.Register and
// RegisterParser, which need a testing.TB, add a test's own channel and
// remove it when the test ends. Reads of this registry are one atomic
// load, so decoding never takes a lock.
//
// All lists the channels in registration order, Lookup finds one by code;
// Channel.Valid, Cumulative, ContentType, HasCancel and CancelKey read
// them. The rest of the worker ranges over the registry instead of naming
// channels: the configuration's accepted channels and their default
// (PAYCB_CHANNELS), the metrics' label values (a channel not registered
// is UNKNOWN), the merchant binding, settlement's refund arithmetic and
// cancels, reconciliation's accounts and refund checks, the dead-letter
// view, the start-up checks, the demo's stream, and the tests; the
// conformance suite (internal/conformance) runs every registered channel.
//
// Adding a channel (UnionPay, say) is: a package unionpay under pkg/channels
// with its doc.go, spec.go, decode.go, statement.go, parser.go, sample.go,
// sample_statement.go, their tests and testdata; one line in
// allchannels.builtin(); and its section in docs/channels.md and
// docs/statements.md and its line in the README's layout. Nothing else
// names it, and internal/conformance then runs it.
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
//   - add to the channel registry but through allchannels, or
//     channelstest.Register in a test.
//
// A Decoder is stateless and safe for concurrent use. Package sample
// builds realistic envelopes of every registered channel for tests, demos
// and simulations.
package channels
