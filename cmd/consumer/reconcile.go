package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/ops"
)

func reconcileCmd() command {
	return command{
		name:     "reconcile",
		summary:  "check claims, ledger, orders and refund registrations; non-zero exit on discrepancies",
		synopsis: "[--from TIME] [--to TIME] [--pending-after DURATION] [--open-after DURATION] [--json]",
		description: `Reads the claims, ledger, orders and refund registrations (read-only, safe
while workers run) and reports every discrepancy between them, per check.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a malformed time, a negative duration, no DSN"},
			{exitFound, "discrepancies found"},
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
	return func(ctx context.Context, env *environment, _ []string) error {
		if *pending < 0 || *open < 0 {
			return usagef("reconcile: --pending-after and --open-after must not be negative")
		}
		o := ops.ReconcileOptions{PendingAfter: *pending, OpenAfter: *open}
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
		rep, err := ops.Reconcile(ctx, db, o)
		if err != nil {
			return err
		}
		out := newPrinter(env)
		if *asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return fmt.Errorf("reconcile: write report: %w", err)
			}
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

func printReconcile(out *printer, rep ops.ReconcileReport) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "check\texamined\tdiscrepancies")
	counts := rep.Counts()
	for _, c := range ops.Checks {
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%d\n", c, rep.Examined[c], counts[c])
	}
	out.flush(tw)
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

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
