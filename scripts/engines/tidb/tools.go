//go:build tools

// Package tidb pins the tidb-server command the TiDB engine suite builds
// (scripts/engines/tidb.sh): go build -mod=mod -tags codes
// github.com/pingcap/tidb/cmd/tidb-server, run in this directory.
package tidb

import _ "github.com/pingcap/tidb/cmd/tidb-server"
