// Package idempotent is the claim store: the storage-layer judge of "already
// handled". A claim is a row in ss_channel_idempotent, unique per
// (tenant_id, idempotent_key); the database's unique index decides which of
// any number of concurrent acquirers made it, and nothing else does.
//
// The rules this package keeps, and must never break:
//
//   - Acquire and AcquireMany take the connection pool, never a caller's
//     transaction, and have committed the claim before they report
//     Acquired, so no business rollback can release it.
//   - Only a duplicate-key error on the claim's unique index means
//     "duplicate" (ClassifyDuplicate, which is pkg/dberr's one
//     classifier). Every other error is returned wrapped
//     and is never reported as a duplicate.
//   - Keys compare byte for byte (VARBINARY / BLOB columns); the key builder
//     (pkg/eventkey, whose Key and EventType this package's are) refuses
//     rather than truncates.
//   - Settle (and SettleMany, one UPDATE for all its claims) is a fence: inside the
//     caller's business transaction it moves a claim from ACQUIRED to
//     SETTLED only if it is still ACQUIRED (with the event's fingerprint,
//     when the caller gives one), so exactly one settler wins, however many
//     try. The one later change of a settled claim is MarkMoved: a
//     Shouqianba cancel's claim from NO_MONEY to POSTED when the payment it
//     reverses is settled.
//   - Claim rows are never deleted.
package idempotent
