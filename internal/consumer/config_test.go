package consumer

import (
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/pipeline"
)

// TestZeroConfigTakesTheConfiguredDefaults: a worker built from a zero
// Config paces itself exactly like one built from config.Default, the one
// place defaults are declared.
func TestZeroConfigTakesTheConfiguredDefaults(t *testing.T) {
	d := config.Default()
	w := New(Config{}, &pipeline.Pipeline{}, nil, nil)
	assert.Equal(t, Config{
		BatchMax:               1,
		StallAfter:             d.Worker.StallThreshold,
		LagInterval:            d.Worker.LagInterval,
		ShutdownTimeout:        d.Worker.ShutdownTimeout,
		SessionTimeout:         d.Kafka.SessionTimeout,
		HeartbeatInterval:      d.Kafka.HeartbeatInterval,
		RebalanceTimeout:       d.Kafka.RebalanceTimeout,
		MaxWait:                d.Kafka.MaxWait,
		MinBytes:               d.Kafka.MinBytes,
		MaxBytes:               d.Kafka.MaxBytes,
		StartOffset:            kafka.FirstOffset,
		PartitionWatchInterval: d.Kafka.PartitionWatchInterval,
		CommitInterval:         d.Kafka.CommitInterval,
	}, w.cfg)
}
