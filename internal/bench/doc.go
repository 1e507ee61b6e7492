// Package bench is the end-to-end benchmark behind `make bench`: in one run
// it builds the consumer, starts a Kafka broker (kfake) as a process of its
// own, creates fresh MariaDB/MySQL databases, produces a realistic generated
// stream, and measures the worker against what bounds it: kafka-go reading
// the topic with a no-op handler (the transport ceiling), raw multi-row
// inserts of the rows an event writes, and the rule floor, the least
// database work the exactly-once rule allows (claims committed first, then
// orders, ledger rows and the fence in one transaction), and the per-event
// floor, the rule floor one event per transaction (the fewest statements
// for an event written alone). It then measures the per-message pipeline,
// the batched pipeline, a replay, and publish→settled latency at a paced
// rate (batched with one worker process and with two in one group, and per
// message), beside the paced read floor: the same paced stream read and
// decoded by a process of its own (readfloor) that writes nothing, what the
// worker pays per event before any statement. It reports one table
// (Result.WriteTable). Every row counts Kafka messages and distinct money
// events apart, and says what each distinct event cost in CPU, of the
// worker and of the database server process, and in statements.
//
// RunQuery measures the active query alone: payments registered through
// the input topic at a paced rate with no callback, a querier process
// (consumer query run, first wait shortened) asking a fake WeChat in the
// harness (internal/fakechannel), and the worker settling the answers;
// registered→settled latency against the first wait plus a second, and
// the querier's CPU and statements per query, its statements counted on
// its own connections (a relay that reads the MySQL protocol).
//
// Figures on a shared machine are noisy: compare rows of one run (the
// ratios) rather than absolute numbers across runs. The database's CPU and
// statements are the whole server's: other clients of it count too.
//
// This package must never touch a database it did not create (every name
// starts with paycb_bench_<random>_ and is dropped at the end), commit
// offsets for a group with live members, or leave a subprocess running when
// Run returns.
package bench
