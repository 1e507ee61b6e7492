package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/internal/ops"
)

func purgeCmd() command {
	return command{
		name:     "purge",
		summary:  "clear stored events of old SETTLED claims beyond the retention floor (rows are kept); delete old published settled events",
		synopsis: "--older-than DURATION [--reconcile-window DURATION] [--dry-run]",
		description: `Clears event_json and last_error of SETTLED claims older than --older-than;
the claim rows themselves are kept forever. Refuses a cutoff younger than
the floor: the input topic's retention (read from the broker) plus
--reconcile-window, so that a claim whose message can still be replayed keeps
its event. Also deletes the settled events (ss_settled_outbox) published and
settled longer ago than PAYCB_SETTLED_RETENTION (default 168h), which can
then no longer be republished; an unpublished one is never deleted.
--dry-run counts and changes nothing. A purge (not a dry run) is
recorded in the audit trail (a log line and an ss_operator_audit row).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: --older-than missing, zero or negative, a negative --reconcile-window, no DSN"},
			{exitRefused, "refused as unsafe: --older-than is below the floor"},
		},
		setup: purgeCommand,
	}
}

func purgeCommand(fs *flag.FlagSet) runFunc {
	olderThan := fs.Duration("older-than", 0, "clear SETTLED claims older than this (required; at least the input topic's retention + --reconcile-window)")
	window := fs.Duration("reconcile-window", ops.DefaultReconcileWindow, "added to the input topic's retention to form the safety floor")
	dryRun := fs.Bool("dry-run", false, "count what would be cleared and change nothing")
	return func(ctx context.Context, env *environment, _ []string) error {
		switch {
		case *olderThan < 0:
			return usagef("purge: --older-than %s is negative", *olderThan)
		case *olderThan == 0:
			return usagef("purge: --older-than is required")
		case *window < 0:
			return usagef("purge: --reconcile-window %s is negative", *window)
		}
		k, err := opsKafka(ctx, env)
		if err != nil {
			return err
		}
		retention, bounded, err := k.TopicRetention(ctx, k.Topic)
		if err != nil {
			return fmt.Errorf("purge: read the input topic's retention: %w", err)
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		res, err := ops.Purge(ctx, db, ops.PurgeOptions{
			OlderThan: *olderThan, Retention: retention, RetentionForever: !bounded,
			ReconcileWindow: *window, DryRun: *dryRun, SettledRetention: env.cfg.Settled.Retention,
		})
		if errors.Is(err, ops.ErrBelowFloor) {
			err = &exitError{code: exitRefused, err: fmt.Errorf("purge refused: %w", err)}
		}
		if err != nil {
			if *dryRun {
				return err
			}
			return env.audit(ctx, db, "", err)
		}
		out := newPrinter(env)
		verb := "cleared"
		if *dryRun {
			verb = "would clear"
		}
		out.printf("floor %s (topic retention %s + window %s); cutoff %s\n%s event_json and last_error of %d SETTLED claims (rows are kept)\n",
			res.Floor, retention, *window, res.Cutoff.Format(time.RFC3339), verb, res.Rows)
		verb = "deleted"
		if *dryRun {
			verb = "would delete"
		}
		out.printf("%s %d published settled events settled before %s (PAYCB_SETTLED_RETENTION %s)\n",
			verb, res.SettledRows, res.SettledCutoff.Format(time.RFC3339), env.cfg.Settled.Retention)
		if *dryRun {
			return out.err
		}
		env.logger.Info("settled claims purged", "rows", res.Rows, "cutoff", res.Cutoff,
			"settled_events_deleted", res.SettledRows, "settled_cutoff", res.SettledCutoff)
		return env.audit(ctx, db, fmt.Sprintf("cleared %d SETTLED claims older than %s (cutoff %s); deleted %d published settled events settled before %s",
			res.Rows, *olderThan, res.Cutoff.Format(time.RFC3339), res.SettledRows, res.SettledCutoff.Format(time.RFC3339)), out.err)
	}
}
