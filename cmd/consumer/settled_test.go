package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/settled"
)

// TestSettledRepublishCommand: the command sends a published event of the
// range to the settled-event topic with its stored bytes and headers,
// leaves out one outside the range, refuses a range out of order and
// settled events turned off, and is audited.
func TestSettledRepublishCommand(t *testing.T) {
	lookup, exec := opsEnv(t)
	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")
	at := time.Date(2026, 12, 5, 2, 0, 3, 412_000_000, time.UTC)
	var values [][]byte
	for i, tr := range []string{"T1", "T2"} {
		e := settled.Event{
			EventID: settled.EventID(1001, "WECHAT:"+tr+":PAYMENT_RECEIVED"), EventType: settled.PaymentReceived,
			TenantID: 1001, Channel: "WECHAT", ChannelTradeNo: tr, MerchantOrderNo: "M" + tr, Amount: 100, Currency: "CNY",
			OrderStatus: settled.OrderPaid, OrderAmount: 100, TradeSeq: 1, OccurredAt: at.Truncate(time.Second),
			SettledAt: at.Add(time.Duration(i) * 48 * time.Hour), Source: settled.SourceCallback,
		}
		v, err := settled.Encode(e)
		require.NoError(t, err)
		values = append(values, v)
		exec(`INSERT INTO ss_settled_outbox (tenant_id, idempotent_key, channel_code, channel_trade_no, trade_seq, event_type, source, value, settled_at, published, published_at)
VALUES (1001, ?, 'WECHAT', ?, 1, 'PAYMENT_RECEIVED', 'callback', ?, ?, 1, ?)`, "WECHAT:"+tr+":PAYMENT_RECEIVED", tr, v, e.SettledAt, e.SettledAt)
	}

	_, _, err := runCmd(t, lookup, "settled", "republish", "--from", "2026-12-06T00:00:00Z", "--to", "2026-12-05T00:00:00Z")
	assert.Equal(t, 2, exitCode(err), "a range out of order")
	off := func(k string) (string, bool) {
		if k == "PAYCB_SETTLED_TOPIC" {
			return "none", true
		}
		return lookup(k)
	}
	_, _, err = runCmd(t, off, "settled", "republish", "--from", "2026-12-05T00:00:00Z", "--to", "2026-12-06T00:00:00Z")
	assert.Equal(t, 2, exitCode(err), "settled events off")

	out, _, err := runCmd(t, lookup, "settled", "republish", "--from", "2026-12-05T00:00:00Z", "--to", "2026-12-06T00:00:00Z", "--channel", "WECHAT")
	require.NoError(t, err, out)
	assert.Contains(t, out, "republished 1 settled events")
	msgs, err := kafkaops.ReadAll(context.Background(), []string{brokers}, "channel-events.settled")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, values[0], msgs[0].Value)
	assert.Equal(t, "1001:WECHAT:T1", string(msgs[0].Key))

	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var details []string
	require.NoError(t, db.NewRaw(`SELECT COALESCE(detail, '') FROM ss_operator_audit WHERE command = 'settled republish' AND result = 'ok'`).
		Scan(context.Background(), &details))
	require.Len(t, details, 1)
	assert.True(t, strings.HasPrefix(details[0], "republished 1 settled events"), details[0])
}
