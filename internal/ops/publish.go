package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
)

// ErrTenantHasClaims is returned, wrapped, by CheckTestTenant when the
// tenant already has claims: test callbacks would mix with its books.
var ErrTenantHasClaims = errors.New("tenant already has claims")

// CheckTestTenant returns an error wrapping ErrTenantHasClaims when tenant
// has any claim in db; it reads one row at most.
func CheckTestTenant(ctx context.Context, db bun.IDB, tenant int64) error {
	var ids []int64
	if err := db.NewSelect().TableExpr("ss_channel_idempotent").Column("id").
		Where("tenant_id = ?", tenant).Limit(1).Scan(ctx, &ids); err != nil {
		return fmt.Errorf("look for claims of tenant %d: %w", tenant, err)
	}
	if len(ids) > 0 {
		return fmt.Errorf("tenant %d: %w", tenant, ErrTenantHasClaims)
	}
	return nil
}

// Publish writes msgs to the input topic k.Topic in order, keyed messages
// to their key's partition, and returns once all in-sync replicas
// acknowledged every one. It is how `consumer publish` sends a test stream
// (demo.TestStream) to a deployment, and how `consumer statement reconcile
// --publish-missing` sends the events statementbook.PublishMissing rebuilds.
// It never creates the topic: a missing one is an error wrapping
// ErrTopicNotFound, and nothing is written.
func Publish(ctx context.Context, k kafkaops.Kafka, msgs []kafkaops.Message) error {
	if err := k.RequireTopic(ctx, k.Topic); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := kafkaops.Produce(ctx, k.Brokers, k.Topic, msgs, kafkaops.WithConn(k.Conn)); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}
