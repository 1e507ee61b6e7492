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
		synopsis: "[--older-than DURATION] [--settle]",
		description: `Lists the claims that have been ACQUIRED for longer than --older-than: a
worker claimed the event and never settled it. With --settle, settles each
from its stored event through the fence (a claim another worker settled
meanwhile is reported as already settled). Safe while workers run.
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
		if !*settle {
			printOrphans(out, orphans, after, false)
			return out.err
		}
		svc, err := settlement.New(db, claims, env.logger, nil)
		if err != nil {
			return env.audit(ctx, db, "", fmt.Errorf("orphans: %w", err))
		}
		svc.SetRefundsPreregistered(env.cfg.Worker.RefundsPreregistered)
		failed := ops.SettleOrphans(ctx, svc, orphans)
		printOrphans(out, orphans, after, true)
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
		line := fmt.Sprintf("%d\t%s\t%s\t%d\t%s\t%s", r.TenantID, r.Key, o.Age.Round(time.Second), r.Attempts, src, oneLine(r.LastError, 60))
		if settled {
			switch {
			case o.Err != nil:
				line += "\tFAILED: " + oneLine(o.Err.Error(), 80)
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
}

// oneLine shortens s to n runes on one line.
func oneLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' || c == '\r' || c == '\t' {
			r[i] = ' '
		}
	}
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if len(r) == 0 {
		return "-"
	}
	return string(r)
}
