// Command paycb-bench is the end-to-end benchmark behind `make bench`: it
// builds bin/consumer, starts a kfake broker as a separate process, creates
// fresh databases on a MariaDB/MySQL server, and measures the transport
// ceiling, the raw rows and the rule floor (the least database work the
// exactly-once rule allows), the per-message and batched pipelines, a
// replay, and publish→settled latency at a paced rate beside the paced
// read floor (see internal/bench), each in messages and distinct events per second and in
// worker CPU, database CPU and statements per event. It prints one table
// and writes it to --out (default bench/results/e2e.txt), followed by the
// same figures in Go benchmark format for benchstat.
//
// With --backlog N it measures only the worker's memory over a backlog:
// it produces at least N generated messages, runs one batched consumer over
// them to the group's last commit, and reports elapsed time, throughput and
// the peak RSS of the worker and of the broker process, in
// bench/results/backlog.txt unless --out says otherwise (see
// bench.RunBacklog).
//
// With --query it measures only the active query: payments registered
// through the input topic at --query-rate a second (1,000) for
// --query-duration with no callback, a querier process (consumer query run,
// first wait --query-first-wait) asking a fake WeChat in the harness, and
// the batched worker settling the answers; it reports registered→settled
// p50/p99 against the first wait plus a second, queries per second, and the
// querier's CPU and statements per query, in bench/results/query.txt
// unless --out says otherwise (see bench.RunQuery).
//
// --consumer-env KEY=VALUE (repeatable) gives every consumer process a
// setting beyond the harness's, e.g. GOMAXPROCS=1 or PAYCB_MERGE_WAIT=5ms,
// to measure a tuning; the table's facts name them.
//
// The server is PAYCB_BENCH_DSN, else TEST_MYSQL_DSN, else
// root@tcp(127.0.0.1:3306)/. It exits 1 when a measurement fails or a sanity
// check of the ledger fails, 2 on a usage error.
package main
