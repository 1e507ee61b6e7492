package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
)

func TestParseOffsets(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[int]int64
		ok   bool
	}{
		{"one", "0:5", map[int]int64{0: 5}, true},
		{"several with spaces", "0:5, 2:0 ,1:17", map[int]int64{0: 5, 1: 17, 2: 0}, true},
		{"missing colon", "0-5", nil, false},
		{"negative offset", "0:-1", nil, false},
		{"partition twice", "0:1,0:2", nil, false},
		{"empty", "", nil, false},
		{"not a number", "a:1", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ops.ParseOffsets(tt.in)
			if !tt.ok {
				require.ErrorIs(t, err, ops.ErrInvalidTarget)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReplayPlanAndApply(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 2)
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	recent := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	// Partition 0: offsets 0-2 old, 3-4 recent. Partition 1: 0-3 old only.
	produceAt(t, k, testTopic, 0, 3, old)
	produceAt(t, k, testTopic, 0, 2, recent)
	produceAt(t, k, testTopic, 1, 4, old)
	// The group has consumed everything on partition 0 and half of 1.
	commit(t, k, map[int]int64{0: 5, 1: 2})

	tests := []struct {
		name    string
		target  ops.ReplayTarget
		want    map[int]int64 // partition -> target
		replay  int64
		skip    int64
		wantErr error
	}{
		{"earliest", ops.ReplayTarget{Earliest: true}, map[int]int64{0: 0, 1: 0}, 5 + 2, 0, nil},
		{"datetime between", ops.ReplayTarget{At: old.Add(30 * time.Minute)}, map[int]int64{0: 3, 1: 4}, 2, 2, nil},
		{"datetime before all", ops.ReplayTarget{At: old.Add(-time.Minute)}, map[int]int64{0: 0, 1: 0}, 7, 0, nil},
		{"offsets, one partition", ops.ReplayTarget{Offsets: map[int]int64{0: 1}}, map[int]int64{0: 1}, 4, 0, nil},
		{"offset past the end", ops.ReplayTarget{Offsets: map[int]int64{0: 6}}, nil, 0, 0, ops.ErrInvalidTarget},
		{"unknown partition", ops.ReplayTarget{Offsets: map[int]int64{7: 0}}, nil, 0, 0, ops.ErrInvalidTarget},
		{"no target", ops.ReplayTarget{}, nil, 0, 0, ops.ErrInvalidTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := ops.PlanReplay(ctx, k, tt.target)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			got := map[int]int64{}
			for _, r := range plan.Partitions {
				got[r.Partition] = r.Target
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.replay, plan.TotalReplay(), "messages to replay")
			assert.Equal(t, tt.skip, plan.TotalSkip(), "messages skipped")
			assert.Contains(t, plan.KafkaCommand(k.Brokers, tt.target, ops.KafkaCommandOptions{}), "--group "+testGroup)
		})
	}

	// Applying a plan moves the committed offsets, as the broker reports them.
	plan, err := ops.PlanReplay(ctx, k, ops.ReplayTarget{Offsets: map[int]int64{0: 1, 1: 3}})
	require.NoError(t, err)
	require.NoError(t, ops.ApplyReplay(ctx, k, plan))
	ps, err := kafkaops.Progress(ctx, k.Brokers, testGroup, testTopic)
	require.NoError(t, err)
	got := map[int]int64{}
	for _, p := range ps {
		got[p.Partition] = p.Committed
	}
	assert.Equal(t, map[int]int64{0: 1, 1: 3}, got)
}

func TestReplayRefusesLiveGroup(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 1)
	produceAt(t, k, testTopic, 0, 1, time.Now())
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: k.Brokers, Topic: testTopic, GroupID: testGroup,
		MaxWait: 100 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
	})
	t.Cleanup(func() { _ = r.Close() })
	fetchCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		for fetchCtx.Err() == nil {
			if _, err := r.FetchMessage(fetchCtx); err != nil {
				return
			}
		}
	}()
	eventually(t, 20*time.Second, "the reader to join the group", func() bool {
		st, err := k.DescribeGroup(ctx)
		return err == nil && len(st.Members) > 0
	})
	_, err := ops.PlanReplay(ctx, k, ops.ReplayTarget{Earliest: true})
	require.ErrorIs(t, err, ops.ErrGroupActive)
	err = ops.ApplyReplay(ctx, k, ops.ReplayPlan{
		Topic: testTopic, Group: testGroup,
		Partitions: []ops.PartitionReset{{Partition: 0, Target: 0}},
	})
	require.ErrorIs(t, err, ops.ErrGroupActive)
	assert.NotErrorIs(t, err, ops.ErrInvalidTarget)
}
