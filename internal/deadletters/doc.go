// Package deadletters is everything about dead letters, in one place:
// writing a message that can never succeed to the dead-letter topic with
// the contract's headers (KafkaWriter), once per message and kind (Once,
// through the record of each dead letter written, ss_dead_letter: Store),
// and the operators' back ends over them: every dead letter, the topic's
// and the table's (List: one the topic lost is listed from its row, one
// without a row from the topic), each with a stable id (LetterID) and a
// status (open, resolved, redriven, duplicate, closed); one found by its id
// or position (Find) and shown in full (ViewOf); closing one with a note
// (Close); redriving them to the input topic (Redrive, after NoteRedriven
// recorded where each is); and the dead letters of one trade (ForTrade).
// A redrive that fails again is linked to the dead letter it came from
// (Store.Record), which it supersedes: an original message has at most
// one open dead letter. The worker uses the package through its small
// interfaces pipeline.DeadLetterer (Sender) and pipeline.DeadLetterRecords
// (Records); cmd/consumer's dlq commands are flags and output over it.
//
// This package must never:
//
//   - decide "already handled" or touch the claims, the orders or the
//     ledger: a redriven message goes back through the worker, where the
//     claim store's unique index decides; the status of a dead letter only
//     reads the claims;
//   - change a dead letter's key or value: a dead letter carries the
//     original unchanged (or, refused for its size, no value and
//     x-value-omitted), and a redrive republishes exactly that;
//   - redrive a dead letter whose value was omitted or whose body the topic
//     lost (it would publish an empty message);
//   - give a dead letter two successors (uk_dead_letter_redriven_from), or
//     delete a row: a dead letter the topic lost stays listed from it;
//   - create a topic, or commit offsets for any group;
//   - import the worker or the operators' tools (internal/consumer,
//     internal/pipeline, internal/ops): they import it.
package deadletters
