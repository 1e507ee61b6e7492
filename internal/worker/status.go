package worker

import (
	"net"
	"strings"

	"github.com/segmentio/kafka-go"
)

// ClientIDPrefix starts the Kafka client ID of every worker that announces
// its admin server: "paycb@" followed by the address the admin server
// listens on. `consumer status` reads it back from the group's member list
// (DescribeGroups reports each member's client ID and host) to find the
// member's /metrics, and so each partition's stall as its owner reports it.
const ClientIDPrefix = "paycb@"

// ClientID is the client ID a worker whose admin server listens on admin
// presents to the brokers: ClientIDPrefix + admin's host:port. A nil admin
// gives ClientIDPrefix alone (no endpoint to announce).
func ClientID(admin net.Addr) string {
	if admin == nil {
		return ClientIDPrefix
	}
	return ClientIDPrefix + admin.String()
}

// WithClientID returns a copy of d (nil: kafka-go's default dialer) that
// presents clientID to the brokers.
func WithClientID(d *kafka.Dialer, clientID string) *kafka.Dialer {
	if d == nil {
		d = kafka.DefaultDialer
	}
	out := *d
	out.ClientID = clientID
	return &out
}

// AdminEndpoint returns the host:port of the admin server that a group
// member announced in its client ID (see ClientID). When the announced host
// is unspecified ("", 0.0.0.0 or ::: the server listens on every
// interface), the member's client host as the coordinator saw it is used
// instead ("/10.0.0.5" from Apache Kafka, "10.0.0.5:51234" from others).
// ok is false when clientID is not a worker's or announces no usable
// address.
func AdminEndpoint(clientID, clientHost string) (addr string, ok bool) {
	announced, found := strings.CutPrefix(clientID, ClientIDPrefix)
	if !found || announced == "" {
		return "", false
	}
	host, port, err := net.SplitHostPort(announced)
	if err != nil || port == "" || port == "0" {
		return "", false
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return announced, true
	}
	h := strings.TrimPrefix(clientHost, "/")
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	if h == "" {
		return "", false
	}
	return net.JoinHostPort(h, port), true
}
