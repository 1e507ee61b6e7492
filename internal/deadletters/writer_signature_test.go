package deadletters_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
)

// TestDeadLetterKeepsTheStatementSignature: a dead letter carries the input
// message's x-paycb-statement-signature, its value kept or omitted, so a
// redrive can restore it; the input's other headers stay behind, and a
// message without one gets none.
func TestDeadLetterKeepsTheStatementSignature(t *testing.T) {
	const sig = "k1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name          string
		dlqMax, value int
		omitted       bool
	}{
		{"value kept", 1 << 20, 100, false},
		{"value omitted for its size", 64 << 10, 200 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := mustSizedKafka(t, 1<<20, tc.dlqMax)
			msg := kafka.Message{
				Topic: dlTopic, Partition: 0, Offset: 4, Key: []byte("WECHAT:T-signed"), Value: bytes.Repeat([]byte("v"), tc.value),
				Headers: []kafka.Header{{Key: "x-other", Value: []byte("dropped")}, {Key: statementauth.HeaderSignature, Value: []byte(sig)}},
			}
			dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 0, deadletters.WithMaxMessageBytes(1<<20))
			t.Cleanup(func() { _ = dl.Close() })
			require.NoError(t, dl.DeadLetter(context.Background(), msg, channels.KindUnauthenticated, "statement event: unknown statement key"))

			out := readOne(t, brokers, dlDLQ, 1<<20)
			h := headerMap(out)
			assert.Equal(t, sig, h[statementauth.HeaderSignature])
			assert.Equal(t, "unauthenticated", h[deadletters.HeaderErrorKind])
			assert.NotContains(t, h, "x-other")
			if tc.omitted {
				assert.Empty(t, out.Value)
				assert.Equal(t, strconv.Itoa(tc.value), h[deadletters.HeaderValueOmitted])
			} else {
				assert.Equal(t, msg.Value, out.Value)
				assert.NotContains(t, h, deadletters.HeaderValueOmitted)
			}
		})
	}
	t.Run("none without one", func(t *testing.T) {
		brokers := mustSizedKafka(t, 1<<20, 1<<20)
		dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 0)
		t.Cleanup(func() { _ = dl.Close() })
		msg := kafka.Message{Topic: dlTopic, Offset: 1, Key: []byte("k"), Value: []byte("{}")}
		require.NoError(t, dl.DeadLetter(context.Background(), msg, channels.KindMalformed, "bad json"))
		assert.NotContains(t, headerMap(readOne(t, brokers, dlDLQ, 1<<20)), statementauth.HeaderSignature)
	})
}

// TestDeadLetterKeepsXRedrivenFrom: the dead letter of a redriven message
// keeps its x-redriven-from, naming the dead letter it supersedes.
func TestDeadLetterKeepsXRedrivenFrom(t *testing.T) {
	brokers := mustSizedKafka(t, 1<<20, 1<<20)
	dl := deadletters.NewKafkaWriter(brokers, dlDLQ, 0)
	t.Cleanup(func() { _ = dl.Close() })
	from := dlDLQ + "/0@7"
	msg := kafka.Message{
		Topic: dlTopic, Offset: 12, Key: []byte("junk"), Value: []byte("not an envelope"),
		Headers: []kafka.Header{{Key: deadletters.HeaderRedrivenFrom, Value: []byte(from)}},
	}
	require.NoError(t, dl.DeadLetter(context.Background(), msg, channels.KindMalformed, "bad json"))
	h := headerMap(readOne(t, brokers, dlDLQ, 1<<20))
	assert.Equal(t, from, h[deadletters.HeaderRedrivenFrom])
	assert.Equal(t, "12", h[deadletters.HeaderSourceOffset], "its own source: the redriven message")
}
