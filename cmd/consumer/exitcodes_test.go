package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/audit"
	"github.com/paycallback/paycallback/internal/sqldb"
)

// with returns lookup with the variables in extra set (an empty value
// unsets one).
func with(lookup func(string) (string, bool), extra map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := extra[k]; ok {
			return v, v != ""
		}
		return lookup(k)
	}
}

// TestDocumentedExitStatuses runs an invocation for each documented exit
// status against the real MariaDB and an in-process broker.
func TestDocumentedExitStatuses(t *testing.T) {
	lookup, exec := opsEnv(t)
	// A claim stuck ACQUIRED whose event was purged: --settle cannot settle it.
	exec(`INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, fingerprint, source_topic, source_partition, source_offset, created_at)
VALUES (1001, 'WECHAT:T1:PAYMENT_RECEIVED', 'PAYMENT_RECEIVED', 'ACQUIRED', REPEAT('a', 64), 'channel-events', 1, 7, ?)`, time.Now().UTC().Add(-time.Hour))
	noDB := with(lookup, map[string]string{"PAYCB_DB_DSN": ""})
	deadDB := with(lookup, map[string]string{"PAYCB_DB_DSN": "root@tcp(127.0.0.1:1)/paycb"})

	cases := []struct {
		name   string
		lookup func(string) (string, bool)
		args   []string
		code   int
		stderr string // in the error or on stderr
	}{
		{"help", noEnv, []string{"help"}, 0, ""},
		{"verb help without a DSN", noEnv, []string{"refund", "register", "--help"}, 0, ""},
		{"version", noEnv, []string{"version"}, 0, ""},
		{"dlq list", lookup, []string{"dlq", "list"}, 0, ""},
		{"replay preview", lookup, []string{"replay", "--to-earliest", "--dry-run"}, 0, ""},
		{"orphans listed", lookup, []string{"orphans", "--older-than", "1m"}, 0, ""},

		{"database unreachable", deadDB, []string{"orphans"}, 1, ""},
		{"missing topic", with(lookup, map[string]string{"PAYCB_KAFKA_TOPIC": "no-such-topic"}), []string{"replay", "--to-earliest", "--dry-run"}, 1, "does not exist"},

		{"no command", noEnv, nil, 2, ""},
		{"unknown command", noEnv, []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", noEnv, []string{"run", "--nope"}, 2, "-nope"},
		{"unexpected argument", lookup, []string{"reconcile", "extra"}, 2, "unexpected arguments"},
		{"a verb missing", noEnv, []string{"refund"}, 2, "register"},
		{"unknown verb", noEnv, []string{"dlq", "frob"}, 2, `unknown verb "frob"`},
		{"unknown help topic", noEnv, []string{"help", "frob"}, 2, "unknown command"},
		{"run without a DSN", noEnv, []string{"run"}, 2, "PAYCB_DB_DSN"},
		{"batch-max out of bounds", lookup, []string{"run", "--batch-max=-1"}, 2, "batch_max"},
		{"batch-max out of bounds in demo", noEnv, []string{"demo", "--batch-max=-1"}, 2, "batch_max"},
		{"a negative barcode count in demo", noEnv, []string{"demo", "--barcode=-1"}, 2, "--barcode -1 is negative"},
		{"replay without a target", lookup, []string{"replay"}, 2, "exactly one of"},
		{"replay with two targets", lookup, []string{"replay", "--to-earliest", "--to-offset", "0:0"}, 2, "exactly one of"},
		{"replay with a malformed offset", lookup, []string{"replay", "--to-offset", "zero"}, 2, "partition:offset"},
		{"replay to an unknown partition", lookup, []string{"replay", "--to-offset", "9:0", "--dry-run"}, 2, "invalid replay target"},
		{"replay with a malformed time", noDB, []string{"replay", "--to-datetime", "yesterday"}, 2, "RFC 3339"},
		{"query once without flags, no DSN needed", noEnv, []string{"query", "once"}, 2, "--channel, --tenant, --merchant-order-no or --trade-no"},
		{"query once without credentials", noDB, []string{"query", "once", "--tenant", "1001", "--channel", "WECHAT", "--merchant-order-no", "P1"}, 2, "PAYCB_QUERY_CREDENTIALS_FILE"},
		{"query once of an unknown channel", noEnv, []string{"query", "once", "--tenant", "1001", "--channel", "PAYPAL", "--trade-no", "T"}, 2, "PAYPAL"},
		{"refund register without flags", lookup, []string{"refund", "register"}, 2, "--amount, --channel, --refund-no, --tenant, --trade-no"},
		{"refund register of nothing", lookup, []string{"refund", "register", "--tenant", "1", "--channel", "WECHAT", "--trade-no", "T", "--refund-no", "R", "--amount", "0"}, 2, "a refund registers a positive amount in fen"},
		{"refund register of a negative amount", lookup, []string{"refund", "register", "--tenant", "1", "--channel", "WECHAT", "--trade-no", "T", "--refund-no", "R", "--amount=-5"}, 2, "amount -5 fen: a refund registers a positive amount"},
		{"payment register without flags", lookup, []string{"payment", "register"}, 2, "--amount, --channel, --expires-at, --merchant-id, --merchant-order-no, --tenant"},
		{"payment register with a malformed expiry", lookup, []string{"payment", "register", "--tenant", "1", "--channel", "WECHAT", "--merchant-id", "M", "--merchant-order-no", "O", "--amount", "1", "--expires-at", "tomorrow"}, 2, "RFC 3339"},
		{"payment register expiring before it is created", lookup, []string{"payment", "register", "--tenant", "1", "--channel", "WECHAT", "--merchant-id", "M", "--merchant-order-no", "O", "--amount", "1", "--created-at", "2026-12-05T10:00:00Z", "--expires-at", "2026-12-05T09:00:00Z"}, 2, "not after created_at"},
		{"payment register of nothing", lookup, []string{"payment", "register", "--tenant", "1", "--channel", "WECHAT", "--merchant-id", "M", "--merchant-order-no", "O", "--amount", "0", "--created-at", "2026-12-05T09:00:00Z", "--expires-at", "2026-12-05T10:00:00Z"}, 2, "not positive"},
		{"refund register with a bad channel", lookup, []string{"refund", "register", "--tenant", "1", "--channel", "PAYPAL", "--trade-no", "T", "--refund-no", "R", "--amount", "1"}, 2, "PAYPAL"},
		{"purge without --older-than", lookup, []string{"purge"}, 2, "--older-than is required"},
		{"purge with a negative duration", lookup, []string{"purge", "--older-than", "-5h"}, 2, "negative"},
		{"orphans with a negative duration", lookup, []string{"orphans", "--older-than", "-1m"}, 2, "negative"},
		{"reconcile with a negative duration", lookup, []string{"reconcile", "--open-after", "-1h"}, 2, "negative"},
		{"reconcile with a malformed time", lookup, []string{"reconcile", "--from", "yesterday"}, 2, "RFC 3339"},
		{"dlq list of an unknown kind", lookup, []string{"dlq", "list", "--kind", "nosuchkind"}, 2, "not a dead-letter kind"},
		{"dlq redrive of an unknown kind", lookup, []string{"dlq", "redrive", "--kind", "bogus"}, 2, "not a dead-letter kind"},
		{"dlq redrive without a kind", lookup, []string{"dlq", "redrive"}, 2, "--kind is required"},
		{"dlq list with a negative count", lookup, []string{"dlq", "list", "--recent", "-1"}, 2, "negative"},
		{"version with an argument", noEnv, []string{"version", "x"}, 2, "unexpected arguments"},

		{"orphans not settled", lookup, []string{"orphans", "--older-than", "1m", "--settle"}, 3, "not settled"},

		{"purge below the floor", lookup, []string{"purge", "--older-than", "1h"}, 4, "refused"},
		{"refund of an unpaid trade", lookup, []string{"refund", "register", "--tenant", "1001", "--channel", "WECHAT", "--trade-no", "T9", "--refund-no", "rf-1", "--amount", "100"}, 4, "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runCmd(t, tc.lookup, tc.args...)
			assert.Equal(t, tc.code, exitCode(err), "%v: %v\nstdout: %s\nstderr: %s", tc.args, err, out, errOut)
			if tc.stderr != "" {
				msg := errOut
				if err != nil {
					msg += err.Error()
				}
				assert.Contains(t, msg, tc.stderr)
			}
		})
	}
}

// auditRows opens the test database and returns a function reading the
// audit trail, newest first.
func auditRows(t *testing.T, lookup func(string) (string, bool)) func() []audit.Entry {
	t.Helper()
	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return func() []audit.Entry {
		t.Helper()
		rows, err := audit.Recent(context.Background(), bun.IDB(db), 100)
		require.NoError(t, err)
		return rows
	}
}

// TestStateChangingCommandsWriteOneAuditRow: each state-changing command
// writes exactly one ss_operator_audit row (and a log line), its dry run or
// read-only form none; secrets in the arguments are masked.
func TestStateChangingCommandsWriteOneAuditRow(t *testing.T) {
	lookup, exec := opsEnv(t)
	rows := auditRows(t, lookup)
	exec(`INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, fingerprint, source_topic, source_partition, source_offset, created_at)
VALUES (1001, 'WECHAT:T1:PAYMENT_RECEIVED', 'PAYMENT_RECEIVED', 'ACQUIRED', REPEAT('a', 64), 'channel-events', 1, 7, ?)`, time.Now().UTC().Add(-time.Hour))
	dsn, _ := lookup("PAYCB_DB_DSN")

	for _, tc := range []struct {
		name    string
		args    []string
		command string // "" for no row
		result  string
	}{
		{"replay preview", []string{"replay", "--to-earliest", "--dry-run"}, "", ""},
		{"replay", []string{"replay", "--to-earliest"}, "replay", "ok"},
		{"dlq list", []string{"dlq", "list"}, "", ""},
		{"dlq redrive preview", []string{"dlq", "redrive", "--kind", "no_key", "--dry-run"}, "", ""},
		{"dlq redrive", []string{"dlq", "redrive", "--kind", "no_key"}, "dlq redrive", "ok"},
		{"orphans listed", []string{"orphans", "--older-than", "1m"}, "", ""},
		{"orphans settled", []string{"orphans", "--older-than", "1m", "--settle"}, "orphans", "found"},
		{"purge preview", []string{"purge", "--older-than", "720h", "--dry-run"}, "", ""},
		{"purge", []string{"purge", "--db-dsn", dsn, "--older-than", "720h"}, "purge", "ok"},
		{"purge refused", []string{"purge", "--older-than", "1h"}, "purge", "failed (exit 4)"},
		{"refund register refused", []string{"refund", "register", "--tenant", "1001", "--channel", "WECHAT", "--trade-no", "T9", "--refund-no", "rf-1", "--amount", "100"}, "refund register", "failed (exit 4)"},
		{"refund register invalid", []string{"refund", "register", "--tenant", "1001"}, "", ""},
		{"payment register", []string{"payment", "register", "--tenant", "1001", "--channel", "WECHAT", "--merchant-id", "1230000109", "--merchant-order-no", "P-audit", "--amount", "100", "--expires-at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "payment register", "ok"},
		{"payment register invalid", []string{"payment", "register", "--tenant", "1001"}, "", ""},
		{"reconcile", []string{"reconcile"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rows())
			out, errOut, err := runCmd(t, lookup, tc.args...)
			after := rows()
			if tc.command == "" {
				assert.Len(t, after, before, "no audit row: %v\n%s%s", err, out, errOut)
				return
			}
			require.Len(t, after, before+1, "one audit row: %v\n%s%s", err, out, errOut)
			r := after[0]
			assert.Equal(t, tc.command, r.Command)
			assert.Equal(t, tc.result, r.Result)
			assert.Equal(t, audit.Arguments(tc.args[len(strings.Fields(tc.command)):]), r.Arguments)
			assert.NotContains(t, r.Arguments, dsn, "the DSN is masked")
			assert.NotEmpty(t, r.OSUser)
			assert.NotEmpty(t, r.Host)
			assert.NotEmpty(t, r.Detail)
			assert.WithinDuration(t, time.Now(), r.At, time.Minute)
		})
	}
	masked := 0
	for _, r := range rows() {
		if strings.Contains(r.Arguments, "--db-dsn "+audit.Masked+" ") {
			masked++
		}
	}
	assert.Equal(t, 1, masked, "the purge given --db-dsn is recorded with the DSN masked")
}

// TestAuditLogLine: the action's log line at INFO, and without a DSN replay
// says that the log line is the only record.
func TestAuditLogLine(t *testing.T) {
	lookup, _ := opsEnv(t)
	rows := auditRows(t, lookup)
	noDB := with(lookup, map[string]string{"PAYCB_DB_DSN": "", "PAYCB_LOG_LEVEL": "info"})
	_, errOut, err := runCmd(t, noDB, "replay", "--to-earliest")
	require.NoError(t, err, errOut)
	assert.Contains(t, errOut, `msg="operator action"`)
	assert.Contains(t, errOut, "command=replay")
	assert.Contains(t, errOut, "result=ok")
	assert.Contains(t, errOut, "no ss_operator_audit row")
	assert.Empty(t, rows(), "no database configured: no row")
}
