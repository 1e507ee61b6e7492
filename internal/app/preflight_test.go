package app_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paycallback/paycallback/internal/demo"
)

func TestTheConsumerGroupNeverAsksForATopicToBeCreated(t *testing.T) {
	h := newHarness(t, 2)
	var asked, metadata atomic.Int64
	h.cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		metadata.Add(1)
		if req.(*kmsg.MetadataRequest).AllowAutoTopicCreation {
			asked.Add(1)
		}
		return nil, nil, false // observe only
	})
	s := demo.Generate(demo.StreamOptions{Seed: 41, Trades: 5, NoTraps: true})
	h.produce(s.Messages)
	before := asked.Load() // the test's own producer may ask
	w := h.start(nil)
	// Wait on the worker's own metrics: the test's offset helpers list
	// partitions the way kafka-go's consumer group does, asking for
	// auto-creation.
	require.Eventually(t, func() bool {
		return counted(t, w.main, "paycb_events_total", nil) >= float64(len(s.Messages))
	}, time.Minute, 20*time.Millisecond)
	require.Positive(t, metadata.Load())
	assert.Equal(t, before, asked.Load(), "the worker asked the broker to create a topic")
}
