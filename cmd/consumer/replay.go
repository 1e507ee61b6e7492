package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ops"
)

func replayCmd() command {
	return command{
		name:     "replay",
		summary:  "reset the stopped group's offsets to replay history (--dry-run to preview)",
		synopsis: "(--to-earliest | --to-datetime TIME | --to-offset P:O,...) [--dry-run]",
		description: `Moves the consumer group's committed offsets on the input topic back (or
forward) so that the workers, once started, consume again from there. The
group must have no members: stop every worker first. Prints the plan per
partition and the equivalent kafka-consumer-groups.sh command; --dry-run
stops there. Give exactly one target.

An applied replay is recorded in the audit trail: a log line, and a row in
ss_operator_audit when PAYCB_DB_DSN is set (replay itself needs no database;
without a DSN the log line is the only record, and the command says so).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: no target or more than one, a malformed time or offset list, an unknown partition or an offset outside the retained range"},
			{exitRefused, "refused as unsafe: the group has live members"},
		},
		setup: replayCommand,
	}
}

func replayCommand(fs *flag.FlagSet) runFunc {
	toDatetime := fs.String("to-datetime", "", "replay from the first message at or after this RFC 3339 time")
	toEarliest := fs.Bool("to-earliest", false, "replay from each partition's first retained message")
	toOffset := fs.String("to-offset", "", "replay from these offsets: P:O,P:O,... (partitions not listed keep theirs)")
	dryRun := fs.Bool("dry-run", false, "print the plan and commit nothing")
	return func(ctx context.Context, env *environment, _ []string) error {
		var t ops.ReplayTarget
		var err error
		t.Earliest = *toEarliest
		if t.At, err = parseTime("to-datetime", *toDatetime); err != nil {
			return usagef("replay: %w", err)
		}
		if *toOffset != "" {
			if t.Offsets, err = ops.ParseOffsets(*toOffset); err != nil {
				return usagef("replay: --to-offset: %w", err)
			}
		}
		if n := countTrue(t.Earliest, !t.At.IsZero(), *toOffset != ""); n != 1 {
			return usagef("replay: give exactly one of --to-earliest, --to-datetime, --to-offset (got %d)", n)
		}
		k, err := opsKafka(ctx, env)
		if err != nil {
			return err
		}
		plan, err := ops.PlanReplay(ctx, k, t)
		if err != nil {
			return replayError(err)
		}
		out := newPrinter(env)
		printReplayPlan(out, k, t, plan, false)
		if *dryRun {
			out.println("dry run: nothing committed")
			return out.err
		}
		db, closeDB := env.auditDB(ctx)
		defer closeDB()
		err = ops.ApplyReplay(ctx, k, plan)
		detail := fmt.Sprintf("group %s topic %s: %d partitions reset, %d messages to replay, %d skipped",
			plan.Group, plan.Topic, len(plan.Partitions), plan.TotalReplay(), plan.TotalSkip())
		if err != nil {
			return env.audit(ctx, db, "", replayError(err))
		}
		env.logger.Info("consumer group offsets reset", "group", plan.Group, "topic", plan.Topic,
			"partitions", len(plan.Partitions), "replay", plan.TotalReplay(), "skip", plan.TotalSkip())
		out.println("committed: start the workers to replay")
		printKafkaCommand(out, k, t, plan, true)
		return env.audit(ctx, db, detail, out.err)
	}
}

// replayError gives a planning or applying error its exit status.
func replayError(err error) error {
	switch {
	case errors.Is(err, ops.ErrGroupActive):
		return &exitError{code: exitRefused, err: fmt.Errorf("replay refused: %w", err)}
	case errors.Is(err, ops.ErrInvalidTarget):
		return usagef("replay: %w", err)
	default:
		return fmt.Errorf("replay: %w", err)
	}
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// printReplayPlan prints the plan per partition and, for a preview
// (applied false), the equivalent command.
func printReplayPlan(out *printer, k kafkaops.Kafka, t ops.ReplayTarget, plan ops.ReplayPlan, applied bool) {
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
	if !applied {
		printKafkaCommand(out, k, t, plan, false)
	}
}

// printKafkaCommand prints the kafka-consumer-groups.sh equivalent of the
// plan: --dry-run for a preview, --execute for the reset that was applied;
// with TLS or SASL configured it names a client properties file and says
// what it holds.
func printKafkaCommand(out *printer, k kafkaops.Kafka, t ops.ReplayTarget, plan ops.ReplayPlan, applied bool) {
	o := ops.KafkaCommandOptions{Execute: applied}
	if k.Conn != nil && k.Conn.Secured() {
		o.CommandConfig = "client.properties"
	}
	if applied {
		out.println("equivalent (what was applied):")
	} else {
		out.println("equivalent:")
	}
	for line := range strings.SplitSeq(plan.KafkaCommand(k.Brokers, t, o), "\n") {
		out.printf("  %s\n", line)
	}
	if o.CommandConfig != "" {
		out.println("  (client.properties: security.protocol and the ssl.*/sasl.* properties matching PAYCB_KAFKA_TLS_* and PAYCB_KAFKA_SASL_*)")
	}
}
