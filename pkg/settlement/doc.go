// Package settlement does the business work of a claimed payment-channel
// event: in one transaction it moves the claim to SETTLED through the claim
// store's fence, changes the channel order's row and inserts the balanced
// ledger postings. It also keeps refund pre-registrations (ss_refund_request)
// and operators' decisions on their mismatches (ss_refund_resolution,
// ResolveRefund: reconcile lists a finding so resolved as resolved while it
// is found the same), and offers an invariant reader (Check, Balances,
// Orders) for tests, the demo and reconciliation.
//
// Guarantees:
//
//   - Settling one claim any number of times, concurrently or in sequence,
//     writes its business rows at most once: the claim row is locked first
//     and the fence (idempotent.Store.Settle) commits with the business
//     writes. A rollback leaves the claim ACQUIRED and nothing else written.
//   - The order row is created by whichever event of a trade arrives first
//     and is always read with a locking read (SELECT … FOR UPDATE; on SQLite
//     the transaction already holds the write lock) before a decision is
//     made on it. Locks are always taken in the order claim, order,
//     registration, so settlers of one trade never deadlock each other.
//   - Final order rows and balances per (tenant, channel, trade, account) do
//     not depend on arrival order or duplicates. For cumulative-refund
//     channels (Alipay, Shouqianba) which refund key carries which part of
//     the refunded money does depend on arrival order; the totals do not.
//   - Money is int64 fen everywhere.
//
// This package must never:
//
//   - update or delete a ledger row, or insert one with a zero amount;
//   - decide from a plain (snapshot) read of a row it then changes;
//   - retry a settlement forever: a ledger unique-key hit means the event
//     was already posted (a bug bypassed the claim) and is settled once
//     without business writes, counted and logged;
//   - classify a duplicate key other than through idempotent.ClassifyDuplicate;
//   - acquire claims or talk to Kafka: that is the worker's job;
//   - change a refund registration on an operator's decision: its status is
//     what the channel's callbacks made it.
package settlement
