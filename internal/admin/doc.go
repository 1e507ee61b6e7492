// Package admin serves the worker's operational HTTP endpoints: /metrics
// (the injected Prometheus gatherer), /healthz (the process is alive),
// /readyz (named readiness checks supplied by the caller), the caller's JSON
// reports (WithJSON, such as a worker's /partitions) and, only when asked
// for with WithPprof, net/http/pprof under /debug/pprof/.
//
// It knows nothing about Kafka or the database: readiness is whatever the
// caller's checks say, a report whatever the caller's function returns. It
// must never serve the global Prometheus registry, block shutdown beyond
// its bound, or put anything in a response beyond check names and their
// (sanitised) messages and the caller's reports: no configuration, no
// request data.
// It never serves pprof's cmdline handler: the command line may hold a DSN.
package admin
