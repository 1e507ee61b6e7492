package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/ops"
)

func dlqCmd() command {
	return command{
		name:    "dlq",
		summary: "dead letters: list, redrive",
		description: `The dead-letter topic (PAYCB_KAFKA_DLQ_TOPIC): messages the worker could not
settle, with their original key and value and the reason in headers.`,
		verbs: []command{
			dlqListCmd(),
			dlqRedriveCmd(),
		},
	}
}

func dlqListCmd() command {
	return command{
		name:     "list",
		summary:  "dead letters by kind and time range, then the most recent",
		synopsis: "[--kind KIND] [--since TIME] [--until TIME] [--recent N]",
		description: `Reads the dead-letter topic (never creating it) and prints the count per
kind with the first and last time, then the most recent dead letters.`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: an unknown --kind, a malformed time, a negative --recent"},
		},
		setup: dlqListCommand,
	}
}

func dlqRedriveCmd() command {
	return command{
		name:     "redrive",
		summary:  "re-publish dead letters' original key and value to the input topic",
		synopsis: "--kind KIND [--since TIME] [--until TIME] [--dry-run]",
		description: `Publishes the selected dead letters' original key and value to the input
topic, for the workers to handle again (e.g. no_key after configuring the
missing APIv3 key). A dead letter whose value was omitted for its size is
refused. --dry-run counts and publishes nothing. A redrive (not a dry run)
is recorded in the audit trail: a log line, and an ss_operator_audit row
when PAYCB_DB_DSN is set (without it the log line is the only record).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: --kind missing or unknown, a malformed time"},
			{exitRefused, "some dead letters were refused (value omitted); the others were published"},
		},
		setup: dlqRedriveCommand,
	}
}

// dlqFilterFlags registers --kind, --since and --until.
func dlqFilterFlags(fs *flag.FlagSet, kindUsage string) func() (ops.DeadLetterFilter, error) {
	kind := fs.String("kind", "", kindUsage)
	since := fs.String("since", "", "only dead letters written at or after this RFC 3339 time")
	until := fs.String("until", "", "only dead letters written before this RFC 3339 time")
	return func() (ops.DeadLetterFilter, error) {
		f := ops.DeadLetterFilter{Kind: *kind}
		if f.Kind != "" && !knownKind(f.Kind) {
			return f, usagef("--kind %q is not a dead-letter kind (%s)", f.Kind, kindList())
		}
		var err error
		if f.Since, err = parseTime("since", *since); err != nil {
			return f, usagef("%w", err)
		}
		if f.Until, err = parseTime("until", *until); err != nil {
			return f, usagef("%w", err)
		}
		return f, nil
	}
}

// knownKind reports whether k is one of the contract's dead-letter kinds.
func knownKind(k string) bool {
	return slices.Contains(metrics.DeadLetterKinds, metrics.DeadLetterKind(k))
}

// kindList is the contract's dead-letter kinds, comma-separated.
func kindList() string {
	ks := make([]string, len(metrics.DeadLetterKinds))
	for i, k := range metrics.DeadLetterKinds {
		ks[i] = string(k)
	}
	return strings.Join(ks, ", ")
}

func dlqListCommand(fs *flag.FlagSet) runFunc {
	filter := dlqFilterFlags(fs, "only this kind (x-error-kind)")
	recent := fs.Int("recent", 20, "how many of the most recent dead letters to show")
	return func(ctx context.Context, env *environment, _ []string) error {
		f, err := filter()
		if err != nil {
			return err
		}
		if *recent < 0 {
			return usagef("--recent %d is negative", *recent)
		}
		k, err := opsKafka(ctx, env)
		if err != nil {
			return err
		}
		ds, err := ops.ReadDeadLetters(ctx, k, f)
		if err != nil {
			return err
		}
		out := newPrinter(env)
		out.printf("dead letters in %s: %d\n", k.DLQTopic, len(ds))
		if len(ds) == 0 {
			return out.err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "kind\tcount\tfirst\tlast")
		for _, s := range ops.SummarizeDeadLetters(ds) {
			_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.Kind, s.Count, s.First.UTC().Format(time.RFC3339), s.Last.UTC().Format(time.RFC3339))
		}
		out.flush(tw)
		if omitted := countOmitted(ds); omitted > 0 {
			out.printf("value omitted (too large for %s; not redrivable): %d\n", k.DLQTopic, omitted)
		}
		n := min(max(*recent, 0), len(ds))
		if n == 0 {
			return out.err
		}
		latest := append([]ops.DeadLetter(nil), ds...)
		sortByTime(latest)
		out.printf("\nmost recent %d:\n", n)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "time\tkind\tkey\tsource\tvalue\terror")
		for _, d := range latest[len(latest)-n:] {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Time.UTC().Format(time.RFC3339), d.Kind, oneLine(string(d.Key), 48), d.Source, valueColumn(d), oneLine(d.Error, 80))
		}
		out.flush(tw)
		return out.err
	}
}

// countOmitted counts the dead letters whose value was omitted.
func countOmitted(ds []ops.DeadLetter) int {
	n := 0
	for _, d := range ds {
		if d.ValueOmitted {
			n++
		}
	}
	return n
}

// valueColumn is the value's size in bytes, or says it was omitted and
// how large the original was.
func valueColumn(d ops.DeadLetter) string {
	switch {
	case !d.ValueOmitted:
		return strconv.Itoa(len(d.Value)) + " B"
	case d.OmittedBytes >= 0:
		return "OMITTED (" + strconv.FormatInt(d.OmittedBytes, 10) + " B)"
	default:
		return "OMITTED"
	}
}

func sortByTime(ds []ops.DeadLetter) {
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Time.Before(ds[j].Time) })
}

func dlqRedriveCommand(fs *flag.FlagSet) runFunc {
	filter := dlqFilterFlags(fs, "the kind to redrive (required), e.g. no_key after configuring the missing APIv3 key")
	dryRun := fs.Bool("dry-run", false, "count what would be redriven and publish nothing")
	return func(ctx context.Context, env *environment, _ []string) error {
		f, err := filter()
		if err != nil {
			return err
		}
		if f.Kind == "" {
			return usagef("dlq redrive: --kind is required (%s)", kindList())
		}
		k, err := opsKafka(ctx, env)
		if err != nil {
			return err
		}
		ds, err := ops.ReadDeadLetters(ctx, k, f)
		if err != nil {
			return err
		}
		out := newPrinter(env)
		out.printf("dead letters of kind %s selected: %d\n", f.Kind, len(ds))
		switch metrics.DeadLetterKind(f.Kind) {
		case metrics.KindConflict, metrics.KindOverRefund:
			out.printf("note: %s messages were claimed or judged by the claim store; redriven, they are duplicates or conflicts again\n", f.Kind)
		}
		ok, refused := ops.SplitRedrive(ds)
		for _, r := range refused {
			d := r.DeadLetter
			out.printf("refused %s/%d@%d (key %s): %v\n", k.DLQTopic, d.Partition, d.Offset, oneLine(string(d.Key), 48), r.Reason)
		}
		var refusal error
		if len(refused) > 0 {
			refusal = &exitError{code: exitRefused, err: fmt.Errorf("dlq redrive refused %d of %d dead letters: %w", len(refused), len(ds), ops.ErrValueOmitted)}
		}
		if *dryRun {
			out.println("dry run: nothing published")
			return cmp.Or(refusal, out.err)
		}
		db, closeDB := env.auditDB(ctx)
		defer closeDB()
		if len(ok) == 0 {
			out.println("nothing published")
		} else {
			if err := ops.Redrive(ctx, k, ok); err != nil {
				return env.audit(ctx, db, "", err)
			}
			env.logger.Info("dead letters redriven", "kind", f.Kind, "count", len(ok), "refused", len(refused), "to", k.Topic)
			out.printf("published %d messages to %s\n", len(ok), k.Topic)
		}
		detail := fmt.Sprintf("kind %s: %d selected, %d published to %s, %d refused", f.Kind, len(ds), len(ok), k.Topic, len(refused))
		return env.audit(ctx, db, detail, cmp.Or(refusal, out.err))
	}
}
