package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/registrations"
)

func statusCmd() command {
	return command{
		name:     "status",
		summary:  "live view of the group: members, partitions, committed/end offsets, lag, stalls, stuck messages",
		synopsis: "[--json]",
		description: `Shows the consumer group as it is now, without joining it, so it is safe
while workers run: the group's state and members (client ID, host, admin
address, assigned partitions), and for each partition of the input topic
its owner, the group's committed offset, the partition's end offset, the
lag (end minus committed, or minus the first retained offset where the group
has committed nothing) and how long the partition has been stalled, as its
owner reports it on its admin /metrics (paycb_partition_stalled_seconds).
For each stuck partition (one holding a message an attempt has failed on,
or held a second or more) it then shows the message it is stuck on, as its
owner reports it on its admin /partitions: offset, key, since when, the
failed attempts and the last error, in full (--json: "stuck", null when
not stuck or unknown).

A worker announces its admin address in its Kafka client ID
("paycb@HOST:PORT"; a wildcard host is replaced by the address the broker
sees the member connect from). A stall is "unknown" when the partition has
no owner, or its owner announces no address, cannot be reached or does not
report the partition. Needs only the broker.

With PAYCB_DB_DSN set it also shows the open registrations (payments and
refunds registered and neither settled, closed nor expired) per channel and
kind: how many, the oldest's age, payments past their expiry, and how many
are under 1m, 15m, 1h, 24h old and older (--json: "registrations").`,
		setup: statusCommand,
	}
}

func statusCommand(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the status as JSON (stalled_seconds is null when unknown)")
	return func(ctx context.Context, env *environment, _ []string) error {
		k, err := opsKafka(ctx, env)
		if err != nil {
			return err
		}
		rep, err := ops.Status(ctx, k, ops.StatusOptions{})
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		regs, err := openRegistrations(ctx, env)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		out := newPrinter(env)
		if *asJSON {
			out.json(struct {
				ops.StatusReport
				Registrations []registrationStatus `json:"registrations"`
			}{rep, regs})
			return out.err
		}
		printStatus(out, rep)
		printRegistrations(out, regs, env.cfg.DB.DSN.IsSet())
		return out.err
	}
}

// registrationStatus is one channel's open registrations of one kind, as
// consumer status shows them.
type registrationStatus struct {
	Channel           string  `json:"channel"`
	Kind              string  `json:"kind"`
	Open              int64   `json:"open"`
	OldestOpenSeconds float64 `json:"oldest_open_seconds"`
	PastExpiry        int64   `json:"past_expiry"`
	ByAge             []int64 `json:"by_age"` // under 1m, 15m, 1h, 24h, older
}

// openRegistrations reads the open registrations per channel and kind
// with an open one; nil without PAYCB_DB_DSN.
func openRegistrations(ctx context.Context, env *environment) ([]registrationStatus, error) {
	if !env.cfg.DB.DSN.IsSet() {
		return nil, nil
	}
	db, err := openDB(ctx, env)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	store := registrations.NewStore(db)
	stats, err := store.Stats(ctx)
	if err != nil {
		return nil, err
	}
	ages, err := store.Ages(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := []registrationStatus{}
	for _, st := range stats {
		if st.Open == 0 {
			continue
		}
		r := registrationStatus{Channel: string(st.Channel), Kind: string(st.Kind), Open: st.Open, PastExpiry: st.PastExpiry}
		if !st.Oldest.IsZero() {
			r.OldestOpenSeconds = max(now.Sub(st.Oldest).Seconds(), 0)
		}
		for _, a := range ages {
			if a.Channel == st.Channel && a.Kind == st.Kind {
				r.ByAge = a.Counts
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// printRegistrations prints the open registrations' table, or says there
// are none; nothing without a database.
func printRegistrations(out *printer, regs []registrationStatus, haveDB bool) {
	if !haveDB {
		return
	}
	if len(regs) == 0 {
		out.printf("\nopen registrations: none\n")
		return
	}
	out.printf("\nopen registrations:\n")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "channel\tkind\topen\toldest\tpast expiry\t<1m\t<15m\t<1h\t<24h\t>=24h\t")
	for _, r := range regs {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t", r.Channel, r.Kind, r.Open,
			(time.Duration(r.OldestOpenSeconds) * time.Second).String(), r.PastExpiry)
		for _, n := range r.ByAge {
			_, _ = fmt.Fprintf(tw, "%d\t", n)
		}
		_, _ = fmt.Fprintln(tw)
	}
	out.flush(tw)
}

func printStatus(out *printer, rep ops.StatusReport) {
	out.printf("group %s on %s: %s, %d member(s), total lag %d\n", rep.Group, rep.Topic, rep.State, len(rep.Members), rep.TotalLag)
	number := map[string]string{}
	if len(rep.Members) > 0 {
		out.printf("\nmembers:\n")
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "#\tclient id\thost\tadmin\tpartitions\tstalls\tmember id")
		for i, m := range rep.Members {
			n := strconv.Itoa(i + 1)
			number[m.ID] = n
			stalls := "reported"
			if !m.Reachable {
				stalls = "unknown: " + oneLine(m.Error, 60)
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n, oneLine(m.ClientID, 60), oneLine(m.Host, 40), oneLine(m.Admin, 60), joinInts(m.Partitions), stalls, m.ID)
		}
		out.flush(tw)
	}
	out.printf("\npartitions:\n")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "partition\tmember\tcommitted\tend\tlag\tstalled\t")
	for _, p := range rep.Partitions {
		committed := "none"
		if p.Committed >= 0 {
			committed = strconv.FormatInt(p.Committed, 10)
		}
		stalled := "unknown"
		if p.StalledSeconds != nil {
			stalled = strconv.FormatFloat(*p.StalledSeconds, 'f', 1, 64) + "s"
		}
		member := "-"
		if p.Member != "" {
			member = "#" + number[p.Member]
		}
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t\n", p.Partition, member, committed, p.End, p.Lag, stalled)
	}
	out.flush(tw)
	printStuck(out, rep)
	if b := rep.Settled; b != nil {
		out.printf("\nsettled events not yet published: %.0f, oldest %.0fs\n", b.Pending, b.OldestPendingSeconds)
	}
}

// printStuck lists each stuck partition's message: offset, key, since
// when, and the last error its attempts met, in full.
func printStuck(out *printer, rep ops.StatusReport) {
	first := true
	for _, p := range rep.Partitions {
		s := p.Stuck
		if s == nil {
			continue
		}
		if first {
			out.printf("\nstuck partitions:\n")
			first = false
		}
		why := "no attempt has failed yet"
		switch {
		case s.Attempts == 0 && s.Error != "":
			why = s.Error
		case s.Error != "":
			why = fmt.Sprintf("%d failed attempts, last: %s", s.Attempts, s.Error)
		}
		out.printf("partition %d at offset %d, key %s, since %s (%s): %s\n", p.Partition, s.Offset, strconv.Quote(s.Key),
			s.Since.UTC().Format(time.RFC3339), time.Since(s.Since).Round(time.Second), oneLine(why, 4096))
	}
}

// joinInts is ns as "0,1,2", or "-" when empty.
func joinInts(ns []int) string {
	if len(ns) == 0 {
		return "-"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
