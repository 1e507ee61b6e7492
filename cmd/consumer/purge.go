package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/paycallback/paycallback/internal/ops"
)

func purgeCommand(fs *flag.FlagSet) runFunc {
	olderThan := fs.Duration("older-than", 0, "clear SETTLED claims older than this (required; at least the input topic's retention + --reconcile-window)")
	window := fs.Duration("reconcile-window", ops.DefaultReconcileWindow, "added to the input topic's retention to form the safety floor")
	dryRun := fs.Bool("dry-run", false, "count what would be cleared and change nothing")
	return func(ctx context.Context, env *environment, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("purge: unexpected arguments %q", args)
		}
		if *olderThan <= 0 {
			_, _ = fmt.Fprintln(env.stderr, "consumer purge: --older-than is required")
			return errUsage
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
			ReconcileWindow: *window, DryRun: *dryRun,
		})
		if errors.Is(err, ops.ErrBelowFloor) {
			return &exitError{code: 4, err: fmt.Errorf("purge refused: %w", err)}
		}
		if err != nil {
			return err
		}
		out := newPrinter(env)
		verb := "cleared"
		if *dryRun {
			verb = "would clear"
		}
		out.printf("floor %s (topic retention %s + window %s); cutoff %s\n%s event_json and last_error of %d SETTLED claims (rows are kept)\n",
			res.Floor, retention, *window, res.Cutoff.Format(time.RFC3339), verb, res.Rows)
		if !*dryRun {
			env.logger.Info("settled claims purged", "rows", res.Rows, "cutoff", res.Cutoff)
		}
		return out.err
	}
}
