package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func orphansCmd() command {
	return command{
		name:     "orphans",
		summary:  "list claims stuck ACQUIRED; --settle settles them through the fence",
		synopsis: "[--older-than DURATION] [--settle] [--json]",
		description: `Lists the claims that have been ACQUIRED for longer than --older-than: a
worker claimed the event and never settled it. With --settle, settles each
from its stored event through the fence (a claim another worker settled
meanwhile is reported as already settled). Safe while workers run. A claim
that could not be settled is listed with its whole reason after the table;
--json prints the report with every reason in full.
--settle is recorded in the audit trail (a log line and an ss_operator_audit row).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: a negative --older-than, no DSN"},
			{exitFound, "--settle: some listed claims could not be settled"},
		},
		setup: orphansCommand,
	}
}

func orphansCommand(fs *flag.FlagSet) runFunc {
	olderThan := fs.Duration("older-than", 0, "list claims ACQUIRED for longer than this (default PAYCB_ORPHAN_AFTER)")
	settle := fs.Bool("settle", false, "settle each listed claim through the fence from its stored event")
	asJSON := fs.Bool("json", false, "print the report as JSON, every error and reason in full")
	return func(ctx context.Context, env *environment, _ []string) error {
		if *olderThan < 0 {
			return usagef("orphans: --older-than %s is negative", *olderThan)
		}
		after := *olderThan
		if after == 0 {
			after = env.cfg.Worker.OrphanAfter
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		claims := idempotent.NewStore(db)
		orphans, err := ops.ListOrphans(ctx, claims, after)
		if err != nil {
			return err
		}
		out := newPrinter(env)
		report := printOrphans
		if *asJSON {
			report = printOrphansJSON
		}
		if !*settle {
			report(out, orphans, after, false)
			return out.err
		}
		svc, err := settlement.New(db, claims, env.logger, nil)
		if err != nil {
			return env.audit(ctx, db, "", fmt.Errorf("orphans: %w", err))
		}
		svc.SetRefundsPreregistered(env.cfg.Worker.RefundsPreregistered)
		failed := ops.SettleOrphans(ctx, svc, orphans)
		report(out, orphans, after, true)
		detail := fmt.Sprintf("%d claims ACQUIRED longer than %s: %d settled, %d failed", len(orphans), after, len(orphans)-failed, failed)
		if failed > 0 {
			return env.audit(ctx, db, detail, &exitError{code: exitFound, err: fmt.Errorf("orphans: %d of %d claims not settled", failed, len(orphans))})
		}
		return env.audit(ctx, db, detail, out.err)
	}
}

func printOrphans(out *printer, orphans []ops.Orphan, after time.Duration, settled bool) {
	out.printf("claims ACQUIRED for longer than %s: %d\n", after, len(orphans))
	if len(orphans) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	head := "tenant\tkey\tage\tattempts\tsource\tlast error"
	if settled {
		head += "\tsettled"
	}
	_, _ = fmt.Fprintln(tw, head)
	for _, o := range orphans {
		r := o.Record
		src := r.Source.String()
		if r.Source.Topic == "" {
			src = "(none)"
		}
		line := fmt.Sprintf("%d\t%s\t%s\t%d\t%s\t%s", r.TenantID, printable(string(r.Key), false), o.Age.Round(time.Second), r.Attempts, src, oneLine(r.LastError, 60))
		if settled {
			switch {
			case o.Err != nil:
				line += "\tFAILED (reason below)"
			case o.Settled.FenceLost:
				line += "\talready settled (fence)"
			default:
				line += "\t" + string(o.Settled.Outcome)
				if o.Settled.Outcome == idempotent.OutcomeOverRefund {
					line += " (no dead letter written: find its message with `consumer reconcile`)"
				}
			}
		}
		_, _ = fmt.Fprintln(tw, line)
	}
	out.flush(tw)
	for _, o := range orphans {
		if o.Err != nil {
			out.printf("not settled: tenant %d %s: %s\n", o.Record.TenantID, o.Record.Key, o.Err.Error())
		}
	}
}

// orphanJSON is one orphan in `orphans --json`.
type orphanJSON struct {
	TenantID    int64   `json:"tenant_id"`
	Key         string  `json:"key"`
	AgeSeconds  float64 `json:"age_seconds"`
	Attempts    int     `json:"attempts"`
	Source      string  `json:"source,omitempty"`
	LastError   string  `json:"last_error,omitempty"`
	Outcome     string  `json:"outcome,omitempty"`
	FenceLost   bool    `json:"fence_lost,omitempty"`
	SettleError string  `json:"settle_error,omitempty"`
}

// printOrphansJSON prints the orphan report as one JSON object, every
// reason in full.
func printOrphansJSON(out *printer, orphans []ops.Orphan, after time.Duration, settled bool) {
	items := make([]orphanJSON, 0, len(orphans))
	for _, o := range orphans {
		r := o.Record
		item := orphanJSON{TenantID: r.TenantID, Key: string(r.Key), AgeSeconds: o.Age.Seconds(), Attempts: r.Attempts, LastError: r.LastError}
		if r.Source.Topic != "" {
			item.Source = r.Source.String()
		}
		switch {
		case o.Err != nil:
			item.SettleError = o.Err.Error()
		case o.Settled != nil:
			item.Outcome, item.FenceLost = string(o.Settled.Outcome), o.Settled.FenceLost
		}
		items = append(items, item)
	}
	out.json(struct {
		OlderThan string       `json:"older_than"`
		Settled   bool         `json:"settled"`
		Claims    []orphanJSON `json:"claims"`
	}{after.String(), settled, items})
}

// oneLine shortens s to n runes on one line, its control characters
// escaped (printable).
func oneLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' || c == '\r' || c == '\t' {
			r[i] = ' '
		}
	}
	if len(r) > n {
		return printable(string(r[:n-1]), false) + "…"
	}
	if len(r) == 0 {
		return "-"
	}
	return printable(string(r), false)
}
