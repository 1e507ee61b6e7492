package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Goals of the throughput work (issue 6), reported beside the figures; they
// are never asserted.
const (
	GoalSpeedup     = 10    // batched / per-message
	GoalBatched     = 10000 // events/s
	GoalReplay      = 50000 // events/s
	GoalP99         = 25 * time.Millisecond
	GoalPeakRSSMiB  = 128
	goalRSSBacklog  = 1_000_000
	transportLegend = "×transport and ×storage are each row's events/s over the ceiling's, from this same run"
)

// WriteTable writes the facts, the table, the goals and the sanity checks.
func (r Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	for _, f := range r.Facts {
		fmt.Fprintln(&b, f)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "row\tcount\telapsed\tstartup\tevents/s\t×transport\t×storage\tp50\tp99\tpeak RSS\t")
	transport, _ := r.Row(RowTransport)
	storage, _ := r.Row(RowStorage)
	for _, row := range r.Rows {
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n",
			row.Name, row.Count, row.Elapsed.Round(time.Millisecond), dur(row.Startup), row.Rate,
			ratio(row.Rate, transport.Rate), ratio(row.Rate, storage.Rate),
			latency(row.P50), latency(row.P99), mibOrDash(row.PeakRSS))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("format table: %w", err)
	}
	b.WriteString("\n")
	fmt.Fprintln(&b, "events/s counts Kafka messages (channel retries included) except on the storage row, which counts distinct events;")
	fmt.Fprintln(&b, transportLegend+"; pipelines run from process start to the group's last commit (startup included);")
	fmt.Fprintln(&b, "paced rows: events/s is the publish rate reached, p50/p99 are first publish -> claim settled_at per distinct event, split in the notes at the claim's created_at.")
	for _, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(&b, "  %s: %s\n", row.Key, row.Note)
		}
	}

	b.WriteString("\ngoals (issue 6; reported, not asserted):\n")
	per, _ := r.Row(RowPerMessage)
	bat, _ := r.Row(RowBatched)
	rep, _ := r.Row(RowReplay)
	paced, _ := r.Row(RowPacedBatched)
	goal := func(name, got string, ok bool, want string) { writeGoal(&b, name, got, ok, want) }
	if per.Rate > 0 {
		goal("batched / per-message", fmt.Sprintf("%.1f×", bat.Rate/per.Rate), bat.Rate >= GoalSpeedup*per.Rate, fmt.Sprintf(">= %d×", GoalSpeedup))
	}
	goal("batched events/s", fmt.Sprintf("%.0f", bat.Rate), bat.Rate >= GoalBatched, fmt.Sprintf(">= %d", GoalBatched))
	goal("replay events/s", fmt.Sprintf("%.0f", rep.Rate), rep.Rate >= GoalReplay, fmt.Sprintf(">= %d", GoalReplay))
	if bat.SteadyRate > 0 && rep.SteadyRate > 0 {
		fmt.Fprintf(&b, "  (after the first commit: batched %.0f events/s, replay %.0f events/s; start-up weighs on short backlogs)\n",
			bat.SteadyRate, rep.SteadyRate)
	}
	goal(fmt.Sprintf("p99 publish->settled at %.0f/s", paced.Rate), latency(paced.P99), paced.P99 > 0 && paced.P99 <= GoalP99,
		fmt.Sprintf("<= %s at 1000/s", GoalP99))
	goal("peak RSS, batched", mibOrDash(bat.PeakRSS), bat.PeakRSS > 0 && bat.PeakRSS <= GoalPeakRSSMiB<<20,
		fmt.Sprintf("<= %d MiB", GoalPeakRSSMiB))
	fmt.Fprintf(&b, "  (the RSS goal is for a %d-message backlog; this backlog was %d messages)\n", goalRSSBacklog, bat.Count)
	writeSanity(&b, r.Problems)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// WriteBenchfmt writes the rows in Go benchmark format, so benchstat can
// compare runs: one line per row with ns/op per message and the row's
// figures as extra units.
func (r Result) WriteBenchfmt(w io.Writer) error {
	var b strings.Builder
	for _, row := range r.Rows {
		if row.Count == 0 || row.Rate == 0 {
			continue
		}
		fmt.Fprintf(&b, "BenchmarkE2E/%s %d %.1f ns/op %.0f events/s", row.Key, row.Count, 1e9/row.Rate, row.Rate)
		if row.P50 > 0 {
			fmt.Fprintf(&b, " %.3f p50-ms %.3f p99-ms", ms(row.P50), ms(row.P99))
		}
		if row.PeakRSS > 0 {
			fmt.Fprintf(&b, " %.1f peak-RSS-MiB", float64(row.PeakRSS)/(1<<20))
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write benchmark lines: %w", err)
	}
	return nil
}

func ratio(v, ceiling float64) string {
	if ceiling <= 0 || v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v/ceiling)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latency(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", ms(d))
}

func dur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func mibOrDash(b int64) string {
	if b <= 0 {
		return "-"
	}
	return mib(b)
}

// writeGoal writes one line of the goals section.
func writeGoal(b *strings.Builder, name, got string, ok bool, want string) {
	mark := "met"
	if !ok {
		mark = "NOT met"
	}
	fmt.Fprintf(b, "  %-34s %12s   goal %-28s %s\n", name, got, want, mark)
}

// writeSanity writes the sanity section: ok, or every problem found.
func writeSanity(b *strings.Builder, problems []string) {
	b.WriteString("\nsanity (settlement.Check, claims, totals per tenant): ")
	if len(problems) == 0 {
		b.WriteString("ok\n")
		return
	}
	fmt.Fprintf(b, "%d PROBLEMS\n", len(problems))
	for _, p := range problems {
		fmt.Fprintf(b, "  - %s\n", p)
	}
}
