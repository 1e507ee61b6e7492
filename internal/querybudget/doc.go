// Package querybudget keeps every merchant's query budget in the database
// (ss_query_budget), so that the queriers of a deployment, however many,
// together never ask a channel about one merchant faster than its budget,
// and a rate-limit answer received by one backs them all off. The bucket
// arithmetic is internal/queryplan.Budget; this package reads and writes
// its state in one transaction per query.
//
// What this package must never do: let a query through on an error (an
// unreachable database means no query is sent), or read the queriers'
// clocks where the database's is at hand: on MySQL, MariaDB, Galera and
// TiDB the bucket's time is UTC_TIMESTAMP(6), so queriers whose clocks
// differ still agree.
package querybudget
