package sqldbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// NodesNet is the network name of the round-robin dialer a DSN uses when
// TEST_MYSQL_NODES lists the nodes of a multi-primary cluster (Galera):
// root@paycb-nodes(127.0.0.1:3311)/db. Each new connection of such a DSN
// goes to the next node in the list, whatever the address in the DSN, so a
// pool's connections, and the transactions on them, are spread over every
// node. The dialer is registered with the driver for the whole test
// process by the first call that returns such a DSN.
const NodesNet = "paycb-nodes"

// Nodes returns the addresses in TEST_MYSQL_NODES (comma-separated
// host:port), or nil when it is unset: then the tests use one server.
func Nodes() []string {
	var out []string
	for a := range strings.SplitSeq(os.Getenv("TEST_MYSQL_NODES"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// NodeDSN returns dsn aimed at the i-th node of TEST_MYSQL_NODES (modulo
// their number) over plain TCP: for a process of its own (the real binary),
// which has no round-robin dialer. Without TEST_MYSQL_NODES it returns dsn.
func NodeDSN(dsn string, i int) (string, error) {
	nodes := Nodes()
	if len(nodes) == 0 {
		return dsn, nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("parse dsn: %w", err)
	}
	cfg.Net, cfg.Addr = "tcp", nodes[i%len(nodes)]
	return cfg.FormatDSN(), nil
}

var (
	registerNodes sync.Once
	nextNode      atomic.Uint64
)

// spread rewrites cfg to dial through the round-robin dialer when
// TEST_MYSQL_NODES is set, registering the dialer on first use.
func spread(cfg *mysql.Config) {
	nodes := Nodes()
	if len(nodes) == 0 {
		return
	}
	registerNodes.Do(func() {
		var d net.Dialer
		mysql.RegisterDialContext(NodesNet, func(ctx context.Context, _ string) (net.Conn, error) {
			addr := nodes[(nextNode.Add(1)-1)%uint64(len(nodes))]
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, fmt.Errorf("dial node %s: %w", addr, err)
			}
			return conn, nil
		})
	})
	cfg.Net, cfg.Addr = NodesNet, nodes[0]
}
