package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// maxEmptyDays bounds a --from/--to range: WeChat keeps bills for three
// months, and a longer range is a typing mistake.
const maxEmptyDays = 93

func statementEmptyCmd() command {
	return command{
		name:     "empty",
		summary:  "record the channel's answer that a day had no statement",
		synopsis: "--channel CH --tenant N (--date YYYY-MM-DD | --from YYYY-MM-DD --to YYYY-MM-DD) --note TEXT",
		description: `Records, for the tenant and channel, that each Beijing-time day given has
no statement because the channel says so: WeChat's bill API answered
NO_STATEMENT_EXIST (v2: No Bill Exist, 20002), Alipay's
EMPTY_DATA_WITH_BILL_FILE, or the tenant had no Shouqianba order. --note
says which answer, when and by whom it was seen (required). Without it a
day with nothing imported is no_statement, never clean: a failed download
and a lost day of callbacks look the same.

Reconcile then compares the day with an empty statement: any posting dated
to it is missing_in_statement. A day that already holds statement lines is
refused, and nothing is recorded for any day; a day already holding an
empty statement is left as it is. A statement imported for the day later is
stored as for any day. Days that have not ended are refused. Recorded in
the audit trail with the note.`,
		exits: []exitStatus{
			{exitFailure, "a runtime failure, or a day that already holds statement lines (nothing is recorded)"},
			{exitUsage, "a usage or configuration error: a flag missing or invalid, a day not ended, a range over 93 days, no DSN"},
		},
		setup: statementEmptyCommand,
	}
}

func statementEmptyCommand(fs *flag.FlagSet) runFunc {
	channel := fs.String("channel", "", channels.CodeList()+" (required)")
	tenant := fs.Int64("tenant", 0, "tenant ID (required)")
	date := fs.String("date", "", "the day, YYYY-MM-DD, Beijing time")
	from := fs.String("from", "", "the first day of a range, YYYY-MM-DD, Beijing time")
	to := fs.String("to", "", "the last day of a range (included)")
	note := fs.String("note", "", "the channel's answer, e.g. \"NO_STATEMENT_EXIST from GET /v3/bill/tradebill at 10:05\" (required)")
	return func(ctx context.Context, env *environment, _ []string) error {
		ch, err := statementTarget("empty", *channel, *tenant, "--note", strings.TrimSpace(*note))
		if err != nil {
			return err
		}
		days, err := emptyDays(*date, *from, *to, time.Now())
		if err != nil {
			return err
		}
		db, err := openDB(ctx, env)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		res, err := statementbook.DeclareEmptyStatements(ctx, db, *tenant, ch, days, time.Now())
		if err != nil {
			if errors.Is(err, statementbook.ErrStatementHeld) {
				err = fmt.Errorf("statement empty: %w: reconcile the day against its statement instead", err)
			}
			return env.audit(ctx, db, "", err)
		}
		out := newPrinter(env)
		parts := make([]string, len(res))
		for i, d := range res {
			parts[i] = d.Day + " " + d.Status
			out.printf("tenant %d %s %s: %s\n", *tenant, ch, d.Day, d.Status)
		}
		return env.audit(ctx, db, fmt.Sprintf("tenant %d %s: %s; note: %s", *tenant, ch, strings.Join(parts, ", "), *note), out.err)
	}
}

// emptyDays checks --date or --from/--to and lists the days, each ended
// before now (Beijing time); the errors are usage errors.
func emptyDays(date, from, to string, now time.Time) ([]string, error) {
	switch {
	case date != "" && (from != "" || to != ""):
		return nil, usagef("statement empty: --date or --from/--to, not both")
	case date != "":
		from, to = date, date
	case from == "" || to == "":
		return nil, usagef("statement empty: required: --date, or --from and --to")
	}
	first, err := time.ParseInLocation(time.DateOnly, from, statements.Beijing)
	if err != nil {
		return nil, usagef("statement empty: %q is not YYYY-MM-DD", from)
	}
	last, err := time.ParseInLocation(time.DateOnly, to, statements.Beijing)
	if err != nil {
		return nil, usagef("statement empty: %q is not YYYY-MM-DD", to)
	}
	if last.Before(first) {
		return nil, usagef("statement empty: --to %s is before --from %s", to, from)
	}
	if end := last.AddDate(0, 0, 1); end.After(now) {
		return nil, usagef("statement empty: %s has not ended (Beijing time): its statement may still come", to)
	}
	var days []string
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		if len(days) == maxEmptyDays {
			return nil, usagef("statement empty: %s to %s is more than %d days", from, to, maxEmptyDays)
		}
		days = append(days, d.Format(time.DateOnly))
	}
	return days, nil
}
