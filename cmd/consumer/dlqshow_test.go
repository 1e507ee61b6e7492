package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

const openID = "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o" // the payer of channelstest's WeChat payments

// TestDLQShowCloseAndList: show prints a WeChat dead letter's headers,
// envelope and resource but its plaintext only with --decrypt; close needs
// a note, records who closed it and says so when asked again; list shows
// the conflict closed; redrive takes one dead letter by --at.
func TestDLQShowCloseAndList(t *testing.T) {
	base, _ := opsEnv(t)
	lookup := func(k string) (string, bool) {
		if k == "PAYCB_WECHAT_APIV3_KEY" {
			return channelstest.APIv3Key, true
		}
		return base(k)
	}
	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")
	dl := deadletters.NewKafkaWriter([]string{brokers}, "channel-events.dlq", 0)
	t.Cleanup(func() { _ = dl.Close() })
	wechat := channelstest.NewTrade(channels.WeChat, 1)
	alipay := channelstest.NewTrade(channels.Alipay, 2)
	for _, m := range []struct {
		offset int64
		value  []byte
		kind   channels.ErrorKind
	}{
		{40, channelstest.PaymentEnvelope(wechat, channelstest.Delivery{}), channels.KindNoKey},
		{41, channelstest.PaymentEnvelope(alipay, channelstest.Delivery{}), channels.KindConflict},
	} {
		msg := kafka.Message{Topic: "channel-events", Partition: 1, Offset: m.offset, Key: []byte("k"), Value: m.value}
		require.NoError(t, dl.DeadLetter(context.Background(), msg, m.kind, "because"))
	}

	out, _, err := runCmd(t, lookup, "dlq", "show", "--at", "0:0")
	require.NoError(t, err, out)
	assert.Contains(t, out, "dead letter channel-events.dlq/0@0")
	assert.Contains(t, out, "x-error-kind: no_key")
	assert.Contains(t, out, "x-source-offset: 40")
	assert.Contains(t, out, "envelope: tenant 1001, channel WECHAT")
	assert.Contains(t, out, "algorithm AEAD_AES_256_GCM")
	assert.Contains(t, out, "not shown (personal data)")
	assert.Contains(t, out, "status:   open")
	assert.NotContains(t, out, openID, "no plaintext without --decrypt")

	out, _, err = runCmd(t, lookup, "dlq", "show", "--at", "0:0", "--json")
	require.NoError(t, err, out)
	assert.NotContains(t, out, openID)
	var v struct {
		Kind     string `json:"kind"`
		Status   string `json:"status"`
		Envelope struct {
			Channel string `json:"channel"`
		} `json:"envelope"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, "no_key", v.Kind)
	assert.Equal(t, "open", v.Status)
	assert.Equal(t, "WECHAT", v.Envelope.Channel)

	out, _, err = runCmd(t, lookup, "dlq", "show", "--at", "0:0", "--decrypt")
	require.NoError(t, err, out)
	assert.Contains(t, out, openID, "--decrypt shows the plaintext")

	for name, args := range map[string][]string{
		"show without --at":        {"dlq", "show"},
		"show of a malformed --at": {"dlq", "show", "--at", "0"},
		"show of no dead letter":   {"dlq", "show", "--at", "0:9"},
		"close without a note":     {"dlq", "close", "--at", "0:1"},
		"close with a blank note":  {"dlq", "close", "--at", "0:1", "--note", "  "},
		"redrive --at and --kind":  {"dlq", "redrive", "--at", "0:0", "--kind", "no_key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := runCmd(t, lookup, args...)
			require.Error(t, err)
			assert.Equal(t, 2, exitCode(err), err.Error())
		})
	}

	rows := auditRows(t, lookup)
	before := len(rows())
	out, _, err = runCmd(t, lookup, "dlq", "close", "--at", "0:1", "--note", "merchant confirmed the first amount")
	require.NoError(t, err, out)
	assert.Contains(t, out, "closed channel-events.dlq/0@1 (conflict, source channel-events/1@41)")
	audited := rows()
	require.Len(t, audited, before+1, "one audit row")
	assert.Equal(t, "dlq close", audited[0].Command)
	assert.Equal(t, "ok", audited[0].Result)
	assert.Contains(t, audited[0].Arguments, "merchant confirmed the first amount")
	out, _, err = runCmd(t, lookup, "dlq", "close", "--at", "0:1", "--note", "again")
	require.NoError(t, err, out)
	assert.Contains(t, out, "already closed")
	assert.Contains(t, out, "merchant confirmed the first amount")
	assert.Len(t, rows(), before+1, "closing twice changes nothing")

	out, _, err = runCmd(t, lookup, "dlq", "show", "--at", "0:1")
	require.NoError(t, err, out)
	assert.Contains(t, out, "status:   closed at ")
	assert.Contains(t, out, "merchant confirmed the first amount")

	out, _, err = runCmd(t, lookup, "dlq", "list")
	require.NoError(t, err, out)
	assert.Regexp(t, `conflict\s+1\s+0\s+0\s+1\s+-\s`, out, "count, open, resolved, closed, no oldest open")
	assert.Regexp(t, `no_key\s+1\s+1\s+0\s+0\s`, out)
	assert.Regexp(t, `0:1\s+conflict\s+closed\s`, out)

	out, _, err = runCmd(t, lookup, "dlq", "list", "--json")
	require.NoError(t, err, out)
	var list struct {
		Count       int `json:"count"`
		DeadLetters []struct {
			At, Kind, Status string
		} `json:"dead_letters"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	assert.Equal(t, 2, list.Count)
	require.Len(t, list.DeadLetters, 2)
	assert.Equal(t, "closed", list.DeadLetters[1].Status)

	out, _, err = runCmd(t, lookup, "dlq", "redrive", "--at", "0:0", "--dry-run")
	require.NoError(t, err, out)
	assert.Contains(t, out, "dead letters selected: 1 (at 0:0)")
}
