package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
)

// listLetters is deadletters.List on the configured database; known is
// false (no statuses, the topic alone) when none is configured.
func listLetters(ctx context.Context, env *environment, k kafkaops.Kafka, f deadletters.Filter) (states []deadletters.State, known bool, err error) {
	if !env.cfg.DB.DSN.IsSet() {
		states, err = deadletters.List(ctx, k, nil, nil, f)
		return states, false, err
	}
	db, err := openDB(ctx, env)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = db.Close() }()
	states, err = deadletters.List(ctx, k, db, operatorDecoder(env), f)
	return states, true, err
}

// statusOf is a dead letter's status as `dlq list` shows it ("-" when not
// known).
func statusOf(st deadletters.State, known bool) string {
	switch {
	case !known:
		return "-"
	case st.Status == deadletters.StatusRedriven:
		return "redriven (to " + st.Successor + ")"
	case st.Status == deadletters.StatusDuplicate:
		return "duplicate (of " + st.Successor + ")"
	}
	return string(st.Status)
}

// printDeadLetterSummary prints one line per kind.
func printDeadLetterSummary(out *printer, states []deadletters.State, known bool, now time.Time) {
	count := func(n *int) string {
		if n == nil {
			return "-"
		}
		return strconv.Itoa(*n)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "kind\tcount\topen\tresolved\tclosed\toldest open\tfirst\tlast\tredriven\tbody lost")
	for _, s := range deadletters.SummarizeStates(states, known) {
		oldest := "-"
		if s.OldestOpen != nil {
			oldest = age(now.Sub(*s.OldestOpen))
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s.Kind, s.Count, count(s.Open), count(s.Resolved), count(s.Closed),
			oldest, s.First.Format(time.RFC3339), s.Last.Format(time.RFC3339), count(s.Redriven), s.BodyLost)
	}
	out.flush(tw)
}

// age formats d to the minute (to the second below a minute).
func age(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// listedJSON is one dead letter in `dlq list --json`.
type listedJSON struct {
	ID           string     `json:"id"`
	At           string     `json:"at,omitempty"`
	Position     string     `json:"position"`
	Time         time.Time  `json:"time"`
	Kind         string     `json:"kind"`
	Status       string     `json:"status,omitempty"`
	Key          string     `json:"key"`
	Source       string     `json:"source"`
	ValueBytes   int        `json:"value_bytes"`
	ValueOmitted bool       `json:"value_omitted"`
	BodyLost     bool       `json:"body_lost"`
	Error        string     `json:"error"`
	Recorded     bool       `json:"recorded"`
	RedrivenFrom string     `json:"redriven_from,omitempty"`
	Successor    string     `json:"successor,omitempty"`
	ClosedAt     *time.Time `json:"closed_at,omitempty"`
	ClosedBy     string     `json:"closed_by,omitempty"`
	CloseNote    string     `json:"close_note,omitempty"`
	SettledAt    *time.Time `json:"settled_at,omitempty"`
}

// atOf is d's position as --at takes it, "" for one the topic lost.
func atOf(d deadletters.Message) string {
	if d.BodyLost {
		return ""
	}
	return strconv.Itoa(d.Partition) + ":" + strconv.FormatInt(d.Offset, 10)
}

// printDeadLettersJSON prints the summary and every dead letter of states.
func printDeadLettersJSON(out *printer, k kafkaops.Kafka, states []deadletters.State, known bool, now time.Time) error {
	doc := struct {
		Topic       string                   `json:"topic"`
		Count       int                      `json:"count"`
		At          time.Time                `json:"at"`
		Kinds       []deadletters.KindStatus `json:"kinds"`
		DeadLetters []listedJSON             `json:"dead_letters"`
	}{Topic: k.DLQTopic, Count: len(states), At: now.UTC(), Kinds: deadletters.SummarizeStates(states, known), DeadLetters: []listedJSON{}}
	for _, st := range states {
		d := st.Message
		j := listedJSON{
			ID: st.ID, At: atOf(d), Position: d.Position(k.DLQTopic), Time: d.Time.UTC(), Kind: d.Kind, Key: string(d.Key), Source: d.Source,
			ValueBytes: len(d.Value), ValueOmitted: d.ValueOmitted, BodyLost: d.BodyLost, Error: d.Error, RedrivenFrom: st.RedrivenFrom(),
		}
		if known {
			j.Status, j.Recorded, j.SettledAt, j.Successor = string(st.Status), st.Record != nil, st.SettledAt, st.Successor
			if r := st.Record; r != nil {
				j.ClosedAt, j.ClosedBy, j.CloseNote = r.ClosedAt, r.ClosedBy, r.CloseNote
			}
		}
		doc.DeadLetters = append(doc.DeadLetters, j)
	}
	out.json(doc)
	return out.err
}
