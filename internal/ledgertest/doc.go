// Package ledgertest gives the tests of the tools that read and repair the
// ledger (internal/ops, internal/statementbook) one World: a migrated
// database with the claim store and settlement on it, fed decoded channel
// callbacks the way the worker feeds them (decode, claim, settle).
//
// This package must never:
//
//   - be imported by production code: it fails the test it is given;
//   - settle or claim other than through the claim store and settlement,
//     so what the tests read is what the worker would have written.
package ledgertest
