package deadletters_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// workerWorld is an in-process cluster, a migrated MariaDB database and a
// worker configuration on them.
type workerWorld struct {
	k       kafkaops.Kafka
	group   kafkaops.Kafka
	cluster *kfake.Cluster
	cfg     config.Config
	db      *bun.DB
	dec     *channels.Decoder
}

func newWorkerWorld(t *testing.T) *workerWorld {
	t.Helper()
	k, cluster := mustCluster(t, 2)
	group := kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Topic, Group: testGroup, DLQTopic: k.DLQTopic, Timeout: k.Timeout}
	cfg, db := migratedWorker(t, group)
	return &workerWorld{k: k, group: group, cluster: cluster, cfg: cfg, db: db, dec: channels.NewDecoder(channelstest.Keys())}
}

// consume runs the worker until it has consumed everything produced.
func (w *workerWorld) consume(t *testing.T) {
	t.Helper()
	stop := runWorker(t, w.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, kafkaops.WaitConsumed(ctx, w.k.Brokers, w.group.Group, w.k.Topic, 50*time.Millisecond, nil))
	stop()
}

func (w *workerWorld) list(t *testing.T) []deadletters.State {
	t.Helper()
	states, err := deadletters.List(context.Background(), w.k, w.db, w.dec, deadletters.Filter{})
	require.NoError(t, err)
	return states
}

// dropDeadLetterTopicRecords lets the dead-letter topic's retention remove
// every record it holds, as a topic whose retention passed does.
func (w *workerWorld) dropDeadLetterTopicRecords(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	client := &kafka.Client{Addr: kafka.TCP(w.k.Brokers...), Timeout: 10 * time.Second}
	end, err := kafkaops.ListOffsets(ctx, client, w.k.DLQTopic, []int{0}, kafka.LastOffset)
	require.NoError(t, err)
	_, err = client.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: w.k.DLQTopic,
		Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: "1"}},
	}}})
	require.NoError(t, err)
	eventually(t, 10*time.Second, "retention to remove the dead letters", func() bool {
		w.cluster.ApplyRetention()
		first, err := kafkaops.ListOffsets(ctx, client, w.k.DLQTopic, []int{0}, kafka.FirstOffset)
		return err == nil && first[0] == end[0]
	})
	_, err = client.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: w.k.DLQTopic,
		Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: "604800000"}},
	}}})
	require.NoError(t, err)
}

// TestDeadLetterTheTopicLostIsListedAndClosable: a dead letter the worker
// wrote and recorded, whose record the dead-letter topic's retention then
// removed, is still listed (from its row, its body lost) under its row id,
// found by that id, refused by redrive, and closed; a dead letter with no
// row (written before the table) is listed from the topic under its p id.
func TestDeadLetterTheTopicLostIsListedAndClosable(t *testing.T) {
	ctx := context.Background()
	w := newWorkerWorld(t)
	require.NoError(t, kafkaops.Produce(ctx, w.k.Brokers, w.k.Topic, []kafkaops.Message{{Key: []byte("junk"), Value: []byte("not an envelope")}}))
	w.consume(t)
	before := w.list(t)
	require.Len(t, before, 1)
	require.NotNil(t, before[0].Record)
	id := before[0].ID
	assert.Equal(t, "p0-0", deadletters.LetterID(nil, before[0].Message), "its position, were it without a row")
	assert.NotEqual(t, "p0-0", id, "its row's id")

	w.dropDeadLetterTopicRecords(t)
	ds, err := deadletters.ReadTopic(ctx, w.k, deadletters.Filter{})
	require.NoError(t, err)
	require.Empty(t, ds, "the topic no longer holds it")
	// A dead letter without a row: written to the topic alone.
	dl := deadletters.NewKafkaWriter(w.k.Brokers, w.k.DLQTopic, 0)
	t.Cleanup(func() { _ = dl.Close() })
	require.NoError(t, dl.DeadLetter(ctx, kafka.Message{Topic: w.k.Topic, Partition: 1, Offset: 9, Key: []byte("k"), Value: []byte("{")},
		channels.KindMalformed, "written before ss_dead_letter existed"))

	after := w.list(t)
	require.Len(t, after, 2, "the union of the table and the topic")
	lost, rowless := after[0], after[1]
	assert.Equal(t, id, lost.ID, "the same id")
	assert.True(t, lost.Message.BodyLost)
	assert.Equal(t, "malformed", lost.Message.Kind)
	assert.Equal(t, testTopic+"/"+before[0].Message.Source[len(testTopic)+1:], lost.Message.Source)
	assert.Equal(t, deadletters.StatusOpen, lost.Status)
	assert.False(t, rowless.Message.BodyLost)
	assert.Nil(t, rowless.Record)
	assert.Equal(t, "p0-1", rowless.ID, "the first offset after the lost one")
	assert.Equal(t, deadletters.StatusOpen, rowless.Status)

	ref, err := deadletters.ParseID(id)
	require.NoError(t, err)
	found, err := deadletters.Find(ctx, w.k, w.db, w.dec, ref)
	require.NoError(t, err)
	assert.True(t, found.Message.BodyLost)
	_, refused := deadletters.SplitRedrive([]deadletters.Message{found.Message})
	require.Len(t, refused, 1)
	require.ErrorIs(t, refused[0].Reason, deadletters.ErrBodyLost)
	assert.Contains(t, refused[0].Reason.Error(), before[0].Message.Source, "says where the original was")
	require.ErrorIs(t, deadletters.Redrive(ctx, w.k, []deadletters.Message{found.Message}), deadletters.ErrBodyLost)

	rec, changed, err := deadletters.Close(ctx, w.db, w.dec, found, "ops@host", "retention passed; the merchant resent it")
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "retention passed; the merchant resent it", rec.CloseNote)

	ref, err = deadletters.ParseID(rowless.ID)
	require.NoError(t, err)
	found, err = deadletters.Find(ctx, w.k, w.db, w.dec, ref)
	require.NoError(t, err)
	_, changed, err = deadletters.Close(ctx, w.db, w.dec, found, "ops@host", "written before the table")
	require.NoError(t, err)
	assert.True(t, changed)

	closed := w.list(t)
	require.Len(t, closed, 2)
	for _, st := range closed {
		assert.Equal(t, deadletters.StatusClosed, st.Status, st.ID)
	}
	assert.Equal(t, id, closed[0].ID)
	// The p id keeps naming its dead letter once it has a row.
	found, err = deadletters.Find(ctx, w.k, w.db, w.dec, deadletters.LetterRef{At: &deadletters.At{Partition: 0, Offset: 1}})
	require.NoError(t, err)
	assert.Equal(t, closed[1].ID, found.ID)
	assert.Equal(t, deadletters.StatusClosed, found.Status)
}

// open counts the open dead letters among states.
func open(states []deadletters.State) int {
	n := 0
	for _, st := range states {
		if st.Status == deadletters.StatusOpen {
			n++
		}
	}
	return n
}

// TestRedriveThatFailsAgainSupersedesItsOriginal: a malformed and a
// conflict dead letter, redriven, fail again: each new dead letter keeps
// x-redriven-from, its original is resolved as redriven, and each original
// message keeps exactly one open dead letter; a second redrive of the same
// original writes none; a redrive without the database (no position
// recorded) is linked by the message's bytes.
func TestRedriveThatFailsAgainSupersedesItsOriginal(t *testing.T) {
	ctx := context.Background()
	w := newWorkerWorld(t)
	alipay := channelstest.NewTrade(channels.Alipay, 2)
	conflicting := alipay
	conflicting.Total = alipay.Total + 100
	require.NoError(t, kafkaops.Produce(ctx, w.k.Brokers, w.k.Topic, []kafkaops.Message{
		{Key: []byte("junk"), Value: []byte("not an envelope")},
		{Key: []byte("ALIPAY:" + alipay.TradeNo), Value: channelstest.PaymentEnvelope(alipay, channelstest.Delivery{})},
		{Key: []byte("ALIPAY:" + alipay.TradeNo), Value: channelstest.PaymentEnvelope(conflicting, channelstest.Delivery{})},
	}))
	w.consume(t)
	first := w.list(t)
	require.Len(t, first, 2)
	require.Equal(t, 2, open(first))
	byKind := func(states []deadletters.State, status deadletters.Status) map[string]deadletters.State {
		out := map[string]deadletters.State{}
		for _, st := range states {
			if st.Status == status {
				_, dup := out[st.Message.Kind]
				require.False(t, dup, "one %s %s dead letter", status, st.Message.Kind)
				out[st.Message.Kind] = st
			}
		}
		return out
	}
	originals := byKind(first, deadletters.StatusOpen)

	redrive := func(note bool, sts ...deadletters.State) {
		t.Helper()
		ds := make([]deadletters.Message, len(sts))
		for i, st := range sts {
			ds[i] = st.Message
		}
		if note {
			require.NoError(t, deadletters.NoteRedriven(ctx, w.db, w.dec, ds))
		}
		require.NoError(t, deadletters.Redrive(ctx, w.k, ds))
		w.consume(t)
	}
	redrive(true, originals["malformed"], originals["conflict"])
	second := w.list(t)
	require.Len(t, second, 4, "each failed again")
	assert.Equal(t, 2, open(second), "one open dead letter per original message")
	again := byKind(second, deadletters.StatusOpen)
	superseded := byKind(second, deadletters.StatusRedriven)
	for _, kind := range []string{"malformed", "conflict"} {
		orig, next := superseded[kind], again[kind]
		assert.Equal(t, originals[kind].ID, orig.ID, kind)
		assert.Equal(t, next.ID, orig.Successor, kind)
		assert.Equal(t, orig.Message.Position(w.k.DLQTopic), next.RedrivenFrom(), "%s: the new dead letter keeps x-redriven-from", kind)
		assert.Equal(t, orig.Message.Position(w.k.DLQTopic), next.Record.RedrivenFrom, kind)
		assert.Equal(t, orig.Record.RowID, next.Record.RedrivenFromID, kind)
	}

	// The same originals redriven again: their failures are recorded
	// already; nothing new is written.
	redrive(true, originals["malformed"], originals["conflict"])
	third := w.list(t)
	assert.Len(t, third, 4, "no dead letter written again")
	assert.Equal(t, 2, open(third))

	// The new ones redriven with no position recorded (no database at the
	// redrive): linked by their bytes all the same.
	redrive(false, again["malformed"], again["conflict"])
	fourth := w.list(t)
	require.Len(t, fourth, 6)
	assert.Equal(t, 2, open(fourth), "still one open dead letter per original message")
	latest := byKind(fourth, deadletters.StatusOpen)
	for _, kind := range []string{"malformed", "conflict"} {
		assert.Equal(t, again[kind].Record.RowID, latest[kind].Record.RedrivenFromID, kind)
	}
	redriven := 0
	for _, st := range fourth {
		if st.Status == deadletters.StatusRedriven {
			redriven++
		}
	}
	assert.Equal(t, 4, redriven)
}

// TestASecondCopyOfARecordedDeadLetterIsADuplicate: a dead letter written
// twice (its worker died between the write and the record, and the retry
// wrote it again) is listed twice, under two ids, the copy without the
// row as a duplicate of the other: one open dead letter, not two.
func TestASecondCopyOfARecordedDeadLetterIsADuplicate(t *testing.T) {
	ctx := context.Background()
	w := newWorkerWorld(t)
	dl := deadletters.NewKafkaWriter(w.k.Brokers, w.k.DLQTopic, 0)
	t.Cleanup(func() { _ = dl.Close() })
	msg := kafka.Message{Topic: w.k.Topic, Partition: 0, Offset: 4, Key: []byte("junk"), Value: []byte("not an envelope")}
	for range 2 {
		require.NoError(t, dl.DeadLetter(ctx, msg, channels.KindMalformed, "bad"))
	}
	id := deadletters.NewID(msg.Topic, msg.Partition, msg.Offset, msg.Key, msg.Value, "malformed")
	require.NoError(t, deadletters.NewStore(w.db).Record(ctx, deadletters.Record{ID: id, Error: "bad"}))

	states := w.list(t)
	require.Len(t, states, 2)
	assert.Equal(t, 1, open(states))
	first, second := states[0], states[1]
	if first.Status == deadletters.StatusDuplicate {
		first, second = second, first
	}
	assert.Equal(t, deadletters.StatusOpen, first.Status)
	require.NotNil(t, first.Record)
	assert.Equal(t, deadletters.StatusDuplicate, second.Status)
	assert.Equal(t, "p0-"+strconv.FormatInt(second.Message.Offset, 10), second.ID)
	assert.NotEqual(t, first.Message.Offset, second.Message.Offset)
	assert.Equal(t, first.ID, second.Successor, "names the copy with the row")
}
