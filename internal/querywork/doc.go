// Package querywork is the querier's work store (querier.Work) over the
// registration tables: which open payment and refund registrations are
// due to be asked about, leased to one querier at a time, and what each
// ask answered (ss_query_log, migration 0017).
//
// A lease is one conditional UPDATE writing the querier's name, a random
// token of the round and the lease's end, then a read back by token (as
// internal/settledpub's sweeper claims outbox rows): on every engine
// (InnoDB, TiDB in either mode, Galera) two queriers never hold one
// registration at once, and no SKIP LOCKED is needed. Record is
// conditional on that owner and token: a querier whose lease ran out
// changes nothing (ErrLeaseLost).
//
// Before it leases, the store runs the settlement backstop
// (settlement.Service.SettleFromOrders), so that no query is sent for a
// payment registration whose payment is already posted.
//
// What this package must never do: set a registration SUCCEEDED (only the
// worker's settlement through the claim does), hand a registration to two
// queriers at once, or let a querier whose lease ran out write anything.
package querywork
