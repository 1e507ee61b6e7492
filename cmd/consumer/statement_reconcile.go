package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
)

func statementReconcileCmd() command {
	return command{
		name:     "reconcile",
		summary:  "reconcile one imported statement day against the ledger",
		synopsis: "--channel CH --tenant N --date YYYY-MM-DD [--publish-missing] [--json]",
		description: `Compares the statement imported for the tenant, channel and Beijing-time
day with the ledger's merchant_payable postings, dated by the channel's own
time of each event (safe while workers run: it writes nothing but the
day's result, ss_statement_reconcile), and lists:
  missing_in_ledger     the channel settled it, nothing is posted
  missing_in_statement  posted on the day, in neither the day's statement
                        nor an imported neighbouring day's
  amount_mismatch       both have it, with different amounts
  status_mismatch       the statement says the channel did not settle what
                        the ledger posted (a WeChat refund row PROCESSING or
                        FAIL: a snapshot, never updated; a REVOKED payment)
  no_statement          nothing is imported for the day and it is not
                        declared empty, postings or not: check the download,
                        import it, or record the channel's answer that there
                        is none with consumer statement empty
A day's statement is every file imported for it (Shouqianba responses merge
per order; a WeChat or Alipay bill is its merchant's whole day); the report
names its version, a hash of the lines held (statement_version), and
--publish-missing refuses when the day changed since. A day declared empty
is compared with no lines: every posting of it is missing_in_statement.
Payments match by trade number, WeChat refunds by refund number; Alipay
refunds compare as the day's per-trade totals, Shouqianba orders as
total_amount − net_amount against all refunds posted up to the day.
The day's fees are printed beside the result; they are not discrepancies.

--publish-missing (--tenant is required, as always) then publishes to the
input topic (PAYCB_KAFKA_TOPIC), for each missing_in_ledger item the
statement describes exactly, the event the channel's callback would have
produced, same idempotency key and fingerprint, with content type
application/vnd.paycb.statement+json, keyed CHANNEL:trade_no: WeChat
payments, WeChat refunds whose order total is known (a payment line of the
trade in an imported statement, or its order row; they must agree), Alipay
and Shouqianba payments. The worker claims it like any callback; a callback
arriving later is a duplicate. Not published, and listed:
  needs_query        refunds of Alipay and Shouqianba (their callbacks
                     report the total refunded so far, the statement each
                     refund's own amount), WeChat refunds of unknown or
                     disagreeing order total: each refund among them with
                     a refund number becomes a refund registration
                     (ss_refund_request, REGISTERED, once however often
                     this runs), which the querier (consumer query run)
                     asks the channel about after its first wait; an
                     answer that proves the callback's event is settled
                     by the worker and the item leaves the day's report,
                     one that cannot (an Alipay partial refund) posts
                     nothing and the item stays listed. Each item says
                     what the querier does: not asked yet, asking and its
                     last answer, or why it cannot ask (no order of the
                     trade names a bound merchant; a payment, which the
                     querier asks about only when a service registered
                     it): query those by hand
  already_published  published by an earlier run (ss_statement_publish):
                     a second run publishes nothing
  claimed            the worker already holds a claim for the key
Each event published is signed with the current (first) key of
PAYCB_STATEMENT_KEY_FILE, in the header x-paycb-statement-signature (key
id and HMAC-SHA256 of the message value): the workers dead-letter a
statement event without a valid signature as unauthenticated. Without the
key file --publish-missing refuses (exit 4).
A status_mismatch is never published. The publication is recorded in the
audit trail. The exit status is the reconciliation's: 3 while
discrepancies remain, which they do until the worker has settled what was
published; reconcile again afterwards.`,
		exits: []exitStatus{
			{exitFailure, "a runtime failure (with --publish-missing: the broker, a missing topic, the day's statement changed since it was reconciled)"},
			{exitUsage, "a usage or configuration error: a flag missing or invalid (--publish-missing without --tenant), no DSN"},
			{exitFound, "discrepancies found, or no_statement: nothing imported for the day and not declared empty (with --publish-missing: found before publishing, and nothing is published for a day without a statement; they remain until the worker has settled what was published)"},
			{exitRefused, "refused: --publish-missing without PAYCB_TENANT_MERCHANTS_FILE or without PAYCB_STATEMENT_KEY_FILE, nothing reconciled or published"},
		},
		setup: statementReconcileCommand,
	}
}

func statementReconcileCommand(fs *flag.FlagSet) runFunc {
	channel := fs.String("channel", "", channels.CodeList()+" (required)")
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	date := fs.String("date", "", "the statement's day, YYYY-MM-DD, Beijing time (required)")
	publish := fs.Bool("publish-missing", false, "publish to the input topic the missing_in_ledger events the statement describes exactly")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		ch, err := statementTarget("reconcile", *channel, *tenant, "--date", *date)
		if err != nil {
			if *publish && *tenant == 0 {
				return usagef("%w: --publish-missing publishes for one tenant, named explicitly", err)
			}
			return err
		}
		if _, err := time.Parse(time.DateOnly, *date); err != nil {
			return usagef("statement reconcile: --date %q is not YYYY-MM-DD", *date)
		}
		var signing statementauth.Keys
		if *publish {
			// The day's statement was bound to the tenant at import; without
			// a binding nothing says it was.
			if _, err := merchantBinding(env, "statement reconcile --publish-missing"); err != nil {
				return err
			}
			if signing, err = publishSigningKeys(env); err != nil {
				return err
			}
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		// finish records a publication in the audit trail; a plain
		// reconciliation changes nothing worth auditing.
		finish := func(detail string, err error) error {
			if !*publish {
				return err
			}
			return env.audit(ctx, db, detail, err)
		}
		rep, err := statementbook.ReconcileStatement(ctx, db, *tenant, ch, *date)
		if errors.Is(err, statementbook.ErrNoStatement) {
			return finish("", noStatementExit(newPrinter(env), rep, *asJSON, ch, *tenant, *date))
		}
		if err != nil {
			return finish("", err)
		}
		var pub *statementbook.PublishReport
		if *publish {
			k, err := opsKafka(ctx, env)
			if err != nil {
				return finish("", err)
			}
			input := statementbook.Topic{Name: k.Topic, Publish: func(ctx context.Context, msgs []kafkaops.Message) error {
				return ops.Publish(ctx, k, msgs)
			}}
			p, err := statementbook.PublishMissing(ctx, db, input, rep, signing, time.Now())
			if err != nil {
				if len(p.Published) > 0 {
					err = fmt.Errorf("%w (published before the failure: %s)", err, strings.Join(publishedKeys(p.Published), ", "))
				}
				return finish("", err)
			}
			pub = &p
		}
		out := newPrinter(env)
		if *asJSON {
			out.json(statementReconcileJSON{StatementReport: rep, Publish: pub})
		} else {
			printStatementReconcile(out, rep)
			if pub != nil {
				printPublishMissing(out, *pub, !rep.OK())
			}
		}
		detail := ""
		if pub != nil {
			detail = publishDetail(*pub)
		}
		err = out.err
		if err == nil && !rep.OK() {
			// The audit trail records the error in place of the detail:
			// the error carries it.
			msg := fmt.Sprintf("statement reconcile: %d discrepancies", len(rep.Items))
			if pub != nil {
				msg += " (found before publishing); " + detail
			}
			err = &exitError{code: exitFound, err: errors.New(msg)}
		}
		return finish(detail, err)
	}
}

// publishSigningKeys reads the statement keys --publish-missing signs
// with: without PAYCB_STATEMENT_KEY_FILE it refuses (exit 4), since the
// workers would dead-letter every event it publishes unauthenticated; a
// file that does not parse is a configuration error (exit 2). Neither
// error shows a secret.
func publishSigningKeys(env *environment) (statementauth.Keys, error) {
	path := env.cfg.Statement.KeyFile
	if path == "" {
		return statementauth.Keys{}, &exitError{code: exitRefused, err: errors.New("statement reconcile --publish-missing refused: no statement key to sign the events with, " +
			"and the workers dead-letter an unsigned statement event unauthenticated: set PAYCB_STATEMENT_KEY_FILE (statement.key_file) " +
			"to the key file the workers verify with (lines KEY_ID=SECRET, the current key first)")}
	}
	keys, err := statementauth.Load(path)
	if err != nil {
		return statementauth.Keys{}, usagef("statement reconcile --publish-missing: statement.key_file (PAYCB_STATEMENT_KEY_FILE): %w", err)
	}
	return keys, nil
}

// maxAuditKeys bounds the keys named in the audit trail's detail.
const maxAuditKeys = 50

// publishDetail says what --publish-missing did, for the audit trail: the
// counts and the keys published (at most maxAuditKeys of them).
func publishDetail(p statementbook.PublishReport) string {
	detail := p.Summary()
	if len(p.Published) == 0 {
		return detail
	}
	keys := publishedKeys(p.Published)
	more := ""
	if len(keys) > maxAuditKeys {
		more = fmt.Sprintf(" and %d more", len(keys)-maxAuditKeys)
		keys = keys[:maxAuditKeys]
	}
	return detail + "; published " + strings.Join(keys, ", ") + more
}

// statementReconcileJSON is the --json report: the reconciliation, and
// with --publish-missing what was published.
type statementReconcileJSON struct {
	statementbook.StatementReport
	Publish *statementbook.PublishReport `json:"publish,omitempty"`
}

func publishedKeys(items []statementbook.PublishItem) []string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = it.Key
	}
	return keys
}

// printPublishMissing prints what --publish-missing did, one item a line.
func printPublishMissing(out *printer, p statementbook.PublishReport, remain bool) {
	out.println()
	out.printf("publish missing: published %d to %s, already published %d, claimed %d, needs the query API %d (statement sha1 %s)\n",
		len(p.Published), p.Topic, len(p.AlreadyPublished), len(p.Claimed), len(p.NeedsQuery), dash(p.StatementSHA1))
	if n := len(p.Published) + len(p.AlreadyPublished) + len(p.Claimed) + len(p.NeedsQuery); n > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "result\ttrade\trefund\tamount\tline\tdetail")
		for _, l := range []struct {
			name  string
			items []statementbook.PublishItem
		}{{"published", p.Published}, {"already_published", p.AlreadyPublished}, {"claimed", p.Claimed}, {"needs_query", p.NeedsQuery}} {
			for _, it := range l.items {
				detail := it.Reason
				if detail == "" && it.PublishedAt != nil {
					detail = fmt.Sprintf("%s at %s, fingerprint %s", it.Key, it.PublishedAt.UTC().Format(time.RFC3339), it.Fingerprint)
				}
				if it.Query != "" {
					detail += "; querier: " + it.Query
				}
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", l.name, it.TradeNo, dash(it.RefundNo), it.Amount, it.LineNo, detail)
			}
		}
		out.flush(tw)
	}
	if remain && len(p.Published) > 0 {
		out.println("the discrepancies remain until the worker has settled what was published: reconcile the day again then")
	}
}

func printStatementReconcile(out *printer, rep statementbook.StatementReport) {
	neighbours := "none imported"
	if len(rep.Neighbours) > 0 {
		neighbours = strings.Join(rep.Neighbours, ", ")
	}
	out.printf("tenant %d %s statement of %s: %d lines, %d postings dated to the day; neighbouring days consulted: %s\n",
		rep.TenantID, rep.Channel, rep.Day, rep.Lines, rep.Postings, neighbours)
	out.printf("statement version %s (last file imported sha1 %s)\n", dash(rep.StatementVersion), dash(rep.StatementSHA1))
	out.printf("fees of the day: %s yuan (not a discrepancy)\n", rep.Fee)
	if rep.OK() {
		out.println("statement reconcile: no discrepancies")
		return
	}
	out.println()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "category\ttrade\tmerchant order\trefund\tstatement\tledger\tline\tdetail")
	for _, it := range rep.Items {
		line := "-"
		if it.LineNo > 0 {
			line = fmt.Sprint(it.LineNo)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Category, dash(it.TradeNo), dash(it.MerchantOrderNo), dash(it.RefundNo),
			fen(it.StatementAmount), fen(it.LedgerAmount), line, it.Message)
	}
	out.flush(tw)
}

// noStatementExit prints the report of a day without a statement and
// returns its exit: 3, for the day is not clean.
func noStatementExit(out *printer, rep statementbook.StatementReport, asJSON bool, ch channels.Channel, tenant int64, day string) error {
	if asJSON {
		out.json(statementReconcileJSON{StatementReport: rep})
	} else {
		printStatementReconcile(out, rep)
	}
	if out.err != nil {
		return out.err
	}
	return &exitError{code: exitFound, err: fmt.Errorf("statement reconcile: no_statement: no %s statement imported for tenant %d on %s, "+
		"and the day is not declared empty (consumer statement import, or consumer statement empty)", ch, tenant, day)}
}

// fen prints an amount in fen, or "-" for the side that has none.
func fen(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
