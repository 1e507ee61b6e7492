package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/ops"
)

// TestStatusTextShowsWhatAPartitionIsStuckOn: below the partitions table,
// each stuck partition's message: offset, key, since when and the last
// error in full; partitions not stuck are not listed.
func TestStatusTextShowsWhatAPartitionIsStuckOn(t *testing.T) {
	stalled, fine := 75.0, 0.0
	since := time.Now().Add(-75 * time.Second).UTC()
	longErr := "settle: ALIPAY:2024060122001 REFUND_SUCCEEDED: Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction " +
		string(bytes.Repeat([]byte("x"), 200))
	rep := ops.StatusReport{
		Group: "settlement-consumer", Topic: "channel-events", State: "Stable",
		Members: []ops.MemberStatus{{ID: "m-1", ClientID: "paycb@127.0.0.1:9464", Admin: "127.0.0.1:9464", Partitions: []int{0, 1}, Reachable: true}},
		Partitions: []ops.PartitionStatus{
			{Partition: 0, Member: "m-1", Committed: 10, End: 10, StalledSeconds: &fine},
			{Partition: 1, Member: "m-1", Committed: 4, End: 9, Lag: 5, StalledSeconds: &stalled, Stuck: &ops.StuckMessage{
				Offset: 4, Key: "ALIPAY:2024060122001", Since: since, Attempts: 12, Error: longErr,
			}},
		},
		TotalLag: 5,
	}
	var buf bytes.Buffer
	out := &printer{w: &buf}
	printStatus(out, rep)
	require.NoError(t, out.err)
	text := buf.String()
	line := regexp.MustCompile(`(?m)^partition 1 at offset 4, key "ALIPAY:2024060122001", since (\S+) \(1m1[45]s\): 12 failed attempts, last: (.*)$`).FindStringSubmatch(text)
	require.NotNil(t, line, text)
	assert.Equal(t, since.Format(time.RFC3339), line[1])
	assert.Equal(t, longErr, line[2], "the error in full")
	assert.Contains(t, text, "\nstuck partitions:\n")
	assert.NotRegexp(t, `(?m)^partition 0 at`, text)

	rep.Partitions[1].Stuck = nil
	buf.Reset()
	printStatus(out, rep)
	assert.NotContains(t, buf.String(), "stuck partitions", "nothing stuck, no section")
}
