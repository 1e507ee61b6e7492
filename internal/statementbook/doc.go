// Package statementbook is the statement book: the channels' daily
// statements, parsed by pkg/statements, recorded per tenant, channel and
// Beijing-time day, reconciled against the ledger, and the payments they
// show missing published back to the worker. Its one job is that second
// witness of the ledger; the worker reads where each tenant stands from it
// for its metrics, and cmd/consumer's statement commands are thin front
// ends over it.
//
//   - ImportStatement stores a statement (a WeChat or Alipay bill replaces
//     its merchants' lines of the day, Shouqianba responses merge per
//     order), and DayVersion names the lines a day holds;
//     CheckStatementMerchants checks a statement's merchants against the
//     merchant binding before it is imported; DeclareEmptyStatements
//     records the channel's answer that a day has no statement.
//   - ReconcileStatement compares a day with the merchant_payable postings
//     dated to it and records the day's result (ss_statement_reconcile).
//   - PublishMissing publishes, signed, the events the statement describes
//     exactly for the day's missing_in_ledger items, to the input topic.
//   - StatementStandings reads, for the worker's metrics, where each tenant
//     stands with each channel's statements.
//
// Every function takes the database (and, to publish, the input topic) as
// an explicit dependency and reads no flags or environment.
//
// This package must never:
//
//   - claim, settle or post: a missing payment goes back through the input
//     topic to the worker, whose claim store's unique index decides
//     "already handled" (a callback arriving later is a duplicate);
//   - publish an event the statement does not describe exactly (a
//     cumulative channel's refund, an order total it cannot know), or one
//     unsigned, or from a day whose lines changed since it was reconciled;
//   - record a day as reconciled when nothing is imported for it and it is
//     not declared empty;
//   - remove another merchant's lines of a day when importing a bill, or
//     any Shouqianba line but the one a newer response supersedes;
//   - parse a channel's file itself: pkg/statements does, without a
//     database.
package statementbook
