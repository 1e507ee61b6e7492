// The tidb-server the TiDB engine suite runs (scripts/engines/tidb.sh),
// pinned to one commit. A module of its own, so that TiDB's dependencies
// never enter the worker's: the replace lines are TiDB's own go.mod's.
module github.com/paycallback/paycallback/scripts/engines/tidb

go 1.25

require (
	github.com/pingcap/tidb v1.1.0-beta.0.20251126154744-e4e814fdc0af
	github.com/pingcap/tidb/pkg/parser v0.0.0-20251126154744-e4e814fdc0af
)

replace (
	github.com/go-ldap/ldap/v3 => github.com/YangKeao/ldap/v3 v3.4.5-0.20230421065457-369a3bab1117
	sourcegraph.com/sourcegraph/appdash => github.com/sourcegraph/appdash v0.0.0-20190731080439-ebfcffb1b5c0
	sourcegraph.com/sourcegraph/appdash-data => github.com/sourcegraph/appdash-data v0.0.0-20151005221446-73f23eafcf67
)
