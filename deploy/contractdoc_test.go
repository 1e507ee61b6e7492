package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/metrics"
)

// TestContractDocCoversTheCode keeps docs/contract.md complete: every
// environment variable the worker reads, every metric label value and every
// column the MySQL migrations create is named there, in backquotes.
func TestContractDocCoversTheCode(t *testing.T) {
	raw, err := os.ReadFile("../docs/contract.md")
	require.NoError(t, err)
	doc := string(raw)
	named := func(what, name string) {
		t.Helper()
		assert.Contains(t, doc, "`"+name+"`", "docs/contract.md does not name %s %s", what, name)
	}

	for _, v := range config.EnvVars() {
		named("environment variable", v)
	}
	for _, o := range metrics.Outcomes {
		named("paycb_events_total outcome", string(o))
	}
	for _, k := range metrics.DeadLetterKinds {
		named("dead-letter kind", string(k))
	}
	for _, o := range metrics.SettleOutcomes {
		named("paycb_settle_total outcome", string(o))
	}
	for _, s := range metrics.Stages {
		named("paycb_processing_errors_total stage", string(s))
	}

	files, err := filepath.Glob("../schema/mysql/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	table := regexp.MustCompile(`(?i)^\s*(?:CREATE TABLE(?: IF NOT EXISTS)?|ALTER TABLE)\s+(\w+)`)
	column := regexp.MustCompile(`(?i)^\s*(?:ADD COLUMN\s+)?([a-z_]+)\s+(?:BIGINT|INT|VARBINARY|VARCHAR|CHAR|MEDIUMTEXT|DATETIME)`)
	columns := 0
	for _, f := range files {
		sql, err := os.ReadFile(f)
		require.NoError(t, err)
		for line := range strings.Lines(string(sql)) {
			if m := table.FindStringSubmatch(line); m != nil {
				named("table", m[1])
			}
			if m := column.FindStringSubmatch(line); m != nil {
				named("column", m[1])
				columns++
			}
		}
	}
	require.Greater(t, columns, 40, "the column pattern no longer matches the migrations")
}
