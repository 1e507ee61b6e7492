package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

func statementCmd() command {
	return command{
		name:    "statement",
		summary: "channel statements (对账单): import, reconcile, declare a day empty",
		description: `The channels' daily statement files are the second witness of what was
paid and refunded: import one per tenant, channel and day, then reconcile
the day against the ledger.`,
		verbs: []command{
			statementImportCmd(),
			statementReconcileCmd(),
			statementEmptyCmd(),
		},
	}
}

func statementImportCmd() command {
	return command{
		name:     "import",
		summary:  "import one channel statement file for a tenant",
		synopsis: "--channel CH --tenant N --file F [--date YYYY-MM-DD] [--sha1 HEX] [--json]",
		description: `Parses F as the channel's statement and stores its lines for the tenant,
one statement per Beijing-time day:
  WECHAT  the trade bill, bill_type=ALL, plain or gzip (current and legacy
          headers); --sha1 is the hash_value the bill API returned, over
          the uncompressed file
  ALIPAY  the trade bill zip; the …_业务明细.csv entry is read (GBK)
  SQB     per-order /upay/v2/query responses, one whole response a line
          (Shouqianba publishes no statement file)
A file whose rows disagree with its own summary or footer, an unknown
layout, or a hash that differs is refused with the reason.

Limits: F is read as a stream, a line at a time, never whole; a file
larger than 256 MiB, more than 256 MiB uncompressed, a line over 64 KiB,
more than 300,000 lines, more than 1,000 blank lines in a row, or a
gzip stream or zip entry grown more than 100 times once past 8 MiB is no
statement, and is refused as soon as it shows it (docs/statements.md,
"Limits"). What is refused early takes under 64 MiB; a bill about 2 KiB a
line (docs/operations.md).

A WeChat or Alipay bill is the bill of one Beijing-time day: WeChat's file
states no day, so --date (the bill_date it was downloaded for) is
required; Alipay's states its window, which --date, when given, must be.
A row dated outside the bill's day is refused by line number, date and
day, and the file is not imported: a bill never touches another day.
Shouqianba responses are dated order by order (no --date). A row that
repeats another (the same payment, refund or order) is refused naming
both lines. A day's statement is built from every file imported for it:
  WECHAT, ALIPAY  a bill is its merchant's whole day (WeChat 特约商户号, or
          商户号 when that is 0; Alipay's #账号): it replaces the lines
          that merchant held for the day, after the differences are
          printed; another merchant's bill of the day stays. The same file
          again changes nothing.
  SQB     files merge per order (sn), whatever day holds it: a response
          supersedes the one held when its finish_time is later, or the
          same and it says something else; an older one changes nothing
          (listed as older). No other line is removed.
Each day's version (a hash of its lines held) is printed; reconcile reports
the version it compared. Recorded in the audit trail.

Every merchant the file names must be bound to --tenant in
PAYCB_TENANT_MERCHANTS_FILE (WeChat 商户号, or 特约商户号 when it is not 0;
the Alipay #账号, which is a bound PID followed by 0156; Shouqianba
terminal_sn): a service provider's bill downloaded without sub_mchid holds
every sub-merchant, and is refused unless all of them are the tenant's.
Without the variable, import refuses.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a flag missing or invalid, no DSN, a bad PAYCB_TENANT_MERCHANTS_FILE"},
			{exitRefused, "refused: the file is not a statement of the channel's layout, passes a limit, disagrees with its own summary, or its hash differs; " +
				"a row is dated outside the bill's day, or the file states another day than --date; a row repeats another; " +
				"it names a merchant not bound to --tenant in PAYCB_TENANT_MERCHANTS_FILE, or that variable is not set"},
		},
		setup: statementImportCommand,
	}
}

func statementImportCommand(fs *flag.FlagSet) runFunc {
	channel := fs.String("channel", "", channels.CodeList()+" (required)")
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	file := fs.String("file", "", "the statement file (required)")
	sha := fs.String("sha1", "", "expected SHA-1 (hex) of the uncompressed file, e.g. WeChat's hash_value")
	date := fs.String("date", "", "the Beijing-time day YYYY-MM-DD the bill is of: required for a WeChat bill (its bill_date), "+
		"checked against an Alipay bill's window; not for Shouqianba responses")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		ch, err := statementTarget("import", *channel, *tenant, "--file", *file)
		if err != nil {
			return err
		}
		if *sha != "" && !isHexSHA1(*sha) {
			return usagef("statement import: --sha1 %q is not 40 hex digits", *sha)
		}
		if err := checkImportDate(ch, *date); err != nil {
			return err
		}
		f, size, err := openStatementFile(*file)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		binding, err := merchantBinding(env, "statement import")
		if err != nil {
			return err
		}
		st, err := statements.ParseReader(ch, f, size, *sha)
		if err != nil {
			if errors.Is(err, statements.ErrFormat) || errors.Is(err, statements.ErrMismatch) || errors.Is(err, statements.ErrHash) {
				return &exitError{code: exitRefused, err: fmt.Errorf("statement import refused %s: %w", *file, err)}
			}
			return fmt.Errorf("statement import %s: %w", *file, err)
		}
		st.Day = *date
		if st.Day == "" && st.From.IsZero() && statements.RefundLinesOf(ch) != statements.RefundLinesPerOrder {
			return usagef("statement import: --date is required: a %s bill states no day; give the day it was downloaded for (its bill_date)", ch)
		}
		if err := statementbook.CheckImport(st); err != nil {
			return &exitError{code: exitRefused, err: fmt.Errorf("statement import refused %s: %w", *file, err)}
		}
		if err := statementbook.CheckStatementMerchants(binding, env.cfg.Worker.TenantMerchantsFile, *tenant, st); err != nil {
			return &exitError{code: exitRefused, err: fmt.Errorf("statement import refused %s: %w", *file, err)}
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		res, err := statementbook.ImportStatement(ctx, db, *tenant, st, time.Now())
		if errors.Is(err, statements.ErrRepeated) {
			// A line another merchant's statement of the day holds already.
			return env.audit(ctx, db, "", &exitError{code: exitRefused, err: fmt.Errorf("statement import refused %s: %w", *file, err)})
		}
		if err != nil {
			return env.audit(ctx, db, "", fmt.Errorf("statement import %s: %w", *file, err))
		}
		out := newPrinter(env)
		if *asJSON {
			out.json(res)
		} else {
			printImport(out, res)
		}
		return env.audit(ctx, db, importSummary(res), out.err)
	}
}

// checkImportDate checks statement import's --date: YYYY-MM-DD when
// given, and not for a channel whose statement is dated order by order
// (Shouqianba); usage errors.
func checkImportDate(ch channels.Channel, date string) error {
	if date == "" {
		return nil
	}
	if statements.RefundLinesOf(ch) == statements.RefundLinesPerOrder {
		return usagef("statement import: --date is for a bill of one day; %s responses are dated order by order (finish_time)", ch)
	}
	if _, err := time.ParseInLocation(time.DateOnly, date, statements.Beijing); err != nil {
		return usagef("statement import: --date %q is not YYYY-MM-DD", date)
	}
	return nil
}

// merchantBinding reads the merchant binding (PAYCB_TENANT_MERCHANTS_FILE)
// for a command that must not run without one: without it the command is
// refused (exit 4), since nothing would tell one merchant's statement from
// another's. The file itself was checked with the configuration.
func merchantBinding(env *environment, what string) (merchantbinding.Binding, error) {
	path := env.cfg.Worker.TenantMerchantsFile
	if path == "" {
		return merchantbinding.Binding{}, &exitError{code: exitRefused, err: fmt.Errorf(
			"%s refused: set PAYCB_TENANT_MERCHANTS_FILE (worker.tenant_merchants_file), the file that binds each merchant "+
				"to its tenant, so that a statement is only ever taken for its own merchant's tenant", what)}
	}
	f, err := merchantbinding.Load(path)
	if err != nil {
		return merchantbinding.Binding{}, usagef("%s: worker.tenant_merchants_file (PAYCB_TENANT_MERCHANTS_FILE): %v", what, err)
	}
	return f.Current(), nil
}

// statementTarget checks the flags every statement verb shares, --channel
// and --tenant, and the verb's own required flag (name, value), reporting
// every missing one at once; the errors are usage errors.
func statementTarget(verb, channel string, tenant int64, name, value string) (channels.Channel, error) {
	if err := requireFlags("statement "+verb,
		required{"--channel", channel != ""}, required{"--tenant", tenant != 0}, required{name, value != ""}); err != nil {
		return "", err
	}
	ch := channels.Channel(channel)
	if !ch.Valid() {
		return "", usagef("statement %s: --channel %q is not %s", verb, channel, channels.CodeList())
	}
	if tenant < 0 {
		return "", usagef("statement %s: --tenant %d must be positive", verb, tenant)
	}
	return ch, nil
}

// openStatementFile opens the named file for the parser to stream from,
// and returns its size; a file larger than statements.MaxTextBytes (more
// than any bill, compressed or not, can be) is refused before it is read.
func openStatementFile(name string) (*os.File, int64, error) {
	f, err := os.Open(filepath.Clean(name)) //nolint:gosec // the operator names the file to import
	if err != nil {
		return nil, 0, fmt.Errorf("statement import: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("statement import: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > statements.MaxTextBytes {
		_ = f.Close()
		return nil, 0, &exitError{code: exitRefused, err: fmt.Errorf("statement import refused %s: not a regular file of at most %d bytes: %w",
			name, statements.MaxTextBytes, statements.ErrLimit)}
	}
	return f, fi.Size(), nil
}

func isHexSHA1(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// importSummary is one line per day for the audit trail.
func importSummary(res statementbook.ImportResult) string {
	parts := make([]string, 0, len(res.Days))
	for _, d := range res.Days {
		parts = append(parts, fmt.Sprintf("%s %s (%d lines, %d changes)", d.Day, d.Status, d.Lines, len(d.Changes)))
	}
	return fmt.Sprintf("tenant %d %s %s sha1 %s: %s", res.TenantID, res.Channel, res.Format, res.SHA1, strings.Join(parts, "; "))
}

func printImport(out *printer, res statementbook.ImportResult) {
	out.printf("tenant %d %s statement (%s, sha1 %s)\n", res.TenantID, res.Channel, res.Format, res.SHA1)
	for _, d := range res.Days {
		out.printf("%s: %s, %d lines in the file, %d held, version %s\n", d.Day, d.Status, d.Lines, d.Held, d.Version)
		if len(d.Older) > 0 {
			out.printf("  older than the responses held (kept): %s\n", strings.Join(d.Older, ", "))
		}
		for _, c := range d.Changes {
			switch {
			case c.Old == nil:
				out.printf("  + %s: %s\n", c.Identity, describeLine(*c.New))
			case c.New == nil:
				out.printf("  - %s: %s\n", c.Identity, describeLine(*c.Old))
			default:
				out.printf("  ~ %s: %s -> %s\n", c.Identity, describeLine(*c.Old), describeLine(*c.New))
			}
		}
	}
}

func describeLine(l statements.Line) string {
	return fmt.Sprintf("amount %d settled %d fee %d/100000 yuan status %s at %s (line %d)",
		l.Amount, l.SettledAmount, l.FeeMicroYuan, l.Status, l.Time.In(statements.Beijing).Format(time.DateTime), l.LineNo)
}
