// Package ops holds the operators' tools that sit beside the worker: resetting
// the consumer group's offsets to replay history (replay), listing and settling
// orphaned claims (orphans), clearing the bulky columns of old settled claims
// (purge), the group's live lag and stalls (status), everything held about
// one trade (trade) and writing a test stream to the input topic (publish).
// Its one job is these operator back ends; what they stand on lives
// elsewhere: the ledger's reconciliation in pkg/settlement
// (settlement.Reconcile, which consumer reconcile calls), the channel
// statements in internal/statementbook, and everything about dead letters
// (list, show, close, redrive, and a trade's) in internal/deadletters.
//
// Each tool is a function over explicit dependencies (a Kafka description, a
// bun.IDB, the claim store, a settler) that returns a report the cmd/consumer
// front ends print; nothing here reads flags or the environment. The SQL of
// Purge is MySQL/MariaDB's (UPDATE … LIMIT): the embedded SQLite database of
// the demo is not its target.
//
// This package must never:
//
//   - commit offsets for a group that has live members (the members' own
//     commits would overwrite the reset, or the reset theirs);
//   - delete a claim, ledger, order or registration row: purge clears only
//     event_json and last_error of SETTLED claims, and only beyond a floor
//     derived from the input topic's retention;
//   - decide "already handled" itself: replayed messages go back through the
//     worker, where the claim store's unique index decides;
//   - settle a claim other than through settlement's fence (SettleStored).
package ops
