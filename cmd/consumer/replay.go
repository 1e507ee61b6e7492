package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/paycallback/paycallback/internal/ops"
)

func replayCommand(fs *flag.FlagSet) runFunc {
	toDatetime := fs.String("to-datetime", "", "replay from the first message at or after this RFC 3339 time")
	toEarliest := fs.Bool("to-earliest", false, "replay from each partition's first retained message")
	toOffset := fs.String("to-offset", "", "replay from these offsets: P:O,P:O,... (partitions not listed keep theirs)")
	dryRun := fs.Bool("dry-run", false, "print the plan and commit nothing")
	return func(ctx context.Context, env *environment, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("replay: unexpected arguments %q", args)
		}
		var t ops.ReplayTarget
		var err error
		t.Earliest = *toEarliest
		if t.At, err = parseTime("to-datetime", *toDatetime); err != nil {
			return err
		}
		if *toOffset != "" {
			if t.Offsets, err = ops.ParseOffsets(*toOffset); err != nil {
				return err
			}
		}
		k, err := opsKafka(ctx, env)
		if err != nil {
			return err
		}
		plan, err := ops.PlanReplay(ctx, k, t)
		if err != nil {
			if errors.Is(err, ops.ErrGroupActive) {
				return &exitError{code: 4, err: fmt.Errorf("replay refused: %w", err)}
			}
			return fmt.Errorf("replay: %w", err)
		}
		out := newPrinter(env)
		printReplayPlan(out, k, t, plan)
		if *dryRun {
			out.println("dry run: nothing committed")
			return out.err
		}
		if err := ops.ApplyReplay(ctx, k, plan); err != nil {
			if errors.Is(err, ops.ErrGroupActive) {
				return &exitError{code: 4, err: fmt.Errorf("replay refused: %w", err)}
			}
			return fmt.Errorf("replay: %w", err)
		}
		env.logger.Info("consumer group offsets reset", "group", plan.Group, "topic", plan.Topic,
			"partitions", len(plan.Partitions), "replay", plan.TotalReplay(), "skip", plan.TotalSkip())
		out.println("committed: start the workers to replay")
		return out.err
	}
}

func printReplayPlan(out *printer, k ops.Kafka, t ops.ReplayTarget, plan ops.ReplayPlan) {
	out.printf("group %s on topic %s\n", plan.Group, plan.Topic)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "partition\tcurrent\ttarget\tfirst\tend\treplay\tskip\t")
	for _, r := range plan.Partitions {
		cur := fmt.Sprint(r.Current)
		if r.Current < 0 {
			cur = "none"
		}
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t\n", r.Partition, cur, r.Target, r.First, r.End, r.Replay(), r.Skip())
	}
	out.flush(tw)
	out.printf("messages to replay: %d", plan.TotalReplay())
	if s := plan.TotalSkip(); s > 0 {
		out.printf("; WARNING: %d messages will be skipped (moving forward)", s)
	}
	out.println()
	out.println("equivalent:")
	for line := range strings.SplitSeq(plan.KafkaCommand(k.Brokers, t), "\n") {
		out.printf("  %s\n", line)
	}
}
