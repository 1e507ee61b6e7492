package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/schema"
)

// opsEnv is an environment for the operations commands: a migrated
// database of its own and an in-process Kafka with the input topic.
func opsEnv(t *testing.T) (lookup func(string) (string, bool), exec func(string, ...any)) {
	t.Helper()
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(t, err)
	cluster, brokers, err := inprocess.Start(map[string]int32{"channel-events": 2, "channel-events.dlq": 1, "channel-events.settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	vars := map[string]string{"PAYCB_DB_DSN": dsn, "PAYCB_KAFKA_BROKERS": brokers[0], "PAYCB_LOG_LEVEL": "warn"}
	lookup = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	exec = func(q string, args ...any) {
		t.Helper()
		_, err := db.NewRaw(q, args...).Exec(context.Background())
		require.NoError(t, err)
	}
	return lookup, exec
}

func runCmd(t *testing.T, lookup func(string) (string, bool), args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut, lookup)
	return out.String(), errOut.String(), err
}

func TestOperationsCommands(t *testing.T) {
	lookup, exec := opsEnv(t)
	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")
	require.NoError(t, kafkaops.Produce(context.Background(), []string{brokers}, "channel-events", []kafkaops.Message{
		{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}, {Key: []byte("c"), Value: []byte("3")},
	}))

	out, _, err := runCmd(t, lookup, "reconcile")
	require.NoError(t, err, out)
	assert.Contains(t, out, "reconcile: no discrepancies")

	// Skip to the end (a time after every message), then preview a replay
	// of everything.
	out, _, err = runCmd(t, lookup, "replay", "--to-datetime", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.NoError(t, err, out)
	out, _, err = runCmd(t, lookup, "replay", "--to-earliest", "--dry-run")
	require.NoError(t, err, out)
	assert.Contains(t, out, "messages to replay: 3")
	assert.Contains(t, out, "kafka-consumer-groups.sh --bootstrap-server "+brokers+" --group settlement-consumer --reset-offsets --topic channel-events --to-earliest --dry-run")
	assert.Contains(t, out, "dry run: nothing committed")

	out, _, err = runCmd(t, lookup, "replay", "--to-offset", "0:0,1:0")
	require.NoError(t, err, out)
	assert.Contains(t, out, "committed")
	ps, err := kafkaops.Progress(context.Background(), []string{brokers}, "settlement-consumer", "channel-events")
	require.NoError(t, err)
	for _, p := range ps {
		assert.Zero(t, p.Committed, "partition %d", p.Partition)
	}

	_, _, err = runCmd(t, lookup, "replay", "--to-earliest", "--to-offset", "0:0")
	require.Error(t, err, "two targets at once")

	// A claim stuck ACQUIRED whose event was purged: listed, and --settle
	// reports it as not settled.
	exec(`INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, fingerprint, source_topic, source_partition, source_offset, created_at)
VALUES (1001, 'WECHAT:T1:PAYMENT_RECEIVED', 'PAYMENT_RECEIVED', 'ACQUIRED', REPEAT('a', 64), 'channel-events', 1, 7, ?)`, time.Now().UTC().Add(-time.Hour))
	out, _, err = runCmd(t, lookup, "orphans", "--older-than", "1m")
	require.NoError(t, err, out)
	assert.Contains(t, out, "claims ACQUIRED for longer than 1m0s: 1")
	assert.Contains(t, out, "channel-events/1@7")
	out, _, err = runCmd(t, lookup, "orphans", "--older-than", "1m", "--settle")
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err))
	assert.Contains(t, out, "FAILED")
	// The whole reason, not a cut one, after the table and in JSON.
	var reason string
	for _, line := range strings.Split(out, "\n") {
		if r, ok := strings.CutPrefix(line, "not settled: tenant 1001 WECHAT:T1:PAYMENT_RECEIVED: "); ok {
			reason = r
		}
	}
	require.NotEmpty(t, reason, out)
	assert.NotContains(t, reason, "…", "never truncated")
	out, _, err = runCmd(t, lookup, "orphans", "--older-than", "1m", "--settle", "--json")
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err))
	var orphans struct {
		Settled bool
		Claims  []struct {
			TenantID    int64  `json:"tenant_id"`
			Key         string `json:"key"`
			Attempts    int    `json:"attempts"`
			Source      string `json:"source"`
			SettleError string `json:"settle_error"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &orphans), out)
	assert.True(t, orphans.Settled)
	require.Len(t, orphans.Claims, 1, out)
	assert.Equal(t, "WECHAT:T1:PAYMENT_RECEIVED", orphans.Claims[0].Key)
	assert.Equal(t, "channel-events/1@7", orphans.Claims[0].Source)
	assert.Equal(t, reason, orphans.Claims[0].SettleError, "the same reason, in full")
	out, _, err = runCmd(t, lookup, "orphans", "--older-than", "1m", "--json")
	require.NoError(t, err, out)
	require.NoError(t, json.Unmarshal([]byte(out), &orphans), out)
	assert.False(t, orphans.Settled)
	assert.Len(t, orphans.Claims, 1)

	// Postings with no claim: a discrepancy, exit status 3, JSON on request.
	exec(`INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, account, direction, amount, currency, created_at)
VALUES (1001, 'WECHAT:T2:PAYMENT_RECEIVED', 'WECHAT', 'T2', 'merchant_payable', 'CREDIT', 5, 'CNY', ?)`, time.Now().UTC())
	out, _, err = runCmd(t, lookup, "reconcile", "--json")
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err))
	var rep struct {
		Discrepancies []struct{ Check, Key string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	checks := map[string]bool{}
	for _, d := range rep.Discrepancies {
		checks[d.Check] = true
	}
	assert.True(t, checks["posting_without_claim"], out)
	assert.True(t, checks["ledger_without_order"], out)
}

func TestDeadLetterPurgeAndRefundCommands(t *testing.T) {
	lookup, _ := opsEnv(t)
	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")
	dl := deadletters.NewKafkaWriter([]string{brokers}, "channel-events.dlq", 0)
	t.Cleanup(func() { _ = dl.Close() })
	for i, kind := range []channels.ErrorKind{channels.KindNoKey, channels.KindNoKey, channels.KindMalformed} {
		msg := kafka.Message{Topic: "channel-events", Partition: 0, Offset: int64(i), Key: []byte(fmt.Sprintf("WECHAT:T%d", i)), Value: []byte("{}")}
		require.NoError(t, dl.DeadLetter(context.Background(), msg, kind, "no APIv3 key for tenant 1001"))
	}

	out, _, err := runCmd(t, lookup, "dlq", "list")
	require.NoError(t, err, out)
	assert.Contains(t, out, "dead letters in channel-events.dlq: 3")
	assert.Regexp(t, `no_key\s+2\s`, out)
	assert.Regexp(t, `malformed\s+1\s`, out)
	assert.Contains(t, out, "most recent 3:")

	_, _, err = runCmd(t, lookup, "dlq", "redrive")
	require.Error(t, err)
	assert.Equal(t, 2, exitCode(err), "--kind is required")
	out, _, err = runCmd(t, lookup, "dlq", "redrive", "--kind", "no_key", "--dry-run")
	require.NoError(t, err, out)
	assert.Contains(t, out, "selected: 2")
	in, err := kafkaops.ReadAll(context.Background(), []string{brokers}, "channel-events")
	require.NoError(t, err)
	assert.Empty(t, in, "a dry run publishes nothing")
	out, _, err = runCmd(t, lookup, "dlq", "redrive", "--kind", "no_key")
	require.NoError(t, err, out)
	assert.Contains(t, out, "published 2 messages to channel-events")
	in, err = kafkaops.ReadAll(context.Background(), []string{brokers}, "channel-events")
	require.NoError(t, err)
	assert.Len(t, in, 2)

	// kfake's topics keep messages 7 days, so the floor is 14 days.
	_, _, err = runCmd(t, lookup, "purge", "--older-than", "240h")
	require.Error(t, err)
	assert.Equal(t, 4, exitCode(err))
	assert.Contains(t, err.Error(), "below 336h0m0s")
	out, _, err = runCmd(t, lookup, "purge", "--older-than", "720h", "--dry-run")
	require.NoError(t, err, out)
	assert.Contains(t, out, "would clear event_json and last_error of 0 SETTLED claims")

	_, _, err = runCmd(t, lookup, "refund", "register", "--tenant", "1001", "--channel", "WECHAT", "--trade-no", "T9", "--refund-no", "rf-1", "--amount", "100")
	require.ErrorIs(t, err, settlement.ErrNotPaid)
	assert.Equal(t, 4, exitCode(err), "refused: no posted payment")
	_, _, err = runCmd(t, lookup, "refund", "register", "--tenant", "1001", "--channel", "WECHAT", "--trade-no", "T9", "--refund-no", "rf-1")
	require.ErrorContains(t, err, "--amount", "an amount is required")
	assert.Equal(t, 2, exitCode(err), "a missing flag is a usage error")

	register := func(amount string) (string, error) {
		out, _, err := runCmd(t, lookup, "payment", "register", "--tenant", "1001", "--channel", "ALIPAY", "--merchant-id", "2088101117955611",
			"--merchant-order-no", "P20261205000123", "--amount", amount,
			"--created-at", "2026-12-05T10:00:00+08:00", "--expires-at", "2026-12-05T10:05:00+08:00")
		return out, err
	}
	out, err = register("1200")
	require.NoError(t, err)
	assert.Contains(t, out, "registered: tenant 1001 ALIPAY merchant 2088101117955611 order P20261205000123 amount 1200 expires 2026-12-05T02:05:00Z status REGISTERED")
	out, err = register("1200")
	require.NoError(t, err)
	assert.Contains(t, out, "already registered: ")
	_, err = register("1300")
	require.ErrorIs(t, err, settlement.ErrRegistrationConflict)
	assert.Equal(t, 4, exitCode(err), "refused: registered with another amount")
	assert.Contains(t, err.Error(), "amount: registered 1200, now 1300")

	// consumer status shows it among the open registrations, by age (the
	// worker recorded it just now).
	out, _, err = runCmd(t, lookup, "status")
	require.NoError(t, err, out)
	assert.Contains(t, out, "\nopen registrations:\n")
	assert.Regexp(t, `(?m)^\s*ALIPAY\s+PAYMENT\s+1\s+\S+\s+1\s+1\s+0\s+0\s+0\s+0\s*$`, out, "one open, past its 2026 expiry, under a minute old")
	out, _, err = runCmd(t, lookup, "status", "--json")
	require.NoError(t, err, out)
	var st struct {
		Registrations []struct {
			Channel    string  `json:"channel"`
			Kind       string  `json:"kind"`
			Open       int64   `json:"open"`
			PastExpiry int64   `json:"past_expiry"`
			ByAge      []int64 `json:"by_age"`
		} `json:"registrations"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Registrations, 1)
	r := st.Registrations[0]
	assert.Equal(t, []any{"ALIPAY", "PAYMENT", int64(1), int64(1), []int64{1, 0, 0, 0, 0}}, []any{r.Channel, r.Kind, r.Open, r.PastExpiry, r.ByAge})

	binding := filepath.Join(t.TempDir(), "merchants")
	require.NoError(t, os.WriteFile(binding, []byte("2002 ALIPAY 2088101117955611\n"), 0o600))
	_, _, err = runCmd(t, with(lookup, map[string]string{"PAYCB_TENANT_MERCHANTS_FILE": binding}),
		"payment", "register", "--tenant", "1001", "--channel", "ALIPAY", "--merchant-id", "2088101117955611",
		"--merchant-order-no", "P20261205000124", "--amount", "1200",
		"--created-at", "2026-12-05T10:00:00+08:00", "--expires-at", "2026-12-05T10:05:00+08:00")
	require.Error(t, err)
	assert.Equal(t, 4, exitCode(err), "refused: the merchant is another tenant's")
	assert.Contains(t, err.Error(), "not bound to tenant 1001")
}
