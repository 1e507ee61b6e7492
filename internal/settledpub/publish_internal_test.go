package settledpub

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

// TestChunksBoundEachWrite: a write holds at most maxWriteMessages rows and
// maxWriteBytes of values (a larger value alone), the rows in their order;
// the writer's batch is as large as a write, no larger.
func TestChunksBoundEachWrite(t *testing.T) {
	var rows []row
	for i := range 3*maxWriteMessages + 7 {
		rows = append(rows, row{ID: int64(i), Value: []byte("{}")})
	}
	big := row{ID: 1 << 20, Value: bytes.Repeat([]byte("x"), maxWriteBytes+1)}
	rows = append(rows[:200], append([]row{big}, rows[200:]...)...)
	var again []row
	for _, c := range chunks(rows) {
		require.NotEmpty(t, c)
		assert.LessOrEqual(t, len(c), maxWriteMessages)
		size := 0
		for _, r := range c {
			size += len(r.Value)
		}
		if len(c) > 1 {
			assert.LessOrEqual(t, size, maxWriteBytes)
		}
		again = append(again, c...)
	}
	assert.Equal(t, rows, again, "every row once, in order")

	w := NewKafkaWriter([]string{"127.0.0.1:9"}, "settled", nil, nil, 0)
	defer func() { _ = w.Close() }()
	assert.Equal(t, maxWriteMessages, w.BatchSize)
	assert.EqualValues(t, 2*maxWriteBytes, w.BatchBytes)
}

// TestPendingOfReadsTheNamedTradesOnly: on MariaDB (a row constructor IN
// list) and SQLite (ORed conditions) alike, the unpublished rows of the
// trades named, trade by trade in trade_seq order, and nothing of another
// trade, a published row or a trade that differs in one part only.
func TestPendingOfReadsTheNamedTradesOnly(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		at := time.Now().UTC().Truncate(time.Microsecond)
		insert := func(tenant int64, ch, tr string, seq int64, published bool) {
			pub := 0
			if published {
				pub = 1
			}
			_, err := db.ExecContext(ctx, "INSERT INTO ss_settled_outbox (tenant_id, idempotent_key, channel_code, "+
				"channel_trade_no, trade_seq, event_type, source, value, settled_at, published, published_at) "+
				"VALUES (?, ?, ?, ?, ?, 'PAYMENT_RECEIVED', 'callback', '{}', ?, ?, ?)",
				tenant, fmt.Sprintf("%s:%s:%d", ch, tr, seq), ch, tr, seq, at, pub, at)
			require.NoError(t, err)
		}
		insert(1001, "WECHAT", "T1", 2, false)
		insert(1001, "WECHAT", "T1", 1, true)
		insert(1001, "WECHAT", "T1", 3, false)
		insert(1001, "SQB", "T'2", 1, false)
		insert(1002, "WECHAT", "T1", 1, false) // another tenant's trade of the same number
		insert(1001, "ALIPAY", "T1", 1, false) // another channel's
		insert(1001, "WECHAT", "T3", 1, false) // a trade not named
		rows, err := pendingOf(ctx, db, []trade{{1001, "WECHAT", "T1"}, {1001, "SQB", "T'2"}, {1001, "WECHAT", "T9"}})
		require.NoError(t, err)
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%d/%s/%s/%d", r.TenantID, r.Channel, r.TradeNo, r.TradeSeq))
		}
		assert.Equal(t, []string{"1001/SQB/T'2/1", "1001/WECHAT/T1/2", "1001/WECHAT/T1/3"}, got)
	})
}
