package settledpubtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/settled"
)

// Schema compiles docs/settled-event.schema.json, with format assertions
// on (date-time).
func Schema(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(tb, ok)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "settled-event.schema.json"))
	require.NoError(tb, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(tb, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(tb, c.AddResource("settled-event.schema.json", doc))
	sch, err := c.Compile("settled-event.schema.json")
	require.NoError(tb, err)
	return sch
}

// Published is one message read from the settled-event topic, decoded.
type Published struct {
	Event     settled.Event
	Partition int
	Offset    int64
}

// Read reads every message of topic and checks each: valid against the
// schema, its value byte for byte the outbox row of its event_id, its key
// the trade, its headers the event id and the content type. It returns
// them in partition then offset order.
func Read(tb testing.TB, db bun.IDB, brokers []string, topic string) []Published {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := kafkaops.ReadAll(ctx, brokers, topic)
	require.NoError(tb, err)
	var rows []struct {
		TenantID int64  `bun:"tenant_id"`
		Key      string `bun:"idempotent_key"`
		Value    []byte `bun:"value"`
	}
	require.NoError(tb, db.NewSelect().Table("ss_settled_outbox").Column("tenant_id", "idempotent_key", "value").Scan(ctx, &rows))
	stored := make(map[string][]byte, len(rows))
	for _, r := range rows {
		stored[settled.EventID(r.TenantID, r.Key)] = r.Value
	}
	sch := Schema(tb)
	out := make([]Published, 0, len(msgs))
	for _, m := range msgs {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(m.Value))
		require.NoError(tb, err, "%s", m.Value)
		require.NoError(tb, sch.Validate(v), "%s", m.Value)
		e, err := settled.Decode(m.Value)
		require.NoError(tb, err)
		want, ok := stored[e.EventID]
		require.True(tb, ok, "%s published without an outbox row", e.EventID)
		require.True(tb, bytes.Equal(want, m.Value), "%s: published value is not the stored bytes:\n%s\n%s", e.EventID, m.Value, want)
		assert.Equal(tb, e.MessageKey(), string(m.Key))
		headers := map[string]string{}
		for _, h := range m.Headers {
			headers[h.Key] = string(h.Value)
		}
		assert.Equal(tb, map[string]string{settled.HeaderEventID: e.EventID, settled.HeaderContentType: settled.ContentType}, headers)
		out = append(out, Published{Event: e, Partition: m.Partition, Offset: m.Offset})
	}
	return out
}

// RequireOrdered fails tb unless, per trade, trade_seq strictly increases
// along the topic (one partition per trade, as the key places it): no
// event out of order, none twice.
func RequireOrdered(tb testing.TB, pubs []Published) {
	tb.Helper()
	type trade struct{ key string }
	last := map[trade]int64{}
	part := map[trade]int{}
	for _, p := range pubs {
		t := trade{p.Event.MessageKey()}
		if prev, ok := part[t]; ok {
			require.Equal(tb, prev, p.Partition, "%s: one trade, one partition", t.key)
		}
		part[t] = p.Partition
		require.Greater(tb, p.Event.TradeSeq, last[t], "%s: trade_seq %d after %d on the topic", t.key, p.Event.TradeSeq, last[t])
		last[t] = p.Event.TradeSeq
	}
}

// Refuse makes cluster answer every produce to topic with
// TOPIC_AUTHORIZATION_FAILED while on is true: the broker refusing the
// settled-event topic. Other topics, and topic while on is false, are
// served as usual.
func Refuse(cluster *kfake.Cluster, topic string, on *atomic.Bool) {
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		q := req.(*kmsg.ProduceRequest)
		if !on.Load() || !slices.ContainsFunc(q.Topics, func(t kmsg.ProduceRequestTopic) bool { return t.Topic == topic }) {
			return nil, nil, false
		}
		resp := q.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range q.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
}

// RequireInOrder is RequireOrdered for at-least-once delivery: per trade,
// trade_seq never decreases along the topic, and an event may repeat
// (Read has checked that every copy is the same bytes). It returns how
// many messages repeated an event.
func RequireInOrder(tb testing.TB, pubs []Published) (repeats int) {
	tb.Helper()
	last := map[string]int64{}
	for _, p := range pubs {
		key := p.Event.MessageKey()
		require.GreaterOrEqual(tb, p.Event.TradeSeq, last[key], "%s: trade_seq %d after %d on the topic", key, p.Event.TradeSeq, last[key])
		if p.Event.TradeSeq == last[key] {
			repeats++
		}
		last[key] = p.Event.TradeSeq
	}
	return repeats
}
