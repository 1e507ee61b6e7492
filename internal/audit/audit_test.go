package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/audit"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
)

func TestWriteAndRecent(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) {
		t.Helper()
		ctx := context.Background()
		at := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.FixedZone("CST", 8*3600))
		first := audit.Entry{
			At: at, OSUser: "ops", Host: "bastion-1", Command: "dlq redrive",
			Arguments: "--kind no_key", Result: "ok", Detail: "kind no_key: 2 selected, 2 published",
		}
		second := audit.Entry{
			At: at.Add(time.Second), OSUser: "ops", Host: "bastion-1", Command: "purge",
			Arguments: "--older-than 720h", Result: audit.Result(4),
		}
		require.NoError(t, audit.Write(ctx, db, first))
		require.NoError(t, audit.Write(ctx, db, second))

		got, err := audit.Recent(ctx, db, 10)
		require.NoError(t, err)
		require.Len(t, got, 2)
		want2 := second
		want2.At = second.At.UTC().Truncate(time.Microsecond)
		assert.Equal(t, want2, got[0], "newest first; an empty detail reads back empty")
		want1 := first
		want1.At = first.At.UTC().Truncate(time.Microsecond)
		assert.Equal(t, want1, got[1], "stored in UTC to the microsecond")

		var nulls int
		require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_operator_audit WHERE detail IS NULL").Scan(ctx, &nulls))
		assert.Equal(t, 1, nulls, "an empty detail is stored as NULL")
	})
}

func TestArgumentsMaskSecrets(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plain", []string{"--kind", "no_key", "--dry-run"}, "--kind no_key --dry-run"},
		{"dsn as the next argument", []string{"--db-dsn", "u:pw@tcp(db)/x", "--kind", "k"}, "--db-dsn *** --kind k"},
		{"dsn after =", []string{"-db-dsn=u:pw@tcp(db)/x", "--settle"}, "-db-dsn=*** --settle"},
		{"password flag", []string{"--kafka-sasl-password", "s3cret"}, "--kafka-sasl-password ***"},
		{"quoted", []string{"--note", "paid twice, closed"}, `--note "paid twice, closed"`},
		{"empty value", []string{"--note", ""}, `--note ""`},
		{"not a flag", []string{"-", "--"}, "- --"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := audit.Arguments(tc.args)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "pw@")
			assert.NotContains(t, got, "s3cret")
		})
	}
}

func TestResultAndWho(t *testing.T) {
	assert.Equal(t, "ok", audit.Result(0))
	assert.Equal(t, "failed (exit 1)", audit.Result(1))
	assert.Equal(t, "found", audit.Result(3), "exit 3 is a finding, not a failure")
	assert.Equal(t, "failed (exit 4)", audit.Result(4))
	assert.LessOrEqual(t, len(audit.Result(4)), 16, "fits the result column")
	u, h := audit.Who()
	assert.NotEmpty(t, u)
	assert.NotEmpty(t, h)
	assert.True(t, audit.SecretFlag("db-dsn"))
	assert.False(t, audit.SecretFlag("kind"))
}
