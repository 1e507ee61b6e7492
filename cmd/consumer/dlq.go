package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/metrics"
)

func dlqCmd() command {
	return command{
		name:    "dlq",
		summary: "dead letters: list, show, redrive, close",
		description: `The dead-letter topic (PAYCB_KAFKA_DLQ_TOPIC): messages the worker could not
settle, with their original key and value and the reason in headers.`,
		verbs: []command{
			dlqListCmd(),
			dlqShowCmd(),
			dlqRedriveCmd(),
			dlqCloseCmd(),
		},
	}
}

func dlqListCmd() command {
	return command{
		name:     "list",
		summary:  "dead letters by kind and time range, open or resolved, then the most recent",
		synopsis: "[--kind KIND] [--since TIME] [--until TIME] [--recent N] [--json]",
		description: `Lists every dead letter: those the dead-letter topic holds (read, never
creating the topic) and those ss_dead_letter records whose message the topic
no longer holds (retention: "body lost", listed from the row). Prints, per
kind, the count, how many are open, resolved, closed and redriven, how many
lost their body, the age of the oldest open one, the first and last time;
then the most recent dead letters with their id and status. Every dead
letter has a stable id: its ss_dead_letter row id (e.g. 37), or, for one
without a row, p<PARTITION>-<OFFSET> (e.g. p0-12); dlq show, close and
redrive take it as --id. A dead letter is resolved when a claim with the
same key and fingerprint settled POSTED or NO_MONEY after it was written
(e.g. redriven once its cause was fixed), redriven when its redrive failed
again into a later dead letter (which takes its place), closed when an
operator closed it (dlq close), open otherwise: a conflict or an
over_refund stays open until closed. The key and fingerprint come from its
ss_dead_letter row or, failing that, from decoding it with the configured
keys. Rows, ids and statuses need PAYCB_DB_DSN; without it the topic alone
is listed, with p ids and no statuses.`,
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
		synopsis: "--id ID | --at P:O | [--kind KIND] [--since TIME] [--until TIME] [--dry-run]",
		description: `Publishes the selected dead letters' original key and value to the input
topic, for the workers to handle again (e.g. no_key after configuring the
missing APIv3 key), each with x-redriven-from naming its dead letter. Select
one dead letter by its id (--id, from dlq list) or its position (--at), or
by kind, time range or both (at least one of --kind, --since, --until). A
dead letter whose value was omitted for its size, or whose body the topic no
longer holds, is refused. With PAYCB_DB_DSN, each dead letter's position is
recorded in its ss_dead_letter row first, so that a redrive that fails again
supersedes it (shown redriven) instead of adding a second open dead letter. --dry-run counts and publishes nothing. A redrive (not a dry run)
is recorded in the audit trail: a log line, and an ss_operator_audit row
when PAYCB_DB_DSN is set (without it the log line is the only record).`,
		exits: []exitStatus{
			{exitUsage, "a usage or configuration error: no selection, --id or --at with another selection, --id or --at naming no dead letter, an unknown --kind, a malformed time"},
			{exitRefused, "some dead letters were refused (value omitted, or body lost); the others were published"},
		},
		setup: dlqRedriveCommand,
	}
}

// dlqFilterFlags registers --kind, --since and --until.
func dlqFilterFlags(fs *flag.FlagSet, kindUsage string) func() (deadletters.Filter, error) {
	kind := fs.String("kind", "", kindUsage)
	since := fs.String("since", "", "only dead letters written at or after this RFC 3339 time")
	until := fs.String("until", "", "only dead letters written before this RFC 3339 time")
	return func() (deadletters.Filter, error) {
		f := deadletters.Filter{Kind: *kind}
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
	asJSON := fs.Bool("json", false, "print the summary and every selected dead letter as JSON")
	return func(ctx context.Context, env *environment, _ []string) error {
		f, err := filter()
		if err != nil {
			return err
		}
		if *recent < 0 {
			return usagef("--recent %d is negative", *recent)
		}
		k, err := dlqKafka(ctx, env)
		if err != nil {
			return err
		}
		states, known, err := listLetters(ctx, env, k, f)
		if err != nil {
			return err
		}
		out := newPrinter(env)
		if *asJSON {
			return printDeadLettersJSON(out, k, states, known, time.Now())
		}
		out.printf("dead letters in %s: %d\n", k.DLQTopic, len(states))
		if len(states) == 0 {
			return out.err
		}
		if !known {
			out.println("open or resolved: not known without PAYCB_DB_DSN (nor the dead letters the topic no longer holds)")
		}
		printDeadLetterSummary(out, states, known, time.Now())
		omitted, lost := 0, 0
		for _, st := range states {
			if st.Message.ValueOmitted {
				omitted++
			}
			if st.Message.BodyLost {
				lost++
			}
		}
		if omitted > 0 {
			out.printf("value omitted (too large for %s; not redrivable): %d\n", k.DLQTopic, omitted)
		}
		if lost > 0 {
			out.printf("body lost (no longer in %s, listed from ss_dead_letter; not redrivable, closable by id): %d\n", k.DLQTopic, lost)
		}
		n := min(max(*recent, 0), len(states))
		if n == 0 {
			return out.err
		}
		out.printf("\nmost recent %d:\n", n)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "time\tid\tat\tkind\tstatus\tkey\tsource\tvalue\terror")
		for _, st := range states[len(states)-n:] {
			d := st.Message
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.WrittenAt().UTC().Format(time.RFC3339), st.ID, cmp.Or(atOf(d), "-"),
				oneLine(d.Kind, 32), statusOf(st, known), oneLine(string(d.Key), 48), oneLine(d.Source, 64), valueColumn(d), oneLine(d.Error, 80))
		}
		out.flush(tw)
		return out.err
	}
}

// valueColumn is the value's size in bytes, or says it was omitted and
// how large the original was, or that the topic lost it.
func valueColumn(d deadletters.Message) string {
	switch {
	case d.BodyLost:
		return "LOST"
	case !d.ValueOmitted:
		return strconv.Itoa(len(d.Value)) + " B"
	case d.OmittedBytes >= 0:
		return "OMITTED (" + strconv.FormatInt(d.OmittedBytes, 10) + " B)"
	default:
		return "OMITTED"
	}
}

// redriveSelection describes what dlq redrive selected.
func redriveSelection(f deadletters.Filter, one string) string {
	if one != "" {
		return one
	}
	var parts []string
	if f.Kind != "" {
		parts = append(parts, "kind "+f.Kind)
	}
	if !f.Since.IsZero() {
		parts = append(parts, "since "+f.Since.Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		parts = append(parts, "until "+f.Until.Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}

func dlqRedriveCommand(fs *flag.FlagSet) runFunc {
	filter := dlqFilterFlags(fs, "the kind to redrive, e.g. no_key after configuring the missing APIv3 key")
	one := letterFlags(fs, "redrive only this dead letter")
	dryRun := fs.Bool("dry-run", false, "count what would be redriven and publish nothing")
	return func(ctx context.Context, env *environment, _ []string) error {
		f, err := filter()
		if err != nil {
			return err
		}
		ref, byOne, what, err := one()
		if err != nil {
			return err
		}
		ranged := f.Kind != "" || !f.Since.IsZero() || !f.Until.IsZero()
		switch {
		case byOne && ranged:
			return usagef("dlq redrive: --id or --at selects one dead letter; it takes no --kind, --since or --until")
		case !byOne && !ranged:
			return usagef("dlq redrive: --kind is required (%s), or --since/--until for a time range, or --id ID or --at PARTITION:OFFSET for one dead letter", kindList())
		}
		k, err := dlqKafka(ctx, env)
		if err != nil {
			return err
		}
		db, closeDB := env.auditDB(ctx)
		defer closeDB()
		var ds []deadletters.Message
		if byOne {
			st, err := findLetter(ctx, env, db, k, ref, what)
			if err != nil {
				return err
			}
			ds = []deadletters.Message{st.Message}
		} else if ds, err = deadletters.ReadTopic(ctx, k, f); err != nil {
			return err
		}
		out := newPrinter(env)
		selection := redriveSelection(f, what)
		out.printf("dead letters selected: %d (%s)\n", len(ds), selection)
		judged := map[string]bool{}
		for _, d := range ds {
			switch metrics.DeadLetterKind(d.Kind) {
			case metrics.KindConflict, metrics.KindOverRefund:
				if !judged[d.Kind] {
					judged[d.Kind] = true
					out.printf("note: %s messages were claimed or judged by the claim store; redriven, they are duplicates or conflicts again\n", d.Kind)
				}
			}
		}
		ok, refused := deadletters.SplitRedrive(ds)
		for _, r := range refused {
			d := r.Message
			name := d.Position(k.DLQTopic)
			if d.BodyLost {
				name = what
			}
			out.printf("refused %s (key %s): %v\n", name, oneLine(string(d.Key), 48), r.Reason)
		}
		var refusal error
		if len(refused) > 0 {
			refusal = &exitError{code: exitRefused, err: fmt.Errorf("dlq redrive refused %d of %d dead letters: %w", len(refused), len(ds), refusedCause(refused))}
		}
		if *dryRun {
			out.println("dry run: nothing published")
			return cmp.Or(refusal, out.err)
		}
		if len(ok) == 0 {
			out.println("nothing published")
		} else {
			if db != nil {
				// Before publishing: a redrive that fails again finds the
				// dead letter it came from by its recorded position.
				if err := deadletters.NoteRedriven(ctx, db, operatorDecoder(env), ok); err != nil {
					return env.audit(ctx, db, "", err)
				}
			}
			if err := deadletters.Redrive(ctx, k, ok); err != nil {
				return env.audit(ctx, db, "", err)
			}
			env.logger.Info("dead letters redriven", "selection", selection, "count", len(ok), "refused", len(refused), "to", k.Topic)
			out.printf("published %d messages to %s\n", len(ok), k.Topic)
		}
		detail := fmt.Sprintf("%s: %d selected, %d published to %s, %d refused", selection, len(ds), len(ok), k.Topic, len(refused))
		return env.audit(ctx, db, detail, cmp.Or(refusal, out.err))
	}
}

// refusedCause is what the refusals have in common: ErrBodyLost when one
// lost its body, else ErrValueOmitted.
func refusedCause(refused []deadletters.Refusal) error {
	for _, r := range refused {
		if errors.Is(r.Reason, deadletters.ErrBodyLost) {
			return deadletters.ErrBodyLost
		}
	}
	return deadletters.ErrValueOmitted
}
