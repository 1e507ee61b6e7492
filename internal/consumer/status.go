package consumer

import (
	"net"
	"slices"
	"strings"
	"time"

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

// PartitionsPath is the admin server's path where a worker reports the
// partitions it owns (Worker.Partitions, as JSON): `consumer status` reads
// it from every member beside /metrics.
const PartitionsPath = "/partitions"

// PartitionReport is what a worker reports of one partition it owns.
type PartitionReport struct {
	Partition int `json:"partition"`
	// Generation is the group generation the partition was assigned in.
	Generation int32 `json:"generation"`
	// Committed is the next offset to read as this worker committed it in
	// this generation; -1 before its first commit.
	Committed int64 `json:"committed"`
	// StalledSeconds is paycb_partition_stalled_seconds now.
	StalledSeconds float64 `json:"stalled_seconds"`
	// Holding is the oldest message the partition holds unfinished (one
	// being handled, retried in place, or waiting for another worker's
	// settlement); nil when it holds none.
	Holding *HeldMessage `json:"holding,omitempty"`
}

// HeldMessage is the oldest unfinished message of a partition: what the
// partition waits on.
type HeldMessage struct {
	Offset int64 `json:"offset"`
	// Key is the message's Kafka key, as text.
	Key string `json:"key"`
	// Since is when the partition began holding it, or last advanced while
	// holding it (the stall's start).
	Since time.Time `json:"since"`
	// Attempts are the failed attempts at it since Since.
	Attempts int `json:"attempts"`
	// Error is the last attempt's error, or why it waits (another worker
	// settling its claim); empty while no attempt has failed. At most 1 KiB.
	Error string `json:"error,omitempty"`
}

// Partitions reports the partitions this worker owns now, in partition
// order; empty (never nil) while it owns none.
func (w *Worker) Partitions() []PartitionReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	out := make([]PartitionReport, 0, len(w.partitions))
	for p, st := range w.partitions {
		r := PartitionReport{Partition: p, Generation: st.generation, Committed: st.committed, StalledSeconds: st.stalled(now).Seconds()}
		if !st.since.IsZero() {
			r.Holding = &HeldMessage{Offset: st.offset, Key: st.key, Since: st.since.UTC(), Attempts: st.attempts, Error: st.lastErr}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b PartitionReport) int { return a.Partition - b.Partition })
	return out
}
