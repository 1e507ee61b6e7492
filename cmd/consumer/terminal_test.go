package main

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/pkg/channels"
)

func TestPrintableEscapesWhatATerminalActsOn(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain 微信支付 text", "plain 微信支付 text"},
		{"\x1b]0;owned\x07title", `\x1b]0;owned\atitle`},
		{"red \x1b[31mALERT\x1b[0m", `red \x1b[31mALERT\x1b[0m`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"del\x7f c1\u009b", `del\x7f c1\u009b`},
		{"bad utf8 \xff\xfe", `bad utf8 \xff\xfe`},
		{"two\nlines\r", `two\nlines\r`},
	} {
		assert.Equal(t, tc.want, printable(tc.in, false), "%q", tc.in)
	}
	assert.Equal(t, "two\nlines\\r", printable("two\nlines\r", true), "newlines kept for blocks of their own")
	assert.Equal(t, `a\x1b[2Jb`, oneLine("a\x1b[2Jb", 20))
}

// TestDLQListAndShowEscapeControlCharacters: a dead letter whose key,
// error, headers and value carry terminal escape sequences (cursor moves, a
// screen clear, a window title) reaches the operator's terminal escaped in
// dlq list and in dlq show, never raw.
func TestDLQListAndShowEscapeControlCharacters(t *testing.T) {
	lookup, _ := opsEnv(t)
	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")
	dl := deadletters.NewKafkaWriter([]string{brokers}, "channel-events.dlq", 0)
	t.Cleanup(func() { _ = dl.Close() })
	msg := kafka.Message{
		Topic: "channel-events", Partition: 0, Offset: 5,
		Key:     []byte("k\x1b[2J\x1b]0;pwned\x07"),
		Value:   []byte("not json \x1b[31m\x1b[1A\rrewritten"),
		Headers: []kafka.Header{{Key: "x-upstream\x1b[8m", Value: []byte("v\x1b[0m")}},
	}
	require.NoError(t, dl.DeadLetter(context.Background(), msg, channels.KindMalformed, "cannot parse \x1b[2J at byte 0"))

	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "show", "--at", "0:0"}} {
		out, _, err := runCmd(t, lookup, args...)
		require.NoError(t, err, out)
		assert.NotContains(t, out, "\x1b", "%v prints no raw ESC", args)
		assert.NotContains(t, out, "\x07", "%v prints no raw BEL", args)
		assert.NotContains(t, out, "\r", "%v prints no raw carriage return", args)
		assert.Contains(t, out, `\x1b[2J`, "%v shows the escape, escaped", args)
	}
}
