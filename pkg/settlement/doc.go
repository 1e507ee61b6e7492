// Package settlement does the business work of claimed payment-channel
// events: in one transaction it changes the channel orders' rows, inserts
// the balanced ledger postings and moves the claims to SETTLED through the
// claim store's fence (Service.SettleBatch; Service.Settle is a batch of
// one, Service.SettleStored settles from the event stored on a claim), and
// in that same transaction writes the settled event of every claim it
// settles POSTED to the outbox (ss_settled_outbox, the value encoded by
// pkg/settled, one INSERT per transaction), numbered per trade by the
// order row's counter (Order.SettledSeq); Service.SettleBatchFrom,
// Service.SettleMergedFrom and Service.SettleFrom say what produced each
// event (settled.Source). It also keeps refund pre-registrations (ss_refund_request:
// Service.RegisterRefund, Service.ApplyRefundStatus) and payment registrations
// (ss_payment_registration: Service.RegisterPayment; every settlement that
// posts a payment makes the registration of its merchant order number
// SUCCEEDED in its own transaction, and Service.SettleFromOrders is the
// backstop for engines whose locking reads miss a concurrent insert), and operators'
// decisions on their mismatches (ss_refund_resolution, ResolveRefund:
// reconcile lists a finding so resolved as resolved while it is found the
// same), reconciles claims, ledger, orders and registrations read-only
// (Reconcile, whose checks Checks lists), and reads balances and orders
// for tests, the demo and reconciliation (Balances, Orders, GetOrder,
// Totals).
//
// Guarantees:
//
//   - Settling one claim any number of times, concurrently or in sequence,
//     writes its business rows at most once: the fence
//     (idempotent.Store.SettleMany, one conditional UPDATE for every claim
//     of the transaction whatever their tenants, last in the transaction)
//     moves only claims still ACQUIRED with the event's
//     fingerprint and commits with the business writes; when it does not
//     hold, the transaction rolls back and runs again reading the claims,
//     leaving out those another settler won (FenceLost). A rollback leaves
//     the claims ACQUIRED and nothing else written.
//   - Every decision (decide, decideCancel) is made in memory on order rows
//     locked with SELECT … FOR UPDATE (on SQLite the transaction already
//     holds the write lock); an order row is created by whichever event of
//     a trade arrives first (for a large batch on MySQL, created and
//     committed beforehand by createOrders). Locks are taken in one order:
//     order rows (by id), then registrations, then the claims by the fence,
//     so settlers of one trade never deadlock each other on it. A batch
//     never waits for an order row another transaction holds while it holds
//     its other locks: it skips the trade (FOR UPDATE SKIP LOCKED) and
//     settles it in a second transaction that waits; on TiDB, which does
//     not honour SKIP LOCKED, it waits at once.
//   - The results of a batch are those of settling its events one after
//     another in order; events of one trade stay together and in order.
//   - A claim settled POSTED has exactly one settled event, written by the
//     transaction that made it POSTED (a rollback writes none); NO_MONEY
//     and OVER_REFUND have none. A trade's events are numbered 1, 2, 3, …
//     without gaps in settlement order; their amounts, payments less
//     refunds, are the trade's ledger; the last one's order fields are the
//     order row.
//   - Final order rows and balances per (tenant, channel, trade, account) do
//     not depend on arrival order or duplicates (the settled-event counter
//     aside: how many cumulative refunds move money does). For cumulative-refund
//     channels (Alipay, Shouqianba) which refund key carries which part of
//     the refunded money does depend on arrival order; the totals do not. A
//     Shouqianba cancel nets its trade to zero whatever arrives before or
//     after it (docs/design.md).
//   - Money is int64 fen everywhere.
//   - Its metrics are defined here (metrics.go), with bounded label values,
//     and registered on the registerer given to New; it imports nothing
//     under internal/.
//
// This package must never:
//
//   - update or delete a ledger row, or insert one with a zero amount;
//   - decide from a plain (snapshot) read of a row it then changes;
//   - retry a settlement forever: a lost race, a deadlock or a write
//     conflict runs the transaction again twice at most; a ledger
//     unique-key hit means the event was already posted (a bug bypassed the
//     claim) and is settled once without business writes, counted and
//     logged;
//   - classify a duplicate key other than through idempotent.ClassifyDuplicate;
//   - acquire claims or talk to Kafka: that is the worker's job;
//   - change a refund registration on an operator's decision: its status is
//     what the channel's callbacks made it.
package settlement
