package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReplayOnAMissingTopicFailsAndCreatesNothing(t *testing.T) {
	w := newRunWorld(t, worldOptions{})
	lookup := w.env(map[string]string{"PAYCB_KAFKA_TOPIC": "chanel-events"})
	for _, args := range [][]string{
		{"replay", "--to-earliest", "--dry-run"},
		{"replay", "--to-earliest"},
	} {
		out, stderr, err := runCmd(t, lookup, args...)
		require.Error(t, err, "%v: stdout:\n%s\nstderr:\n%s", args, out, stderr)
		assert.Equal(t, 1, exitCode(err), "%v", args)
		assert.Contains(t, err.Error(), `topic "chanel-events": topic does not exist`, "%v", args)
		assert.NotContains(t, out, "committed", "%v", args)
	}
	assert.False(t, w.topicExists(t, "chanel-events"), "the mistyped topic was created")
	assert.True(t, w.topicExists(t, runTopic), "the broker answers about topics that exist")
}

func TestDeadLetterCommandsOnAMissingTopicFailAndCreateNothing(t *testing.T) {
	w := newRunWorld(t, worldOptions{})
	lookup := w.env(map[string]string{"PAYCB_KAFKA_DLQ_TOPIC": "channel-events.dql"})
	for _, args := range [][]string{
		{"dlq", "list"},
		{"dlq", "redrive", "--kind", "malformed", "--dry-run"},
	} {
		out, stderr, err := runCmd(t, lookup, args...)
		require.Error(t, err, "%v: stdout:\n%s\nstderr:\n%s", args, out, stderr)
		assert.Equal(t, 1, exitCode(err), "%v", args)
		assert.Contains(t, err.Error(), "channel-events.dql", "%v", args)
		assert.Contains(t, err.Error(), "topic does not exist", "%v", args)
	}
	assert.False(t, w.topicExists(t, "channel-events.dql"), "the mistyped dead-letter topic was created")
}
