package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/app/apptest"
	"github.com/paycallback/paycallback/internal/kafkaops/inprocess"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/schema"
)

// smokeTenantKey is the test tenant's own WeChat APIv3 key.
const smokeTenantKey = "abcdefabcdefabcdefabcdefabcdef12"

// smokeEnv is a migrated database of its own, an in-process Kafka with the
// input and dead-letter topics, and the environment naming them, with an
// APIv3 key for tenant 990001 only.
func smokeEnv(t *testing.T) map[string]string {
	t.Helper()
	dsn := sqldbtest.NewDatabase(t)
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	_, err = schema.Migrate(context.Background(), db)
	require.NoError(t, err)
	cluster, brokers, err := inprocess.Start(map[string]int32{"channel-events": 3, "channel-events.dlq": 1, "channel-events.settled": 1})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	keys := t.TempDir() + "/keys"
	require.NoError(t, os.WriteFile(keys, []byte("990001="+smokeTenantKey+"\n"), 0o600))
	return map[string]string{
		"PAYCB_DB_DSN": dsn, "PAYCB_KAFKA_BROKERS": brokers[0], "PAYCB_LOG_LEVEL": "warn",
		"PAYCB_WECHAT_APIV3_TENANT_KEYS_FILE": keys, "PAYCB_ADMIN_ADDR": "127.0.0.1:0",
		"PAYCB_KAFKA_SESSION_TIMEOUT": "6s", "PAYCB_KAFKA_HEARTBEAT_INTERVAL": "300ms", "PAYCB_KAFKA_MAX_WAIT": "100ms",
	}
}

func lookupIn(vars map[string]string) config.LookupEnv {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// consumerCmd runs the consumer with args and returns its stdout, stderr
// and error.
func consumerCmd(t *testing.T, vars map[string]string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut, lookupIn(vars))
	return out.String(), errOut.String(), err
}

// startWorker runs the worker on vars' configuration until the test ends.
func startWorker(t *testing.T, vars map[string]string) {
	t.Helper()
	cfg, err := config.Load(nil, lookupIn(vars))
	require.NoError(t, err)
	apptest.MustRun(t, &app.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Registry: metrics.NewRegistry()})
}

// TestPublishStatusAndTrade is a deployment's smoke test as an operator
// runs it: publish a test stream for a fresh tenant, start the worker,
// watch status until the lag is gone, then look at one published trade,
// settled; publishing again for that tenant is refused unless allowed.
func TestPublishStatusAndTrade(t *testing.T) {
	vars := smokeEnv(t)
	audits := auditRows(t, lookupIn(vars))
	out, errOut, err := consumerCmd(t, vars, "publish", "--tenant", "990001", "--count", "8", "--seed", "1764725133", "--json")
	require.NoError(t, err, errOut)
	rows := audits()
	require.Len(t, rows, 1, "a publish is recorded")
	assert.Equal(t, "publish", rows[0].Command)
	assert.Equal(t, "ok", rows[0].Result)
	assert.Contains(t, rows[0].Detail, "TEST1764725133-")
	var rep publishReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, "TEST1764725133-", rep.Prefix)
	assert.Equal(t, channels.CodeStrings(), rep.Channels, "the accepted channels by default: every registered one")
	assert.Equal(t, 8, rep.Trades)
	assert.Greater(t, rep.Messages, rep.Events)
	ch, tradeNo, ok := strings.Cut(rep.Example, ":")
	require.True(t, ok, rep.Example)
	assert.True(t, strings.HasPrefix(tradeNo, rep.Prefix), tradeNo)

	startWorker(t, vars)
	var st struct {
		State   string `json:"state"`
		Members []struct {
			Admin      string `json:"admin"`
			Reachable  bool   `json:"reachable"`
			Partitions []int  `json:"partitions"`
		} `json:"members"`
		Partitions []struct {
			Partition      int      `json:"partition"`
			Lag            int64    `json:"lag"`
			StalledSeconds *float64 `json:"stalled_seconds"`
		} `json:"partitions"`
		TotalLag int64 `json:"total_lag"`
	}
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		out, errOut, err = consumerCmd(t, vars, "status", "--json")
		require.NoError(t, err, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		if st.TotalLag == 0 && len(st.Members) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the worker did not consume the stream: %s", out)
		<-tick.C
	}
	assert.Equal(t, "Stable", st.State)
	assert.True(t, st.Members[0].Reachable)
	assert.Equal(t, []int{0, 1, 2}, st.Members[0].Partitions)
	require.Len(t, st.Partitions, 3)
	for _, p := range st.Partitions {
		require.NotNil(t, p.StalledSeconds, "partition %d", p.Partition)
	}
	out, _, err = consumerCmd(t, vars, "status")
	require.NoError(t, err)
	assert.Contains(t, out, "group settlement-consumer on channel-events: Stable, 1 member(s), total lag 0")
	assert.Contains(t, out, st.Members[0].Admin)
	assert.Contains(t, out, "reported")
	assert.Contains(t, out, "settled events not yet published: ")

	out, errOut, err = consumerCmd(t, vars, "trade", "--tenant", "990001", "--channel", ch, "--trade-no", tradeNo)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "trade "+rep.Example+" of tenant 990001")
	assert.Contains(t, out, ":PAYMENT_RECEIVED SETTLED POSTED")
	assert.Contains(t, out, ", settled events 1 (")
	assert.Contains(t, out, "dead letters 0 (scanned channel-events.dlq since ")
	out, _, err = consumerCmd(t, vars, "trade", "--tenant", "990001", "--channel", ch, "--trade-no", tradeNo, "--json", "--since", "0")
	require.NoError(t, err)
	var h struct {
		Claims []struct {
			Key    string `json:"key"`
			Status string `json:"status"`
		} `json:"claims"`
		Order    *struct{ Status string } `json:"order"`
		Ledger   []json.RawMessage        `json:"ledger"`
		Scanned  string                   `json:"scanned"`
		Timeline []json.RawMessage        `json:"timeline"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &h), out)
	require.NotEmpty(t, h.Claims)
	assert.Equal(t, rep.Example+":PAYMENT_RECEIVED", h.Claims[0].Key)
	require.NotNil(t, h.Order)
	assert.Len(t, h.Ledger, 2*len(h.Claims))
	assert.Empty(t, h.Scanned, "--since 0 skips the topic")

	_, errOut, err = consumerCmd(t, vars, "publish", "--tenant", "990001", "--count", "1", "--channels", "SQB")
	require.Error(t, err)
	assert.Equal(t, exitRefused, exitCode(err), errOut)
	assert.Contains(t, err.Error(), "tenant already has claims")
	rows = audits()
	require.Len(t, rows, 2, "the refusal is recorded")
	assert.Equal(t, "failed (exit 4)", rows[0].Result)
	out, errOut, err = consumerCmd(t, vars, "publish", "--tenant", "990001", "--count", "1", "--channels", "SQB", "--allow-existing-tenant")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "published ")
	assert.Contains(t, out, "trades on SQB")
}

func TestPublishAndTradeUsage(t *testing.T) {
	dsn := map[string]string{"PAYCB_DB_DSN": "u:p@tcp(127.0.0.1:1)/x", "PAYCB_KAFKA_BROKERS": "127.0.0.1:1"}
	withKey := map[string]string{"PAYCB_DB_DSN": dsn["PAYCB_DB_DSN"], "PAYCB_KAFKA_BROKERS": "127.0.0.1:1", "PAYCB_WECHAT_APIV3_KEY": smokeTenantKey}
	noDSN := map[string]string{"PAYCB_KAFKA_BROKERS": "127.0.0.1:1", "PAYCB_WECHAT_APIV3_KEY": smokeTenantKey}
	cases := []struct {
		name string
		vars map[string]string
		args []string
		code int
		msg  string
	}{
		{"publish without a tenant", withKey, []string{"publish"}, exitUsage, "--tenant is required"},
		{"publish an unknown channel", withKey, []string{"publish", "--tenant", "5", "--channels", "PAYPAL"}, exitUsage, "--channels"},
		{"publish a channel the workers refuse", map[string]string{"PAYCB_DB_DSN": dsn["PAYCB_DB_DSN"], "PAYCB_CHANNELS": "ALIPAY"}, []string{"publish", "--tenant", "5", "--channels", "SQB"}, exitUsage, "do not accept SQB"},
		{"publish WeChat without a key", dsn, []string{"publish", "--tenant", "5"}, exitUsage, "no WeChat APIv3 key for tenant 5"},
		{"publish a count out of range", withKey, []string{"publish", "--tenant", "5", "--count", "0"}, exitUsage, "--count 0"},
		{"publish without a database to check", noDSN, []string{"publish", "--tenant", "5"}, exitRefused, "no database configured"},
		{"trade without a trade number", dsn, []string{"trade", "--tenant", "5", "--channel", "SQB"}, exitUsage, "--trade-no is required"},
		{"trade of an unknown channel", dsn, []string{"trade", "--tenant", "5", "--channel", "PAYPAL", "--trade-no", "1"}, exitUsage, "not WECHAT, ALIPAY or SQB"},
		{"trade with a negative --since", dsn, []string{"trade", "--tenant", "5", "--channel", "SQB", "--trade-no", "1", "--since", "-5h"}, exitUsage, "negative"},
		{"trade with an unreadable --since", dsn, []string{"trade", "--tenant", "5", "--channel", "SQB", "--trade-no", "1", "--since", "yesterday"}, exitUsage, "neither a duration"},
		{"trade without a DSN", noDSN, []string{"trade", "--tenant", "5", "--channel", "SQB", "--trade-no", "1"}, exitUsage, "PAYCB_DB_DSN"},
		{"status with an argument", dsn, []string{"status", "now"}, exitUsage, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := consumerCmd(t, tc.vars, tc.args...)
			require.Error(t, err)
			assert.Equal(t, tc.code, exitCode(err), "%v\n%s", err, errOut)
			assert.Contains(t, err.Error()+errOut, tc.msg)
			assert.NotContains(t, err.Error()+errOut, "u:p@", "the DSN password is never printed")
		})
	}
	for _, name := range []string{"status", "trade", "publish"} {
		out, _, err := consumerCmd(t, nil, name, "--help")
		require.NoError(t, err, "%s --help needs neither a database nor a broker", name)
		assert.Contains(t, out, "consumer "+name+": ")
		assert.Contains(t, out, "exit status:")
	}
}
