// Package eventkey is the contract's event types and idempotency keys: the
// one builder and parser of
//
//	<CHANNEL>:<channel trade no>:PAYMENT_RECEIVED
//	<CHANNEL>:<channel trade no>:REFUND_SUCCEEDED:<refund no>
//
// It is pure: strings in, a validated Key or an error out. Both the decoder
// (pkg/channels), which names each event by its key, and the claim store
// (pkg/idempotent), which stores it, use it, so that decoding a callback
// pulls in no database code.
//
// The rules this package keeps, and must never break:
//
//   - Keys compare byte for byte: "rf-1" and "RF-1" are two refunds; nothing
//     here folds case or trims.
//   - The builder refuses rather than truncates: empty parts, invalid UTF-8,
//     whitespace, control characters, a ':' outside the refund number and
//     keys over MaxKeyLen (191) bytes are errors wrapping ErrInvalidKey.
//   - It imports nothing that talks to a database (a depguard rule in
//     .golangci.yml keeps it so).
package eventkey
