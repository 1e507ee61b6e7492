package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
)

// TestReadyNamesTheLongestStall: readiness fails only past StallAfter,
// naming the partition stalled longest, its offset and its last error,
// and the other stalled partitions; a partition that advanced is ready
// again and its stall series is zero; a revoked partition's series goes.
func TestReadyNamesTheLongestStall(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	w := New(Config{StallAfter: time.Minute}, &pipeline.Pipeline{}, m, nil)
	w.joined(&kafka.Generation{ID: 3})
	p1, p4, p7 := w.own(1), w.own(4), w.own(7)
	require.NoError(t, w.Ready())

	w.holding(p4, kafka.Message{Offset: 1234, Key: []byte("ALIPAY:2024060122001")})
	w.holding(p7, kafka.Message{Offset: 88})
	w.holding(p1, kafka.Message{Offset: 10})
	w.attemptFailed(p4, errors.New("settle: Error 1205 (HY000): Lock wait timeout exceeded"))
	w.attemptFailed(p4, errors.New("settle: Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction"))
	w.mu.Lock()
	p4.since = time.Now().Add(-3 * time.Minute)
	p7.since = time.Now().Add(-2 * time.Minute)
	w.mu.Unlock()

	err = w.Ready()
	require.Error(t, err)
	assert.Regexp(t, `^partition 4 stalled 3m0s at offset 1234: 2 failed attempts, last: settle: Error 1205 \(HY000\): Lock wait timeout exceeded; try restarting transaction; also stalled: partition 7$`, err.Error())

	w.refreshStalls()
	assert.InDelta(t, 180, stall(t, reg, "4"), 1)
	assert.Less(t, stall(t, reg, "1"), 1.0, "partition 1 just began holding a message")

	w.advanced(p4, 1235, nil)
	w.advanced(p7, 89, nil)
	require.NoError(t, w.Ready())
	w.refreshStalls()
	assert.Zero(t, stall(t, reg, "4"))

	w.drop(7, p7)
	w.drop(1, &partitionState{}) // not the running loop's: kept
	n, err := testutil.GatherAndCount(reg, "paycb_partition_stalled_seconds")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "partitions 1 and 4 remain")
}

// stall reads partition's stall series from reg.
func stall(t *testing.T, reg *prometheus.Registry, partition string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "paycb_partition_stalled_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if mt.GetLabel()[0].GetValue() == partition {
				return mt.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no stall series for partition %s", partition)
	return 0
}

// TestReadyWhileAMemberOnly: readiness and paycb_group_joined follow the
// generation: not a member before the first join (saying why, once an
// attempt failed), a member once joined (with no partition too: it
// stands by), not a member from the moment the generation ends, saying
// since when; a generation that already gave way to the next changes
// nothing when it ends.
func TestReadyWhileAMemberOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	w := New(Config{GroupID: "settlement-consumer"}, &pipeline.Pipeline{}, m, nil)
	joined := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "paycb_group_joined" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no paycb_group_joined")
		return 0
	}

	require.EqualError(t, w.Ready(), "not a member of group settlement-consumer yet: joining")
	assert.Zero(t, joined())
	w.joinFailed(errors.New("dial tcp 127.0.0.1:9092: connect: connection refused"))
	assert.Regexp(t, `^not a member of group settlement-consumer yet: joining; last join attempt \(0s ago\): dial tcp 127.0.0.1:9092: connect: connection refused$`, w.Ready().Error())
	w.mu.Lock()
	w.group.joinErrAt = time.Now().Add(-joinGroupBackoff - 2*time.Second)
	w.mu.Unlock()
	assert.Regexp(t, `^not a member of group settlement-consumer yet: joining; an attempt in flight for 2s; the previous one failed 3s ago: dial tcp 127.0.0.1:9092: connect: connection refused$`, w.Ready().Error())

	first := &kafka.Generation{ID: 4}
	w.joined(first)
	require.NoError(t, w.Ready(), "a member with no partition stands by")
	assert.InDelta(t, 1, joined(), 0)
	assert.True(t, w.GroupJoined())

	w.left(first)
	assert.Zero(t, joined())
	assert.False(t, w.GroupJoined())
	assert.Regexp(t, `^not a member of group settlement-consumer since \S+Z \(0s ago\): generation 4 ended; rejoining for 0s$`, w.Ready().Error())

	// After a broker outage the attempt that finally reaches the broker
	// can wait there for the group's rebalance: readiness says it is in
	// flight, not the frozen broker's timeout as if it were the last word.
	w.joinFailed(errors.New("read tcp 127.0.0.1:50000->127.0.0.1:9092: i/o timeout"))
	assert.Regexp(t, `^not a member of group settlement-consumer since \S+Z \(0s ago\): generation 4 ended; last join attempt \(0s ago\): read tcp \S+: i/o timeout$`, w.Ready().Error(),
		"within the back-off the failed attempt is the last one")
	w.mu.Lock()
	w.group.joinErrAt = time.Now().Add(-joinGroupBackoff - 12*time.Second)
	w.mu.Unlock()
	assert.Regexp(t, `^not a member of group settlement-consumer since \S+Z \(0s ago\): generation 4 ended; rejoining: an attempt in flight for 12s; the previous one failed 13s ago: read tcp \S+: i/o timeout$`, w.Ready().Error())

	// A membership the coordinator has not confirmed for longer than a
	// probe interval, the probe's timeout and a second is not one, though
	// the generation has not ended (yet).
	again := &kafka.Generation{ID: 5}
	w.joined(again)
	w.probed(again, errors.New("heartbeat of generation 5: context deadline exceeded"))
	require.NoError(t, w.Ready(), "a probe not answered yet is within the window")
	w.mu.Lock()
	w.confirmedAt = time.Now().Add(-w.confirmWithin() - time.Second)
	w.mu.Unlock()
	w.refreshJoined()
	assert.Zero(t, joined())
	assert.False(t, w.GroupJoined())
	assert.Regexp(t, `^not a member of group settlement-consumer: generation 5 unconfirmed by the coordinator for 9s \(last \S+Z\); last heartbeat: heartbeat of generation 5: context deadline exceeded$`, w.Ready().Error())
	w.probed(again, nil)
	w.refreshJoined()
	require.NoError(t, w.Ready(), "confirmed again")
	assert.InDelta(t, 1, joined(), 0)
	w.left(again)

	second := &kafka.Generation{ID: 1} // a new cluster counts from 1 again
	w.joined(second)
	w.left(first)
	require.NoError(t, w.Ready(), "the end of an earlier generation is not this one's")
	assert.InDelta(t, 1, joined(), 0)

	w.leave()
	assert.Zero(t, joined())
	require.Error(t, w.Ready())
}
