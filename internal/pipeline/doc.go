// Package pipeline takes a partition's messages, a batch at a time (a
// single message is a batch of one), to durable outcomes: decode, the
// merchant check, the claims, settlement, or a dead letter (through
// internal/deadletters); and settles orphans (the Sweeper). Pipeline.Handle
// says, for each message (MessageState.Done), whether its outcome is
// durable: claimed and settled (by this worker or, through the fence, by
// another), a duplicate, an ignored event, a registration recorded, or a
// dead letter acknowledged by all in-sync replicas.
//
// A claim row commits in its own transaction before any business work, and
// the package never decides "already handled" itself: the claim store's
// unique index does (only a duplicate key means a message was handled
// before). The claim store is behind ClaimStore, which *idempotent.Store
// implements.
//
// A message goes down through the stages, a file each: Handle
// (pipeline.go) decodes it (decode.go; an event that moves no money is
// ignored there, a refund status applied; a registration is recorded
// instead of claimed, register.go), checks its merchant
// (merchant.go, with the hold of a Shouqianba refund that names none),
// claims the money events' keys (claim.go; small batches of several
// partitions together through the merger, merge.go), settles the claims it
// made or finishes those it found (settle.go), dead-letters a payload that
// conflicts with its key's claim (conflict.go) and whatever can never
// succeed (deadletter.go). The Sweeper (sweeper.go) settles claims left
// ACQUIRED whose message never comes again.
//
// The package never consumes the input topic nor commits an offset (the
// Sweeper only reads back an orphan's own message, for its dead letter):
// which offsets may be committed, and when, is the consumer's
// (internal/consumer), from the outcomes Handle reports. It holds no per-partition state; what a
// message's retries must remember travels in its MessageState.
package pipeline
