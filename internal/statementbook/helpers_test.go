package statementbook_test

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/kafkaopstest"
	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/statementbook"
)

// world is the ledger the statements are reconciled against, with the
// statement tests' helpers on it.
type world struct{ *ledgertest.World }

func newWorld(t *testing.T) *world {
	t.Helper()
	return &world{ledgertest.New(t)}
}

// newWorldOn is newWorld on db.
func newWorldOn(t *testing.T, db *bun.DB) *world {
	t.Helper()
	return &world{ledgertest.On(t, db)}
}

// mustKafka gives the test the input topic (parts partitions): on an
// in-process cluster, or under a name of the test's own on the real
// cluster PAYCB_TEST_KAFKA_BROKERS names.
func mustKafka(t *testing.T, parts int32) kafkaops.Kafka {
	t.Helper()
	k := kafkaopstest.Start(t, map[string]int32{ledgertest.Topic: parts})
	return kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Name(ledgertest.Topic), Timeout: 10 * time.Second}
}

// input is k's input topic, written as consumer statement reconcile
// --publish-missing writes it.
func input(k kafkaops.Kafka) statementbook.Topic {
	return statementbook.Topic{Name: k.Topic, Publish: func(ctx context.Context, msgs []kafkaops.Message) error {
		return ops.Publish(ctx, k, msgs)
	}}
}
