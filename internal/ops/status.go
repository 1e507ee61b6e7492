package ops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/consumer"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
)

// StatusOptions adjust Status.
type StatusOptions struct {
	// HTTP reads the members' admin /metrics; nil uses a client with a
	// timeout of AdminTimeout.
	HTTP *http.Client
	// AdminTimeout bounds reading one member's /metrics. Default 3s.
	AdminTimeout time.Duration
}

// MemberStatus is one live member of the group.
type MemberStatus struct {
	ID       string `json:"member_id"`
	ClientID string `json:"client_id"`
	Host     string `json:"client_host"`
	// Admin is the member's admin server (host:port) as announced in its
	// client ID (consumer.ClientID); empty when it announces none.
	Admin string `json:"admin,omitempty"`
	// Partitions are the input topic's partitions assigned to the member.
	Partitions []int `json:"partitions"`
	// Reachable is whether the member's /metrics answered.
	Reachable bool `json:"reachable"`
	// Error says why the member's stalls are unknown, when they are.
	Error string `json:"error,omitempty"`
}

// PartitionStatus is one partition of the input topic.
type PartitionStatus struct {
	Partition int `json:"partition"`
	// Member is the ID of the member that owns the partition; empty when
	// no member does.
	Member string `json:"member,omitempty"`
	// Committed is the group's committed offset (the next to read); -1
	// when it committed nothing on this partition.
	Committed int64 `json:"committed"`
	// Start and End are the first retained offset and the offset the next
	// message will get.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Lag is End minus Committed, or minus Start where the group
	// committed nothing.
	Lag int64 `json:"lag"`
	// StalledSeconds is the owner's paycb_partition_stalled_seconds; nil
	// when unknown (no owner, an owner that cannot be reached or does not
	// report the partition).
	StalledSeconds *float64 `json:"stalled_seconds"`
	// Stuck is the message the partition is stuck on, as its owner reports
	// it on its admin consumer.PartitionsPath: the oldest message it holds
	// unfinished, once an attempt at it has failed (or it waits for another
	// worker's settlement) or it has been held StuckAfter. Nil when the
	// partition is not stuck, or when that is unknown (as StalledSeconds;
	// also an owner too old to report it).
	Stuck *StuckMessage `json:"stuck"`
}

// StuckAfter is how long a partition may hold a message without a failed
// attempt before status shows it stuck: every message is held while it is
// handled, for milliseconds.
const StuckAfter = time.Second

// StuckMessage is the message a partition is stuck on.
type StuckMessage struct {
	Offset int64 `json:"offset"`
	// Key is the message's Kafka key, as text.
	Key string `json:"key"`
	// Since is when the partition began holding it (or last advanced while
	// holding it): the stall's start, by the owner's clock.
	Since time.Time `json:"since"`
	// Attempts are the failed attempts at it since Since.
	Attempts int `json:"attempts"`
	// Error is the last attempt's error, or why it waits; empty while no
	// attempt has failed.
	Error string `json:"error"`
}

// StatusReport is the group's live view.
type StatusReport struct {
	Group      string            `json:"group"`
	Topic      string            `json:"topic"`
	State      string            `json:"state"`
	Members    []MemberStatus    `json:"members"`
	Partitions []PartitionStatus `json:"partitions"`
	TotalLag   int64             `json:"total_lag"`
	// Settled is the settled-event backlog as the first member that
	// reports it says (every member reads the same outbox); nil when none
	// does.
	Settled *SettledBacklog `json:"settled"`
}

// SettledBacklog is a member's paycb_settled_pending and
// paycb_settled_oldest_pending_seconds.
type SettledBacklog struct {
	Pending              float64 `json:"pending"`
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
}

// Status reads the group's live state without joining it: the coordinator's
// member list with each member's assigned partitions (DescribeGroups), the
// group's committed offsets (OffsetFetch), the partitions' first and end
// offsets (ListOffsets), and, from each member's admin server found
// through its client ID, the stall of each partition it owns (/metrics)
// and the message a stuck partition holds (consumer.PartitionsPath). It is safe
// while workers run: it commits nothing and never creates a topic. A
// member that cannot be reached leaves its partitions' stalls unknown; it is
// not an error. A missing input topic is an error wrapping
// ErrTopicNotFound.
func Status(ctx context.Context, k kafkaops.Kafka, o StatusOptions) (StatusReport, error) {
	rep := StatusReport{Group: k.Group, Topic: k.Topic, Members: []MemberStatus{}, Partitions: []PartitionStatus{}}
	parts, err := k.Partitions(ctx, k.Topic)
	if err != nil {
		return rep, err
	}
	if rep.State, rep.Members, err = describeAssignments(ctx, k); err != nil {
		return rep, err
	}
	committed, err := k.Committed(ctx, parts)
	if err != nil {
		return rep, err
	}
	first, err := k.ListOffsets(ctx, k.Topic, parts, kafka.FirstOffset)
	if err != nil {
		return rep, err
	}
	end, err := k.ListOffsets(ctx, k.Topic, parts, kafka.LastOffset)
	if err != nil {
		return rep, err
	}
	owner := map[int]int{} // partition -> index in rep.Members
	for i, m := range rep.Members {
		for _, p := range m.Partitions {
			owner[p] = i
		}
	}
	stalls, held, backlogs := scrapeStalls(ctx, rep.Members, o)
	for _, b := range backlogs {
		if b != nil {
			rep.Settled = b
			break
		}
	}
	for _, p := range parts {
		ps := PartitionStatus{Partition: p, Committed: -1, Start: first[p], End: end[p]}
		from := ps.Start
		if c, ok := committed[p]; ok {
			ps.Committed, from = c, c
		}
		ps.Lag = max(ps.End-from, 0)
		if i, ok := owner[p]; ok {
			ps.Member = rep.Members[i].ID
			if v, ok := stalls[i][p]; ok {
				ps.StalledSeconds = &v
			}
			if h, ok := held[i][p]; ok && (h.Attempts > 0 || h.Error != "" || time.Since(h.Since) >= StuckAfter) {
				ps.Stuck = &StuckMessage{Offset: h.Offset, Key: h.Key, Since: h.Since, Attempts: h.Attempts, Error: h.Error}
			}
		}
		rep.TotalLag += ps.Lag
		rep.Partitions = append(rep.Partitions, ps)
	}
	return rep, nil
}

// describeAssignments describes the group with each member's assigned
// partitions of the input topic, members ordered by their first partition.
func describeAssignments(ctx context.Context, k kafkaops.Kafka) (string, []MemberStatus, error) {
	resp, err := k.Client().DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{k.Group}})
	if err != nil {
		return "", nil, fmt.Errorf("describe group %s: %w", k.Group, err)
	}
	members := []MemberStatus{}
	for _, g := range resp.Groups {
		if g.GroupID != k.Group {
			continue
		}
		if g.Error != nil {
			return "", nil, fmt.Errorf("describe group %s: %w", k.Group, g.Error)
		}
		for _, m := range g.Members {
			ms := MemberStatus{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Partitions: []int{}}
			ms.Admin, _ = consumer.AdminEndpoint(m.ClientID, m.ClientHost)
			for _, t := range m.MemberAssignments.Topics {
				if t.Topic == k.Topic {
					ms.Partitions = append(ms.Partitions, t.Partitions...)
				}
			}
			sort.Ints(ms.Partitions)
			members = append(members, ms)
		}
		sort.SliceStable(members, func(i, j int) bool { return firstPartition(members[i]) < firstPartition(members[j]) })
		return g.GroupState, members, nil
	}
	return "Dead", members, nil
}

func firstPartition(m MemberStatus) int {
	if len(m.Partitions) == 0 {
		return int(^uint(0) >> 1)
	}
	return m.Partitions[0]
}

// scrapeStalls reads each member's /metrics and consumer.PartitionsPath
// concurrently and returns, by member index, the stall of each partition
// it reports, the message each partition holds unfinished and the
// settled-event backlog it reports (nil when it reports none). It records
// why a member's stalls are unknown in its Error and sets Reachable; a
// member that serves no consumer.PartitionsPath (an older worker) leaves
// only the held messages unknown.
func scrapeStalls(ctx context.Context, members []MemberStatus, o StatusOptions) ([]map[int]float64, []map[int]consumer.HeldMessage, []*SettledBacklog) {
	timeout := o.AdminTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	client := o.HTTP
	if client == nil {
		client = &http.Client{Timeout: timeout}
	}
	out := make([]map[int]float64, len(members))
	held := make([]map[int]consumer.HeldMessage, len(members))
	backlogs := make([]*SettledBacklog, len(members))
	var wg sync.WaitGroup
	for i := range members {
		m := &members[i]
		if m.Admin == "" {
			m.Error = "no admin address in its client ID"
			continue
		}
		wg.Go(func() {
			stalls, backlog, err := readStalls(ctx, client, timeout, m.Admin)
			if err != nil {
				m.Error = err.Error()
				return
			}
			m.Reachable = true
			out[i], backlogs[i] = stalls, backlog
		})
		wg.Go(func() { held[i] = readHeld(ctx, client, timeout, m.Admin) })
	}
	wg.Wait()
	return out, held, backlogs
}

// readHeld reads a member's consumer.PartitionsPath and returns the message
// each partition holds unfinished; nil when it cannot be read (an older
// worker serves none; an unreachable one is said by readStalls).
func readHeld(ctx context.Context, client *http.Client, timeout time.Duration, addr string) map[int]consumer.HeldMessage {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+consumer.PartitionsPath, nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var reports []consumer.PartitionReport
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetricsBytes)).Decode(&reports); err != nil {
		return nil
	}
	out := make(map[int]consumer.HeldMessage, len(reports))
	for _, r := range reports {
		if r.Holding != nil {
			out[r.Partition] = *r.Holding
		}
	}
	return out
}

// maxMetricsBytes bounds how much of a member's /metrics is read.
const maxMetricsBytes = 16 << 20

// readStalls reads a member's /metrics: the stall of each partition it
// reports and its settled-event backlog (nil when it reports none).
func readStalls(ctx context.Context, client *http.Client, timeout time.Duration, addr string) (map[int]float64, *SettledBacklog, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + addr + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("read %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", url, err)
	}
	stalls, err := ParseStalls(bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", url, err)
	}
	return stalls, ParseSettledBacklog(bytes.NewReader(body)), nil
}

// ParseSettledBacklog reads Prometheus' text exposition format and returns
// the unlabelled samples of metrics.SettledPending and
// metrics.SettledOldestPending; nil unless both are there and readable.
func ParseSettledBacklog(r io.Reader) *SettledBacklog {
	var b SettledBacklog
	found := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		var dst *float64
		switch f[0] {
		case metrics.SettledPending:
			dst = &b.Pending
		case metrics.SettledOldestPending:
			dst = &b.OldestPendingSeconds
		default:
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil
		}
		*dst = v
		found++
	}
	if sc.Err() != nil || found != 2 {
		return nil
	}
	return &b
}

// ParseStalls reads Prometheus' text exposition format and returns the
// value of metrics.PartitionStalled (paycb_partition_stalled_seconds) by
// its partition label. Samples of other metrics, and its samples without a
// numeric partition label, are skipped; an unreadable value is an error.
func ParseStalls(r io.Reader) (map[int]float64, error) {
	out := map[int]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, metrics.PartitionStalled)
		if !ok || !strings.HasPrefix(rest, "{") {
			continue
		}
		labels, value, ok := splitSample(rest)
		if !ok {
			return nil, fmt.Errorf("unreadable %s sample %q", metrics.PartitionStalled, line)
		}
		p, err := strconv.Atoi(labels["partition"])
		if err != nil {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("%s{partition=%q}: %w", metrics.PartitionStalled, labels["partition"], err)
		}
		out[p] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// splitSample splits `{a="1",b="x"} 12.5 [timestamp]` into its labels and
// value.
func splitSample(s string) (map[string]string, string, bool) {
	labels := map[string]string{}
	i := 1 // after '{'
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return nil, "", false
		}
		if s[i] == '}' {
			i++
			break
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 || i+eq+1 >= len(s) || s[i+eq+1] != '"' {
			return nil, "", false
		}
		name := strings.TrimSpace(s[i : i+eq])
		j := i + eq + 2
		var b strings.Builder
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' && j+1 < len(s) {
				j++
				switch s[j] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[j])
				}
				continue
			}
			b.WriteByte(s[j])
		}
		if j >= len(s) {
			return nil, "", false
		}
		labels[name] = b.String()
		i = j + 1
	}
	fields := strings.Fields(s[i:])
	if len(fields) == 0 {
		return nil, "", false
	}
	return labels, fields[0], true
}
