package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/pkg/textcut"
)

// partitionState is what the monitor and readiness know of one partition
// loop: what it committed and whether it holds up its partition.
type partitionState struct {
	generation int32 // the generation the partition was assigned in
	committed  int64 // the next offset to read, as committed; -1 before a commit
	// since is when the partition began holding an unfinished message, or
	// last advanced while holding one; zero while it holds none.
	since time.Time
	// offset and key are its oldest unfinished message's.
	offset int64
	key    string
	// attempts and lastErr are the failed attempts at that message (a
	// batch) since the partition last advanced, and the last one's error.
	attempts int
	lastErr  string
}

// stalled is how long the partition has held an unfinished message
// without advancing: zero when it holds none.
func (st *partitionState) stalled(now time.Time) time.Duration {
	if st.since.IsZero() {
		return 0
	}
	return max(now.Sub(st.since), 0)
}

// stallError says which partition is stalled, where, for how long and why.
func (st *partitionState) stallError(p int, now time.Time) error {
	why := "no attempt has failed yet"
	switch {
	case st.attempts == 0 && st.lastErr != "":
		why = st.lastErr
	case st.lastErr != "":
		why = fmt.Sprintf("%d failed attempts, last: %s", st.attempts, st.lastErr)
	}
	return fmt.Errorf("partition %d stalled %s at offset %d: %s", p, st.stalled(now).Round(time.Second), st.offset, why)
}

// own records that this worker's loop for p runs, and returns the state
// that identifies it: drop removes only that one.
func (w *Worker) own(p int) *partitionState {
	w.mu.Lock()
	st := &partitionState{generation: w.generation, committed: -1}
	w.partitions[p] = st
	w.metrics.SetPartitionStalled(p, 0)
	w.mu.Unlock()
	select {
	case w.assigned <- struct{}{}:
	default:
	}
	return st
}

// drop forgets the loop's partition and deletes its series: another
// worker reports it now.
func (w *Worker) drop(p int, st *partitionState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.partitions[p] != st {
		return
	}
	delete(w.partitions, p)
	w.metrics.DeleteConsumerLag(p)
	w.metrics.DeletePartitionStalled(p)
}

// holding records that the partition holds msg unfinished; it starts the
// stall clock when the partition held nothing before.
func (w *Worker) holding(st *partitionState, msg kafka.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st.since.IsZero() {
		st.since, st.offset, st.key = time.Now(), msg.Offset, string(msg.Key)
	}
}

// advanced records a commit of next; oldest is the oldest message the
// partition still holds, or nil when it holds none.
func (w *Worker) advanced(st *partitionState, next int64, oldest *kafka.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.committed = next
	st.attempts, st.lastErr = 0, ""
	st.since, st.offset, st.key = time.Time{}, 0, ""
	if oldest != nil {
		st.since, st.offset, st.key = time.Now(), oldest.Offset, string(oldest.Key)
	}
}

// attemptFailed records a failed attempt at the partition's unfinished
// messages (or a wait for another worker's settlement).
func (w *Worker) attemptFailed(st *partitionState, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.attempts++
	st.lastErr = textcut.Ellipsis(err.Error(), maxReportedError)
}

// maxReportedError is the most bytes of an attempt's error the worker
// keeps for readiness and its /partitions report.
const maxReportedError = 1024

// waiting records why the partition's unfinished messages wait without
// failing (another worker is settling their claim).
func (w *Worker) waiting(st *partitionState, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.lastErr = textcut.Ellipsis(err.Error(), maxReportedError)
}

// monitorTick is how often the stall series are refreshed.
const monitorTick = time.Second

// lagTimeout bounds one round of offset requests to the broker.
const lagTimeout = 5 * time.Second

// monitor keeps paycb_partition_stalled_seconds and paycb_consumer_lag of
// the partitions this worker owns up to date until ctx ends: the stalls
// every second, the lag every Config.LagInterval and at once when a
// partition is assigned, from the broker, whether or not anything
// commits.
func (w *Worker) monitor(ctx context.Context) {
	tick := time.NewTicker(min(monitorTick, w.cfg.LagInterval))
	defer tick.Stop()
	repeats := logging.NewSuppressor(w.logger)
	var lastLag time.Time
	for {
		lagDue := false
		select {
		case <-ctx.Done():
			return
		case <-w.assigned:
			lagDue = true
		case <-tick.C:
			lagDue = time.Since(lastLag) >= w.cfg.LagInterval
		}
		w.refreshStalls()
		w.refreshJoined()
		if !lagDue {
			continue
		}
		lastLag = time.Now()
		if err := w.refreshLag(ctx); err != nil && ctx.Err() == nil {
			const msg = "consumer lag not refreshed"
			repeats.Log(ctx, slog.LevelWarn, msg+": "+err.Error(), msg, "error", err.Error())
			continue
		}
		repeats.Clear(ctx)
	}
}

// refreshStalls sets every owned partition's stall series.
func (w *Worker) refreshStalls() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for p, st := range w.partitions {
		w.metrics.SetPartitionStalled(p, st.stalled(now))
	}
}

// refreshLag asks the broker for the owned partitions' end offsets and the
// group's committed offsets and sets their lag series: end minus
// committed, or end minus the start offset where the group has committed
// nothing.
func (w *Worker) refreshLag(ctx context.Context) error {
	w.mu.Lock()
	owned := maps.Clone(w.partitions)
	w.mu.Unlock()
	if len(owned) == 0 {
		return nil
	}
	parts := slices.Sorted(maps.Keys(owned))
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	client := w.cfg.Client
	if client == nil {
		client = &kafka.Client{Addr: kafka.TCP(w.cfg.Brokers...), Timeout: lagTimeout}
	}
	lag, err := brokerLag(ctx, client, w.cfg.Topic, w.cfg.GroupID, parts, w.cfg.StartOffset)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, n := range lag {
		// Only for a loop still running: a revoked partition's series
		// stays deleted.
		if st, ok := w.partitions[p]; ok && st == owned[p] {
			w.metrics.SetConsumerLag(p, n)
		}
	}
	return nil
}

// brokerLag returns, for each of parts, the partition's end offset minus
// group's committed offset, or minus the partition's start (its first
// offset, or its end when start is kafka.LastOffset) where the group has
// committed nothing.
func brokerLag(ctx context.Context, client *kafka.Client, topic, group string, parts []int, start int64) (map[int]int64, error) {
	ends, err := kafkaops.ListOffsets(ctx, client, topic, parts, kafka.LastOffset)
	if err != nil {
		return nil, err
	}
	of, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	if of.Error != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, of.Error)
	}
	committed := make(map[int]int64, len(parts))
	for _, p := range parts {
		committed[p] = -1
	}
	for _, po := range of.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("fetch offset of %s/%d: %w", topic, po.Partition, po.Error)
		}
		committed[po.Partition] = po.CommittedOffset
	}
	var fresh []int // partitions the group has committed nothing on
	for _, p := range parts {
		if committed[p] < 0 {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) > 0 {
		firsts := ends
		if start != kafka.LastOffset {
			if firsts, err = kafkaops.ListOffsets(ctx, client, topic, fresh, kafka.FirstOffset); err != nil {
				return nil, err
			}
		}
		for _, p := range fresh {
			committed[p] = firsts[p]
		}
	}
	out := make(map[int]int64, len(parts))
	for _, p := range parts {
		out[p] = max(ends[p]-committed[p], 0)
	}
	return out, nil
}
