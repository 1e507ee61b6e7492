// Package metrics defines the worker's Prometheus metrics, the names and
// labels that dashboards, alerts and acceptance tests rely on (see the
// contract), and the only methods that record them: the contract's
// (Metrics), the partition readers' (ReaderStats) and the statement
// reconciliation's (StatementCollector). No other package defines a
// metric, save pkg/settlement: the settlement service's own counters live
// beside it (pkg/settlement/metrics.go), same rules, because pkg/ imports
// nothing under internal/.
//
// Every metric is registered on a prometheus.Registerer the caller injects;
// this package must never touch the global default registry, and must never
// let an unbounded value (a trade number, an error text, a tenant) become a
// label value: every method takes a value from a fixed set and clamps
// anything else to UNKNOWN or "other". The one tenant label,
// paycb_wechat_decrypt_key_total's, is set only for tenants with several
// WeChat APIv3 keys, a set the configuration bounds, and is empty for all
// others.
package metrics
