package pipeline

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// failingRecords is a DeadLetterRecords whose first fail inserts fail.
type failingRecords struct {
	*deadletters.Store
	fail atomic.Int32
}

var errInsert = errors.New("insert refused")

func (f *failingRecords) Record(ctx context.Context, r deadletters.Record) error {
	if f.fail.Add(-1) >= 0 {
		return errInsert
	}
	return f.Store.Record(ctx, r)
}

// at is the message at topic/1@offset with value v.
func at(offset int64, v []byte) kafka.Message {
	return kafka.Message{Topic: "channel-events", Partition: 1, Offset: offset, Key: []byte("k"), Value: v}
}

func (e *pipelineEnv) handleMsgs(t *testing.T, msgs ...kafka.Message) {
	t.Helper()
	states := make([]MessageState, len(msgs))
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
}

func (e *pipelineEnv) records(t *testing.T) []deadletters.Record {
	t.Helper()
	var srcs []deadletters.Source
	for o := range int64(10) {
		srcs = append(srcs, deadletters.Source{Topic: "channel-events", Partition: 1, Offset: o})
	}
	recs, err := deadletters.NewStore(e.db).ForSources(context.Background(), srcs)
	require.NoError(t, err)
	return recs
}

// TestDeadLetterWrittenOnce: a message dead-lettered again (a replay, a
// new group) finds its record and is not written again, while it still
// counts as its outcome; the records carry the event as far as it decoded.
func TestDeadLetterWrittenOnce(t *testing.T) {
	e := newPipelineEnv(t)
	e.p.DeadLetterRecords = deadletters.NewStore(e.db)
	tr := channelstest.NewTrade(channels.Alipay, 1)
	other := tr
	other.Total = tr.Total + 1 // the same key, another amount
	msgs := []kafka.Message{
		at(0, []byte("not an envelope")),
		at(1, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})),
		at(2, channelstest.PaymentEnvelope(other, channelstest.Delivery{})),
	}
	e.handleMsgs(t, msgs...)
	require.Equal(t, []deadLetterAt{{0, channels.KindMalformed}, {2, channels.KindConflict}}, e.dl.letters())

	e.handleMsgs(t, msgs...) // the replay
	assert.Equal(t, []deadLetterAt{{0, channels.KindMalformed}, {2, channels.KindConflict}}, e.dl.letters(), "no second dead letter")
	assert.InDelta(t, 1, sumCounter(t, e, "paycb_dead_letters_total", "kind", "conflict"), 0, "written once, counted once")
	assert.InDelta(t, 2, sumCounter(t, e, "paycb_events_total", "outcome", "conflict"), 0,
		"the replayed conflict still counts as its outcome")

	recs := e.records(t)
	require.Len(t, recs, 2)
	byKind := map[string]deadletters.Record{}
	for _, r := range recs {
		byKind[r.Kind] = r
	}
	c := byKind[string(channels.KindConflict)]
	ev := e.decode(t, msgs[2].Value)
	assert.Equal(t, int64(2), c.SourceOffset)
	assert.Equal(t, deadletters.Hash(msgs[2].Key, msgs[2].Value), c.MessageHash)
	assert.Equal(t, ev.TenantID, c.TenantID)
	assert.Equal(t, string(ev.Key), c.Key)
	assert.Equal(t, ev.Fingerprint, c.Fingerprint)
	assert.Equal(t, "ALIPAY", c.Channel)
	assert.Equal(t, tr.TradeNo, c.TradeNo)
	assert.Contains(t, c.Error, "already claimed")
	m := byKind[string(channels.KindMalformed)]
	assert.Zero(t, m.TenantID, "nothing decoded")
	assert.Empty(t, m.Key)

	// Other bytes at the same coordinates (a recreated topic) are another
	// message: dead-lettered.
	e.handleMsgs(t, at(0, []byte("another bad value")))
	assert.Len(t, e.dl.letters(), 3)
}

// TestDeadLetterRecordFailureRetriesWithoutASecondWrite: the dead letter
// is written, its record insert fails, so the message fails at the
// dead_letter stage; its retry inserts the record without writing the
// dead letter again.
func TestDeadLetterRecordFailureRetriesWithoutASecondWrite(t *testing.T) {
	e := newPipelineEnv(t)
	recs := &failingRecords{Store: deadletters.NewStore(e.db)}
	recs.fail.Store(2)
	e.p.DeadLetterRecords = recs
	tr := channelstest.NewTrade(channels.WeChat, 3)
	msgs := []kafka.Message{at(0, channelstest.Envelope(tr.TenantID, channels.WeChat, "{", channelstest.BaseTime))}
	states := make([]MessageState, 1)

	for range 2 {
		err := e.p.Handle(context.Background(), msgs, states)
		require.ErrorIs(t, err, deadletters.ErrNotRecorded)
		require.ErrorIs(t, err, errInsert)
		assert.Equal(t, metrics.StageDeadLetter, StageOf(err))
		assert.False(t, states[0].done)
	}
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
	assert.True(t, states[0].done)
	assert.Equal(t, []deadLetterAt{{0, channels.KindMalformed}}, e.dl.letters(), "written once across the retries")
	got := e.records(t)
	require.Len(t, got, 1)
	assert.Equal(t, tr.TenantID, got[0].TenantID, "the envelope decoded that far")
	assert.Equal(t, "WECHAT", got[0].Channel)
	assert.InDelta(t, 1, sumCounter(t, e, "paycb_dead_letters_total", "kind", "malformed"), 0)
}

// sumCounter sums the series of the counter name whose label is value.
func sumCounter(t *testing.T, e *pipelineEnv, name, label, value string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
