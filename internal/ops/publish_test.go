package ops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/sqldb"
)

// TestPublishSettlesThroughTheWorker publishes a test stream
// (demo.TestStream) for a tenant
// with its own APIv3 key and runs the worker over it: every event settles,
// nothing is dead-lettered, every trade number carries the test prefix,
// and the tenant then counts as one with claims.
func TestPublishSettlesThroughTheWorker(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 3)
	const tenant, tenantKey = int64(3001), "abcdefabcdefabcdefabcdefabcdef12"
	cfg := workerConfig(t, k)
	cfg.WeChat.APIv3Keys = map[int64]config.Keys{tenant: {config.Secret(tenantKey)}}
	require.NoError(t, migrateDSN(ctx, cfg))
	db, err := sqldb.OpenMySQL(cfg.DB.DSN.Reveal())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	require.NoError(t, ops.CheckTestTenant(ctx, db, tenant), "a fresh tenant")
	stream, prefix, err := demo.TestStream(demo.TestOptions{
		TenantID: tenant, Trades: 20, Seed: 1733190000,
		WeChatKey: cfg.WeChat.KeysFor(tenant)[0].Reveal(),
	})
	require.NoError(t, err)
	assert.Equal(t, "TEST1733190000-", prefix)
	assert.Greater(t, len(stream.Messages), stream.Events, "channel retries are published too")
	require.NoError(t, ops.Publish(ctx, k, streamMessages(stream)))

	_, _ = startMain(t, cfg)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, kafkaops.WaitConsumed(wctx, k.Brokers, k.Group, k.Topic, 50*time.Millisecond, nil))

	var rows []struct {
		Key    string `bun:"idempotent_key"`
		Status string `bun:"status"`
	}
	require.NoError(t, db.NewSelect().TableExpr("ss_channel_idempotent").Column("idempotent_key", "status").
		Where("tenant_id = ?", tenant).Scan(ctx, &rows))
	require.Len(t, rows, stream.Events)
	chans := map[string]bool{}
	for _, r := range rows {
		assert.Equal(t, "SETTLED", r.Status, r.Key)
		ch, rest, _ := strings.Cut(r.Key, ":")
		chans[ch] = true
		assert.True(t, strings.HasPrefix(rest, prefix), r.Key)
	}
	assert.True(t, chans["WECHAT"], "WeChat callbacks decrypted with the tenant's own key")
	var net int64
	require.NoError(t, db.NewSelect().TableExpr("ss_ledger_entry").
		ColumnExpr("COALESCE(SUM(CASE direction WHEN 'CREDIT' THEN amount ELSE -amount END), 0)").
		Where("tenant_id = ?", tenant).Where("account = 'merchant_payable'").Scan(ctx, &net))
	assert.Equal(t, stream.Paid[tenant]-stream.Refunded[tenant], net)
	dls, err := deadletters.ReadTopic(ctx, kafkaops.Kafka{Brokers: k.Brokers, Topic: k.Topic, DLQTopic: k.DLQTopic}, deadletters.Filter{})
	require.NoError(t, err)
	assert.Empty(t, dls)

	require.ErrorIs(t, ops.CheckTestTenant(ctx, db, tenant), ops.ErrTenantHasClaims)
}

// TestPublishToAMissingTopic writes nothing and creates no topic.
func TestPublishToAMissingTopic(t *testing.T) {
	ctx := context.Background()
	k := mustKafka(t, 1)
	k.Topic = "missing"
	err := ops.Publish(ctx, k, []kafkaops.Message{{Key: []byte("k"), Value: []byte("v")}})
	require.ErrorIs(t, err, ops.ErrTopicNotFound)
	require.ErrorIs(t, ops.Publish(ctx, k, nil), ops.ErrTopicNotFound, "still not created")
}
