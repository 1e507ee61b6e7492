package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// TestStatementImport imports each channel's fixture through the command:
// stored once, unchanged the second time, a corrected WeChat bill diffed
// and replacing the old one, broken files refused with exit 4, and every
// import in the audit trail.
func TestStatementImport(t *testing.T) {
	lookup := withMerchants(t, testMerchants)
	fixture := func(name string) string {
		return filepath.Join("..", "..", "pkg", "channels", strings.Split(name, "_")[0], "testdata", name)
	}
	wxFile := fixture("wechat_tradebill_ALL_2024-03-15.csv")

	for _, tc := range []struct{ channel, file string }{
		{"WECHAT", wxFile},
		{"ALIPAY", fixture("alipay_20880000000000000156_20240315.csv.zip")},
		{"SQB", fixture("sqb_query_responses_SYNTHETIC.jsonl")},
	} {
		args := []string{"statement", "import", "--channel", tc.channel, "--tenant", "1001", "--file", tc.file}
		if tc.channel == "WECHAT" {
			args = append(args, "--date", "2024-03-15")
		}
		out, stderr, err := runCmd(t, lookup, args...)
		require.NoError(t, err, "%s: %s%s", tc.channel, out, stderr)
		assert.Contains(t, out, "2024-03-15: new", tc.channel)
	}
	out, _, err := runCmd(t, lookup, "statement", "import", "--channel", "WECHAT", "--date", "2024-03-15", "--tenant", "1001", "--file", wxFile,
		"--sha1", "c2baf4b6b2671093d900aa83c375339a410ccae3")
	require.NoError(t, err)
	assert.Contains(t, out, "2024-03-15: unchanged, 5 lines")

	// A corrected bill: the second payment's fee line is the same, but the
	// refund of TEST-ORDER-0003 is gone and the summary says so.
	data, err := os.ReadFile(wxFile)
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
	out, stderr, err := runCmd(t, lookup, "statement", "import", "--channel", "WECHAT", "--date", "2024-03-15", "--tenant", "1001", "--file", corrected, "--json")
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
		{"--channel", "WECHAT", "--date", "2024-03-15", "--file", broken},
		{"--channel", "WECHAT", "--date", "2024-03-15", "--file", wxFile, "--sha1", strings.Repeat("0", 40)},
		{"--channel", "ALIPAY", "--file", wxFile},
	} {
		_, _, err := runCmd(t, lookup, append([]string{"statement", "import", "--tenant", "1001"}, args...)...)
		require.Error(t, err, args)
		assert.Equal(t, exitRefused, exitCode(err), "%v: %v", args, err)
	}
	for _, args := range [][]string{
		{"--channel", "WECHAT", "--file", wxFile},
		{"--channel", "PAYPAL", "--tenant", "1001", "--file", wxFile},
		{"--channel", "WECHAT", "--tenant", "1001", "--file", wxFile, "--sha1", "xyz"},
	} {
		_, _, err := runCmd(t, lookup, append([]string{"statement", "import"}, args...)...)
		require.Error(t, err, args)
		assert.Equal(t, exitUsage, exitCode(err), "%v: %v", args, err)
	}

	assert.Equal(t, 5, countRows(t, lookup, "ss_operator_audit WHERE command = 'statement import' AND result = 'ok'"),
		"every import that ran is in the audit trail")
	assert.Zero(t, countRows(t, lookup, "ss_operator_audit WHERE command = 'statement import' AND result <> 'ok'"),
		"a refused file changed nothing")
}

// countRows counts the rows of from (a table and its WHERE clause) in the
// database lookup's PAYCB_DB_DSN names.
func countRows(t *testing.T, lookup func(string) (string, bool), from string) int {
	t.Helper()
	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	var n int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM "+from).Scan(context.Background(), &n))
	return n
}

// withMerchants is opsEnv's lookup with PAYCB_TENANT_MERCHANTS_FILE set to
// a file of contents ("" leaves it unset).
func withMerchants(t *testing.T, contents string) func(string) (string, bool) {
	t.Helper()
	base, _ := opsEnv(t)
	if contents == "" {
		return base
	}
	path := writeMerchants(t, contents)
	return func(k string) (string, bool) {
		if k == "PAYCB_TENANT_MERCHANTS_FILE" {
			return path, true
		}
		return base(k)
	}
}

// TestStatementImportIsBoundToTheTenant: a file is imported only for the
// tenant its merchants are bound to. The bound merchant's file imports
// (a WeChat 特约商户号 of 0 meaning the 商户号); another tenant's merchant,
// a service provider's bill holding a sub-merchant not bound to the tenant,
// an Alipay account that is not a bound PID followed by 0156, and another
// terminal's responses are refused with exit 4 naming the merchant, and
// nothing is stored. Without the binding, import and --publish-missing
// refuse.
func TestStatementImportIsBoundToTheTenant(t *testing.T) {
	fixture := func(name string) string {
		return filepath.Join("..", "..", "pkg", "channels", strings.Split(name, "_")[0], "testdata", name)
	}
	wxFile := fixture("wechat_tradebill_ALL_2024-03-15.csv")
	data, err := os.ReadFile(wxFile)
	require.NoError(t, err)
	st, err := statements.Parse(channels.WeChat, data, "")
	require.NoError(t, err)
	dir := t.TempDir()
	must := func(f statementsample.File, err error) statementsample.File {
		t.Helper()
		require.NoError(t, err)
		return f
	}
	write := func(name string, f statementsample.File) string {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, f.Data, 0o600))
		return path
	}
	// A service provider's bill downloaded without sub_mchid: a
	// sub-merchant's rows, and one row of its own (特约商户号 0).
	bill := must(wechat.SampleBill(st.Lines, wechat.SampleBillOptions{MchID: "1900000100", SubMchID: "1900000109"}))
	bill.Data = []byte(strings.Replace(string(bill.Data), "`1900000109,", "`0,", 1))
	partner := write("partner.csv", bill)
	ali, err := statements.Parse(channels.Alipay, mustRead(t, fixture("alipay_20880000000000000156_20240315.csv.zip")), "")
	require.NoError(t, err)
	noSuffix := write("nosuffix.zip", must(alipay.SampleBill("2088000000000000", "2024-03-15", ali.Lines)))
	sq, err := statements.Parse(channels.SQB, mustRead(t, fixture("sqb_query_responses_SYNTHETIC.jsonl")), "")
	require.NoError(t, err)
	for i := range sq.Lines {
		sq.Lines[i].MerchantID = "100000000000000009"
	}
	otherTerminal := write("other.jsonl", must(sqb.SampleQueryResponses(sq.Lines)))

	const binding = "1001 WECHAT 1900000000\n1001 ALIPAY 2088000000000000\n1001 SQB 100000000000000001\n" +
		"2002 WECHAT 1900000109\n1001 WECHAT 1900000100\n2002 SQB 100000000000000009\n"
	lookup := withMerchants(t, binding)
	imp := func(ch, tenant, file string) (string, error) {
		t.Helper()
		args := []string{"statement", "import", "--channel", ch, "--tenant", tenant, "--file", file}
		if ch == "WECHAT" {
			args = append(args, "--date", "2024-03-15")
		}
		out, stderr, err := runCmd(t, lookup, args...)
		return out + stderr, err
	}

	for _, tt := range []struct {
		name, ch, tenant, file string
		want                   string // "" imports
	}{
		{"a bill of another tenant's merchant", "WECHAT", "2002", wxFile, "names merchant 1900000000 (bound to tenant 1001), not bound to tenant 2002"},
		{"a service provider's bill holding another tenant's sub-merchant", "WECHAT", "1001", partner, "names merchant 1900000109 (bound to tenant 2002), not bound to tenant 1001"},
		{"an Alipay account without 0156", "ALIPAY", "1001", noSuffix, "account 2088000000000000, which is not a PID followed by 0156"},
		{"another terminal's responses", "SQB", "1001", otherTerminal, "names merchant 100000000000000009 (bound to tenant 2002), not bound to tenant 1001"},
		{"a bill of a merchant bound to no tenant", "WECHAT", "3003", partner, "merchant 1900000100 (bound to tenant 1001), merchant 1900000109 (bound to tenant 2002), not bound to tenant 3003"},
		{"the bound merchant's bill, 特约商户号 0", "WECHAT", "1001", wxFile, ""},
		{"the bound PID's account", "ALIPAY", "1001", fixture("alipay_20880000000000000156_20240315.csv.zip"), ""},
		{"the bound terminal's responses", "SQB", "1001", fixture("sqb_query_responses_SYNTHETIC.jsonl"), ""},
		{"the other tenant's terminal, for it", "SQB", "2002", otherTerminal, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := imp(tt.ch, tt.tenant, tt.file)
			if tt.want == "" {
				require.NoError(t, err, out)
				assert.Contains(t, out, "2024-03-15: new")
				return
			}
			require.Error(t, err)
			assert.Equal(t, exitRefused, exitCode(err), "%v", err)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	var files int
	require.NoError(t, db.NewRaw("SELECT COUNT(*) FROM ss_statement_file").Scan(context.Background(), &files))
	assert.Equal(t, 4, files, "only the four files of bound merchants are stored")

	// The sub-merchant becomes tenant 1001's: the service provider's bill
	// imports.
	lookup = withMerchants(t, "1001 WECHAT 1900000100\n1001 WECHAT 1900000109\n")
	out, stderr, err := runCmd(t, lookup, "statement", "import", "--channel", "WECHAT", "--date", "2024-03-15", "--tenant", "1001", "--file", partner)
	require.NoError(t, err, out+stderr)

	// Without the binding nothing is imported or published.
	lookup = withMerchants(t, "")
	_, _, err = runCmd(t, lookup, "statement", "import", "--channel", "WECHAT", "--date", "2024-03-15", "--tenant", "1001", "--file", wxFile)
	require.Error(t, err)
	assert.Equal(t, exitRefused, exitCode(err))
	require.ErrorContains(t, err, "set PAYCB_TENANT_MERCHANTS_FILE")
	_, _, err = runCmd(t, lookup, "statement", "reconcile", "--channel", "WECHAT", "--tenant", "1001", "--date", "2024-03-15", "--publish-missing")
	require.Error(t, err)
	assert.Equal(t, exitRefused, exitCode(err))
	require.ErrorContains(t, err, "set PAYCB_TENANT_MERCHANTS_FILE")

	// A binding that gives one merchant to two tenants is a configuration
	// error, naming the lines.
	lookup = withMerchants(t, "1001 WECHAT 1900000000\n2002 WECHAT 1900000000\n")
	_, _, err = runCmd(t, lookup, "statement", "import", "--channel", "WECHAT", "--date", "2024-03-15", "--tenant", "1001", "--file", wxFile)
	require.Error(t, err)
	assert.Equal(t, exitUsage, exitCode(err))
	assert.ErrorContains(t, err, "line 2: WECHAT merchant 1900000000 is bound to tenant 2002, but line 1 binds it to tenant 1001")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

// TestStatementImportKeepsToTheBillsDay: a WeChat bill needs the day it
// is of (--date; the file states none), and an Alipay bill's window must
// be the --date given; a bill carrying a row dated outside its day is
// refused (exit 4) naming the line, its date and the bill's day, and a
// bill with a row twice naming both lines; the day held before keeps
// every line, and nothing refused is stored or audited. Shouqianba's
// responses take no --date.
func TestStatementImportKeepsToTheBillsDay(t *testing.T) {
	lookup := withMerchants(t, testMerchants)
	fixture := func(name string) string {
		return filepath.Join("..", "..", "pkg", "channels", strings.Split(name, "_")[0], "testdata", name)
	}
	st, err := statements.Parse(channels.WeChat, mustRead(t, fixture("wechat_tradebill_ALL_2024-03-15.csv")), "")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name string, lines ...statements.Line) string {
		t.Helper()
		f, err := wechat.SampleBill(lines, wechat.SampleBillOptions{})
		require.NoError(t, err)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, f.Data, 0o600))
		return path
	}
	imp := func(args ...string) (string, error) {
		t.Helper()
		out, stderr, err := runCmd(t, lookup, append([]string{"statement", "import", "--tenant", "1001"}, args...)...)
		return out + stderr, err
	}
	day := st.Lines[:4] // three payments and a refund of 2024-03-15
	out, err := imp("--channel", "WECHAT", "--date", "2024-03-15", "--file", write("day.csv", day...))
	require.NoError(t, err, out)
	assert.Contains(t, out, "2024-03-15: new, 4 lines in the file, 4 held")

	// The next day's bill, one of its rows dated 2024-03-15.
	next := slices.Clone(st.Lines[:2])
	for i := range next {
		next[i].TradeNo += "9"
		next[i].Time = next[i].Time.AddDate(0, 0, 1)
	}
	stray := st.Lines[4] // the full refund of TEST-ORDER-0003, 16:20:33
	stray.RefundNo = "TEST-REFUND-STRAY"
	strayFile := write("stray.csv", next[0], stray, next[1])
	out, err = imp("--channel", "WECHAT", "--date", "2024-03-16", "--file", strayFile)
	require.Error(t, err, out)
	assert.Equal(t, exitRefused, exitCode(err), "%v", err)
	require.ErrorContains(t, err, "WECHAT bill: line 3 is dated 2024-03-15, outside the bill's day 2024-03-16")

	// A WeChat bill states no day: --date is required.
	_, err = imp("--channel", "WECHAT", "--file", strayFile)
	require.Error(t, err)
	assert.Equal(t, exitUsage, exitCode(err), "%v", err)
	require.ErrorContains(t, err, "--date is required")
	for _, bad := range [][]string{
		{"--channel", "WECHAT", "--date", "16/03/2024", "--file", strayFile},
		{"--channel", "SQB", "--date", "2024-03-15", "--file", fixture("sqb_query_responses_SYNTHETIC.jsonl")},
	} {
		_, err = imp(bad...)
		require.Error(t, err, bad)
		assert.Equal(t, exitUsage, exitCode(err), "%v: %v", bad, err)
	}

	// Alipay's window is its day; --date must be it.
	aliFile := fixture("alipay_20880000000000000156_20240315.csv.zip")
	_, err = imp("--channel", "ALIPAY", "--date", "2024-03-16", "--file", aliFile)
	require.Error(t, err)
	assert.Equal(t, exitRefused, exitCode(err), "%v", err)
	require.ErrorContains(t, err, "ALIPAY bill: the file states the day 2024-03-15, not 2024-03-16")

	// The day again with its second payment twice; the summary agrees.
	out, err = imp("--channel", "WECHAT", "--date", "2024-03-15", "--file", write("twice.csv", day[0], day[1], day[1], day[2], day[3]))
	require.Error(t, err, out)
	assert.Equal(t, exitRefused, exitCode(err), "%v", err)
	require.ErrorContains(t, err, "line 4 repeats line 3 (PAYMENT 4200000000202403150000000002)")

	out, err = imp("--channel", "WECHAT", "--date", "2024-03-15", "--file", write("again.csv", day...))
	require.NoError(t, err, out)
	assert.Contains(t, out, "2024-03-15: unchanged, 4 lines in the file, 4 held", "the day kept every line it held")

	assert.Equal(t, 1, countRows(t, lookup, "ss_statement_file"), "only the day imported is held")
	assert.Zero(t, countRows(t, lookup, "ss_operator_audit WHERE command = 'statement import' AND result <> 'ok'"),
		"a refused file changed nothing")
}
