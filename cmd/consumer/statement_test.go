package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
)

// TestStatementImport imports each channel's fixture through the command:
// stored once, unchanged the second time, a corrected WeChat bill diffed
// and replacing the old one, broken files refused with exit 4, and every
// import in the audit trail.
func TestStatementImport(t *testing.T) {
	lookup, _ := opsEnv(t)
	fixture := func(name string) string { return filepath.Join("..", "..", "pkg", "statements", "testdata", name) }
	wechat := fixture("wechat_tradebill_ALL_2024-03-15.csv")

	for _, tc := range []struct{ channel, file string }{
		{"WECHAT", wechat},
		{"ALIPAY", fixture("alipay_20880000000000000156_20240315.csv.zip")},
		{"SQB", fixture("sqb_query_responses_SYNTHETIC.jsonl")},
	} {
		out, stderr, err := runCmd(t, lookup, "statement", "import", "--channel", tc.channel, "--tenant", "1001", "--file", tc.file)
		require.NoError(t, err, "%s: %s%s", tc.channel, out, stderr)
		assert.Contains(t, out, "2024-03-15: new", tc.channel)
	}
	out, _, err := runCmd(t, lookup, "statement", "import", "--channel", "WECHAT", "--tenant", "1001", "--file", wechat,
		"--sha1", "c2baf4b6b2671093d900aa83c375339a410ccae3")
	require.NoError(t, err)
	assert.Contains(t, out, "2024-03-15: unchanged, 5 lines")

	// A corrected bill: the second payment's fee line is the same, but the
	// refund of TEST-ORDER-0003 is gone and the summary says so.
	data, err := os.ReadFile(wechat)
	require.NoError(t, err)
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "TEST-REFUND-0002") {
			continue
		}
		if strings.HasPrefix(line, "`5,") {
			line = "`4,`183.80,`30.00,`0.00,`0.92000,`183.80,`30.00"
		}
		kept = append(kept, line)
	}
	corrected := filepath.Join(t.TempDir(), "corrected.csv")
	require.NoError(t, os.WriteFile(corrected, []byte(strings.Join(kept, "\n")), 0o600))
	out, stderr, err := runCmd(t, lookup, "statement", "import", "--channel", "WECHAT", "--tenant", "1001", "--file", corrected, "--json")
	require.NoError(t, err, out+stderr)
	var res struct {
		Days []struct {
			Status  string `json:"status"`
			Changes []struct {
				Identity string          `json:"identity"`
				Old      json.RawMessage `json:"old"`
				New      json.RawMessage `json:"new"`
			} `json:"changes"`
		} `json:"days"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.Days, 1)
	assert.Equal(t, "replaced", res.Days[0].Status)
	require.Len(t, res.Days[0].Changes, 1)
	assert.Equal(t, `REFUND 4200000000202403150000000003 refund "TEST-REFUND-0002"`, res.Days[0].Changes[0].Identity)

	broken := filepath.Join(t.TempDir(), "broken.csv")
	require.NoError(t, os.WriteFile(broken, []byte(strings.Replace(string(data), "`5,", "`6,", 1)), 0o600))
	for _, args := range [][]string{
		{"--channel", "WECHAT", "--file", broken},
		{"--channel", "WECHAT", "--file", wechat, "--sha1", strings.Repeat("0", 40)},
		{"--channel", "ALIPAY", "--file", wechat},
	} {
		_, _, err := runCmd(t, lookup, append([]string{"statement", "import", "--tenant", "1001"}, args...)...)
		require.Error(t, err, args)
		assert.Equal(t, exitRefused, exitCode(err), "%v: %v", args, err)
	}
	for _, args := range [][]string{
		{"--channel", "WECHAT", "--file", wechat},
		{"--channel", "PAYPAL", "--tenant", "1001", "--file", wechat},
		{"--channel", "WECHAT", "--tenant", "1001", "--file", wechat, "--sha1", "xyz"},
	} {
		_, _, err := runCmd(t, lookup, append([]string{"statement", "import"}, args...)...)
		require.Error(t, err, args)
		assert.Equal(t, exitUsage, exitCode(err), "%v: %v", args, err)
	}

	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	var audited, refusedAudited int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_operator_audit WHERE command = 'statement import' AND result = 'ok'").Scan(context.Background(), &audited))
	assert.Equal(t, 5, audited, "every import that ran is in the audit trail")
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_operator_audit WHERE command = 'statement import' AND result <> 'ok'").Scan(context.Background(), &refusedAudited))
	assert.Zero(t, refusedAudited, "a refused file changed nothing")
}
