package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/pkg/settlement"
)

func reconcileCmd() command {
	return command{
		name:     "reconcile",
		summary:  "check claims, ledger, orders and refund registrations; non-zero exit on discrepancies",
		synopsis: "[--checks A,B | --skip C,D] [--list-checks] [--from TIME] [--to TIME] [--pending-after DURATION] [--open-after DURATION] [--json]",
		description: `Reads the claims, ledger, orders and refund registrations (read-only, safe
while workers run) and reports every discrepancy between them, per check.
--checks runs only the named checks, --skip leaves the named ones out;
--list-checks prints every check's name and what it reports. Unregistered
refunds (refund_unregistered) are checked only when
PAYCB_REFUNDS_PREREGISTERED is true, or when named in --checks. A refund
discrepancy an operator resolved (consumer refund resolve) is listed as
resolved, with the note, and does not count while it is found the same.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a malformed time, a negative duration, an unknown check, no DSN"},
			{exitFound, "discrepancies found (resolved ones aside)"},
		},
		setup: reconcileCommand,
	}
}

func reconcileCommand(fs *flag.FlagSet) runFunc {
	from := fs.String("from", "", "examine rows created at or after this RFC 3339 time (default: all)")
	to := fs.String("to", "", "examine rows created before this RFC 3339 time (default: all)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pending := fs.Duration("pending-after", 24*time.Hour, "report orders still PENDING_PAYMENT after this long")
	open := fs.Duration("open-after", 24*time.Hour, "report refund registrations open without a callback after this long")
	only := fs.String("checks", "", "run only these checks, comma-separated (see --list-checks)")
	skip := fs.String("skip", "", "leave these checks out, comma-separated")
	list := fs.Bool("list-checks", false, "print every check's name and what it reports, then exit")
	return func(ctx context.Context, env *environment, _ []string) error {
		if *pending < 0 || *open < 0 {
			return usagef("reconcile: --pending-after and --open-after must not be negative")
		}
		if *list {
			out := newPrinter(env)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			for _, c := range settlement.Checks {
				_, _ = fmt.Fprintf(tw, "%s\t%s\n", c, settlement.CheckSummaries[c])
			}
			out.flush(tw)
			return out.err
		}
		o := settlement.ReconcileOptions{
			PendingAfter: *pending, OpenAfter: *open, Checks: checkList(*only), Skip: checkList(*skip),
			RefundsPreregistered: env.cfg.Worker.RefundsPreregistered,
		}
		if _, _, err := settlement.SelectChecks(o); err != nil {
			return usagef("reconcile: %w", err)
		}
		var err error
		if o.From, err = parseTime("from", *from); err != nil {
			return usagef("reconcile: %w", err)
		}
		if o.To, err = parseTime("to", *to); err != nil {
			return usagef("reconcile: %w", err)
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		rep, err := settlement.Reconcile(ctx, db, o)
		if err != nil {
			return err
		}
		out := newPrinter(env)
		if *asJSON {
			out.json(rep)
		} else {
			printReconcile(out, rep)
		}
		if out.err != nil {
			return out.err
		}
		if !rep.OK() {
			return &exitError{code: 3, err: fmt.Errorf("reconcile: %d discrepancies", len(rep.Discrepancies))}
		}
		return nil
	}
}

func printReconcile(out *printer, rep settlement.ReconcileReport) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "check\texamined\tdiscrepancies")
	counts := rep.Counts()
	for _, c := range rep.Checks {
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%d\n", c, rep.Examined[c], counts[c])
	}
	for _, c := range settlement.Checks {
		if why, ok := rep.Skipped[c]; ok {
			_, _ = fmt.Fprintf(tw, "%s\tskipped: %s\t\n", c, why)
		}
	}
	out.flush(tw)
	printResolved(out, rep.Resolved)
	if rep.OK() {
		out.println("\nreconcile: no discrepancies")
		return
	}
	out.println()
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "check\ttenant\tchannel\ttrade\trefund\tkey\tdetail")
	for _, d := range rep.Discrepancies {
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.Check, d.TenantID, dash(d.Channel), dash(d.TradeNo), dash(d.RefundNo), dash(d.Key), d.Detail)
	}
	out.flush(tw)
}

// checkList splits a comma-separated list of check names, ignoring blanks.
func checkList(s string) []string {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printResolved lists the discrepancies found that an operator resolved.
func printResolved(out *printer, resolved []settlement.ResolvedDiscrepancy) {
	if len(resolved) == 0 {
		return
	}
	out.printf("\nresolved by an operator (%d, not discrepancies while found the same):\n", len(resolved))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "check\ttenant\tchannel\ttrade\trefund\tdetail\tresolved\tby\tnote")
	for _, d := range resolved {
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%q\n", d.Check, d.TenantID, dash(d.Channel), dash(d.TradeNo), dash(d.RefundNo),
			d.Detail, d.Resolution.ResolvedAt.Format(time.RFC3339), d.Resolution.ResolvedBy, d.Resolution.Note)
	}
	out.flush(tw)
}
