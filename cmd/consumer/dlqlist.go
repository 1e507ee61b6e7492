package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/deadletters"
)

// listed is a dead letter with its status as `dlq list` shows it ("-"
// when not known).
type listed struct {
	d      deadletters.Message
	status string
	st     *deadletters.State
}

// withStatus pairs each dead letter with its state; states is nil when
// statuses are not known, else it has one state per dead letter.
func withStatus(ds []deadletters.Message, states []deadletters.State) []listed {
	out := make([]listed, len(ds))
	for i, d := range ds {
		out[i] = listed{d: d, status: "-"}
		if states != nil {
			out[i].st = &states[i]
			out[i].status = string(states[i].Status)
		}
	}
	return out
}

// kindStatus is one kind's line of `dlq list`.
type kindStatus struct {
	Kind     string    `json:"kind"`
	Count    int       `json:"count"`
	Open     *int      `json:"open,omitempty"`
	Resolved *int      `json:"resolved,omitempty"`
	Closed   *int      `json:"closed,omitempty"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	// OldestOpen is when the oldest open dead letter of the kind was
	// written; nil when none is open or statuses are not known.
	OldestOpen *time.Time `json:"oldest_open,omitempty"`
}

// summarizeStatus is deadletters.Summarize with, when states are known,
// the open, resolved and closed counts and the oldest open dead letter.
func summarizeStatus(ds []deadletters.Message, states []deadletters.State) []kindStatus {
	sums := deadletters.Summarize(ds)
	out := make([]kindStatus, len(sums))
	index := map[string]int{}
	for i, s := range sums {
		out[i] = kindStatus{Kind: s.Kind, Count: s.Count, First: s.First.UTC(), Last: s.Last.UTC()}
		if states != nil {
			out[i].Open, out[i].Resolved, out[i].Closed = new(int), new(int), new(int)
		}
		index[s.Kind] = i
	}
	for _, st := range states {
		k := &out[index[st.Message.Kind]]
		switch st.Status {
		case deadletters.StatusOpen:
			*k.Open++
			if at := st.WrittenAt().UTC(); k.OldestOpen == nil || at.Before(*k.OldestOpen) {
				k.OldestOpen = &at
			}
		case deadletters.StatusResolved:
			*k.Resolved++
		case deadletters.StatusClosed:
			*k.Closed++
		}
	}
	return out
}

// printDeadLetterSummary prints one line per kind.
func printDeadLetterSummary(out *printer, ds []deadletters.Message, states []deadletters.State, now time.Time) {
	count := func(n *int) string {
		if n == nil {
			return "-"
		}
		return strconv.Itoa(*n)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "kind\tcount\topen\tresolved\tclosed\toldest open\tfirst\tlast")
	for _, s := range summarizeStatus(ds, states) {
		oldest := "-"
		if s.OldestOpen != nil {
			oldest = age(now.Sub(*s.OldestOpen))
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Kind, s.Count, count(s.Open), count(s.Resolved), count(s.Closed),
			oldest, s.First.Format(time.RFC3339), s.Last.Format(time.RFC3339))
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
	At           string     `json:"at"`
	Position     string     `json:"position"`
	Time         time.Time  `json:"time"`
	Kind         string     `json:"kind"`
	Status       string     `json:"status,omitempty"`
	Key          string     `json:"key"`
	Source       string     `json:"source"`
	ValueBytes   int        `json:"value_bytes"`
	ValueOmitted bool       `json:"value_omitted"`
	Error        string     `json:"error"`
	Recorded     bool       `json:"recorded"`
	ClosedAt     *time.Time `json:"closed_at,omitempty"`
	ClosedBy     string     `json:"closed_by,omitempty"`
	CloseNote    string     `json:"close_note,omitempty"`
	SettledAt    *time.Time `json:"settled_at,omitempty"`
}

// printDeadLettersJSON prints the summary and every dead letter of ds.
func printDeadLettersJSON(out *printer, k deadletters.Kafka, ds []deadletters.Message, states []deadletters.State, now time.Time) error {
	doc := struct {
		Topic       string       `json:"topic"`
		Count       int          `json:"count"`
		At          time.Time    `json:"at"`
		Kinds       []kindStatus `json:"kinds"`
		DeadLetters []listedJSON `json:"dead_letters"`
	}{Topic: k.DLQTopic, Count: len(ds), At: now.UTC(), Kinds: summarizeStatus(ds, states), DeadLetters: []listedJSON{}}
	for _, e := range withStatus(ds, states) {
		d := e.d
		j := listedJSON{
			At: strconv.Itoa(d.Partition) + ":" + strconv.FormatInt(d.Offset, 10), Position: d.Position(k.DLQTopic),
			Time: d.Time.UTC(), Kind: d.Kind, Key: string(d.Key), Source: d.Source, ValueBytes: len(d.Value),
			ValueOmitted: d.ValueOmitted, Error: d.Error,
		}
		if e.st != nil {
			j.Status, j.Recorded, j.SettledAt = string(e.st.Status), e.st.Record != nil, e.st.SettledAt
			if r := e.st.Record; r != nil {
				j.ClosedAt, j.ClosedBy, j.CloseNote = r.ClosedAt, r.ClosedBy, r.CloseNote
			}
		}
		doc.DeadLetters = append(doc.DeadLetters, j)
	}
	out.json(doc)
	return out.err
}
