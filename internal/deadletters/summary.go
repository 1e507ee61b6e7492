package deadletters

import "time"

// KindStatus is the dead letters of one kind with how many have each
// status: one line of `consumer dlq list`.
type KindStatus struct {
	Kind     string `json:"kind"`
	Count    int    `json:"count"`
	Open     *int   `json:"open,omitempty"`
	Resolved *int   `json:"resolved,omitempty"`
	Closed   *int   `json:"closed,omitempty"`
	Redriven *int   `json:"redriven,omitempty"`
	// BodyLost counts those the dead-letter topic no longer holds.
	BodyLost int       `json:"body_lost"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	// OldestOpen is when the oldest open dead letter of the kind was
	// written; nil when none is open or statuses are not known.
	OldestOpen *time.Time `json:"oldest_open,omitempty"`
}

// SummarizeStates counts states by kind (Summarize) with, when known (the
// states carry statuses), the open, resolved, closed and redriven counts
// and the oldest open dead letter.
func SummarizeStates(states []State, known bool) []KindStatus {
	ds := make([]Message, len(states))
	for i, st := range states {
		ds[i] = st.Message
	}
	sums := Summarize(ds)
	out := make([]KindStatus, len(sums))
	index := map[string]int{}
	for i, s := range sums {
		out[i] = KindStatus{Kind: s.Kind, Count: s.Count, First: s.First.UTC(), Last: s.Last.UTC()}
		if known {
			out[i].Open, out[i].Resolved, out[i].Closed, out[i].Redriven = new(int), new(int), new(int), new(int)
		}
		index[s.Kind] = i
	}
	for _, st := range states {
		k := &out[index[st.Message.Kind]]
		if st.Message.BodyLost {
			k.BodyLost++
		}
		if !known {
			continue
		}
		switch st.Status {
		case StatusOpen:
			*k.Open++
			if at := st.WrittenAt().UTC(); k.OldestOpen == nil || at.Before(*k.OldestOpen) {
				k.OldestOpen = &at
			}
		case StatusResolved:
			*k.Resolved++
		case StatusClosed:
			*k.Closed++
		case StatusRedriven:
			*k.Redriven++
		}
	}
	return out
}
