// Package invariant is the one checker every fault test runs once a stream has
// been consumed to quiescence: it reads the claims, the ledger, the orders, the
// dead-letter topic and (when given) the workers' metrics, and says whether
// every distinct money event of the stream was settled exactly once and every
// message accounted for.
//
// It derives what the database must hold from the stream itself, by decoding
// every message with the channels' decoder, so a lost event and an event posted
// twice are counted by key, not inferred from totals. It only reads: it never
// settles, repairs or deletes anything (SweepOrphans, which settles claims left
// ACQUIRED, is a separate and explicit step).
package invariant
