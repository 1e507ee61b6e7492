// Package audit records the operators' actions that change state (a
// replay, a redrive, settling orphans, a purge, closing a dead letter,
// registering a refund, resolving a refund mismatch) in ss_operator_audit:
// who ran it, where, when, with which arguments and how it ended.
//
// It never records a secret: Arguments masks the value of every flag that
// carries one, and the environment is not recorded at all. Rows are only
// ever inserted, never updated or deleted.
package audit
