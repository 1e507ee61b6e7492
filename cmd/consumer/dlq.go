package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/ops"
)

func dlqCommand(*flag.FlagSet) runFunc {
	subs := []subcommand{
		{"list", "dead letters by kind and time range, then the most recent", dlqListCommand},
		{"redrive", "re-publish dead letters' original key and value to the input topic", dlqRedriveCommand},
	}
	return func(ctx context.Context, env *environment, args []string) error {
		return dispatch(ctx, env, "dlq", subs, args)
	}
}

// dlqFilterFlags registers --kind, --since and --until.
func dlqFilterFlags(fs *flag.FlagSet, kindUsage string) func() (ops.DeadLetterFilter, error) {
	kind := fs.String("kind", "", kindUsage)
	since := fs.String("since", "", "only dead letters written at or after this RFC 3339 time")
	until := fs.String("until", "", "only dead letters written before this RFC 3339 time")
	return func() (ops.DeadLetterFilter, error) {
		f := ops.DeadLetterFilter{Kind: *kind}
		var err error
		if f.Since, err = parseTime("since", *since); err != nil {
			return f, err
		}
		f.Until, err = parseTime("until", *until)
		return f, err
	}
}

func dlqListCommand(fs *flag.FlagSet) runFunc {
	filter := dlqFilterFlags(fs, "only this kind (x-error-kind)")
	recent := fs.Int("recent", 20, "how many of the most recent dead letters to show")
	return func(ctx context.Context, env *environment, _ []string) error {
		f, err := filter()
		if err != nil {
			return err
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
			_, _ = fmt.Fprintln(env.stderr, "consumer dlq redrive: --kind is required")
			return errUsage
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
		if *dryRun || len(ok) == 0 {
			out.println("nothing published")
		} else {
			if err := ops.Redrive(ctx, k, ok); err != nil {
				return err
			}
			env.logger.Info("dead letters redriven", "kind", f.Kind, "count", len(ok), "refused", len(refused), "to", k.Topic)
			out.printf("published %d messages to %s\n", len(ok), k.Topic)
		}
		if len(refused) > 0 {
			return &exitError{code: 4, err: fmt.Errorf("dlq redrive refused %d of %d dead letters: %w", len(refused), len(ds), ops.ErrValueOmitted)}
		}
		return out.err
	}
}
