// Package deadletters is everything about dead letters, in one place:
// writing a message that can never succeed to the dead-letter topic with
// the contract's headers (KafkaWriter), once per message and kind (Once,
// through the record of each dead letter written, ss_dead_letter: Store),
// and the operators' back ends over them: reading the topic (ReadTopic,
// ReadAt), their status (States: open, resolved, closed), one in full
// (ViewOf), closing one with a note (CloseMessage) and redriving them to
// the input topic (Redrive). The worker uses it through its small
// DeadLetterer and DeadLetterRecords interfaces; cmd/consumer's dlq
// commands are flags and output over it.
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
//   - redrive a dead letter whose value was omitted (it would publish an
//     empty message);
//   - create a topic, or commit offsets for any group;
//   - import the worker or the operators' tools (internal/worker,
//     internal/ops): they import it.
package deadletters
