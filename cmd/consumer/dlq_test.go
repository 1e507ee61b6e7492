package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/pkg/channels"
)

func TestDLQRedriveRefusesADeadLetterWithoutItsValue(t *testing.T) {
	ctx := context.Background()
	cluster, brokers, err := inprocess.Start(map[string]int32{"channel-events": 1, "channel-events.dlq": 1, "channel-events.settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	_, err = (&kafka.Client{Addr: kafka.TCP(brokers...)}).AlterConfigs(ctx, &kafka.AlterConfigsRequest{
		Resources: []kafka.AlterConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: "channel-events.dlq",
			Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: "65536"}},
		}},
	})
	require.NoError(t, err)
	vars := map[string]string{"PAYCB_KAFKA_BROKERS": brokers[0], "PAYCB_LOG_LEVEL": "warn"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }

	dl := deadletters.NewKafkaWriter(brokers, "channel-events.dlq", 0)
	t.Cleanup(func() { _ = dl.Close() })
	for _, m := range []kafka.Message{
		{Topic: "channel-events", Partition: 0, Offset: 41, Key: []byte("WECHAT:T-big"), Value: bytes.Repeat([]byte("v"), 200<<10)},
		{Topic: "channel-events", Partition: 0, Offset: 42, Key: []byte("WECHAT:T-small"), Value: []byte("{}")},
	} {
		require.NoError(t, dl.DeadLetter(ctx, m, channels.KindNoKey, "no APIv3 key for tenant 1001"))
	}

	out, _, err := runCmd(t, lookup, "dlq", "list")
	require.NoError(t, err, out)
	assert.Contains(t, out, "dead letters in channel-events.dlq: 2")
	assert.Contains(t, out, "value omitted (too large for channel-events.dlq; not redrivable): 1")
	assert.Regexp(t, `WECHAT:T-big\s+channel-events/0@41\s+OMITTED \(204800 B\)\s`, out)
	assert.Regexp(t, `WECHAT:T-small\s+channel-events/0@42\s+2 B\s`, out)

	tests := []struct {
		name      string
		args      []string
		published int
	}{
		{"dry run", []string{"--dry-run"}, 0},
		{"for real", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, lookup, append([]string{"dlq", "redrive", "--kind", "no_key"}, tt.args...)...)
			require.Error(t, err, out)
			assert.Equal(t, 4, exitCode(err), "refused as unsafe")
			require.ErrorIs(t, err, deadletters.ErrValueOmitted)
			assert.Contains(t, err.Error(), "refused 1 of 2 dead letters")
			assert.Contains(t, out, "selected: 2")
			assert.Contains(t, out, "refused channel-events.dlq/0@0 (key WECHAT:T-big)")
			assert.Contains(t, out, "204800 bytes")
			assert.Contains(t, out, "the original is at channel-events/0@41")
			in, err := kafkaops.ReadAll(ctx, brokers, "channel-events")
			require.NoError(t, err)
			require.Len(t, in, tt.published)
			if tt.published > 0 {
				assert.Contains(t, out, "published 1 messages to channel-events")
				assert.Equal(t, "WECHAT:T-small", string(in[0].Key))
				assert.Equal(t, "{}", string(in[0].Value))
			} else {
				assert.Contains(t, out, "nothing published")
			}
		})
	}
}
