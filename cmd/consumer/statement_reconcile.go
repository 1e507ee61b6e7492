package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/ops"
)

func statementReconcileCmd() command {
	return command{
		name:     "reconcile",
		summary:  "reconcile one imported statement day against the ledger",
		synopsis: "--channel CH --tenant N --date YYYY-MM-DD [--json]",
		description: `Compares the statement imported for the tenant, channel and Beijing-time
day with the ledger's merchant_payable postings, dated by the channel's own
time of each event (read-only, safe while workers run), and lists:
  missing_in_ledger     the channel settled it, nothing is posted
  missing_in_statement  posted on the day, in neither the day's statement
                        nor an imported neighbouring day's
  amount_mismatch       both have it, with different amounts
  status_mismatch       the statement says the channel did not settle what
                        the ledger posted (a WeChat refund row PROCESSING or
                        FAIL: a snapshot, never updated; a REVOKED payment)
Payments match by trade number, WeChat refunds by refund number; Alipay
refunds compare as the day's per-trade totals, Shouqianba orders as
total_amount − net_amount against all refunds posted up to the day.
The day's fees are printed beside the result; they are not discrepancies.`,
		exits: []exitStatus{
			{exitFailure, "a runtime failure, or no statement imported for the day: nothing to reconcile"},
			{exitUsage, "a usage or configuration error: a flag missing or invalid, no DSN"},
			{exitFound, "discrepancies found"},
		},
		setup: statementReconcileCommand,
	}
}

func statementReconcileCommand(fs *flag.FlagSet) runFunc {
	channel := fs.String("channel", "", "WECHAT, ALIPAY or SQB (required)")
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	date := fs.String("date", "", "the statement's day, YYYY-MM-DD, Beijing time (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		ch, err := statementTarget("reconcile", *channel, *tenant, "--date", *date)
		if err != nil {
			return err
		}
		if _, err := time.Parse(time.DateOnly, *date); err != nil {
			return usagef("statement reconcile: --date %q is not YYYY-MM-DD", *date)
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		rep, err := ops.ReconcileStatement(ctx, db, *tenant, ch, *date)
		if errors.Is(err, ops.ErrNoStatement) {
			return fmt.Errorf("statement reconcile: nothing to reconcile: no %s statement imported for tenant %d on %s (consumer statement import)", ch, *tenant, *date)
		}
		if err != nil {
			return err
		}
		out := newPrinter(env)
		if *asJSON {
			out.json(rep)
		} else {
			printStatementReconcile(out, rep)
		}
		if out.err != nil {
			return out.err
		}
		if !rep.OK() {
			return &exitError{code: exitFound, err: fmt.Errorf("statement reconcile: %d discrepancies", len(rep.Items))}
		}
		return nil
	}
}

func printStatementReconcile(out *printer, rep ops.StatementReport) {
	neighbours := "none imported"
	if len(rep.Neighbours) > 0 {
		neighbours = strings.Join(rep.Neighbours, ", ")
	}
	out.printf("tenant %d %s statement of %s: %d lines, %d postings dated to the day; neighbouring days consulted: %s\n",
		rep.TenantID, rep.Channel, rep.Day, rep.Lines, rep.Postings, neighbours)
	out.printf("fees of the day: %s yuan (not a discrepancy)\n", rep.Fee)
	if rep.OK() {
		out.println("statement reconcile: no discrepancies")
		return
	}
	out.println()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "category\ttrade\trefund\tstatement\tledger\tline\tdetail")
	for _, it := range rep.Items {
		line := "-"
		if it.LineNo > 0 {
			line = fmt.Sprint(it.LineNo)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Category, dash(it.TradeNo), dash(it.RefundNo),
			fen(it.StatementAmount), fen(it.LedgerAmount), line, it.Message)
	}
	out.flush(tw)
}

// fen prints an amount in fen, or "-" for the side that has none.
func fen(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
