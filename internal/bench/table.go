package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Goals of the throughput work, reported beside the figures; they are
// never asserted. Event figures count distinct money events, message
// figures Kafka messages.
const (
	// GoalFloorShare is the least share of the rule floor's events/s the
	// batched pipeline should reach on new events.
	GoalFloorShare = 0.7
	// GoalBatchedEvents is the batched pipeline's distinct events/s on new
	// events.
	GoalBatchedEvents = 10000
	// GoalDBCPUFactor bounds the database CPU per new event of the batched
	// pipeline, as a multiple of the rule floor's.
	GoalDBCPUFactor = 1.5
	// GoalWorkerCPU bounds the worker's CPU per new event, batched.
	GoalWorkerCPU = 30 * time.Microsecond
	// GoalReplay is a replay's messages/s (every message a duplicate).
	GoalReplay = 50000
	// GoalReplayWorkerCPU bounds the worker's CPU per replayed message.
	GoalReplayWorkerCPU = 12 * time.Microsecond
	// GoalP99 bounds publish→settled at GoalPacedRate distinct events/s.
	GoalP99 = 25 * time.Millisecond
	// GoalPacedRate is the rate, distinct events/s, GoalP99 and the
	// other steady-load goals are set for.
	GoalPacedRate = 1000
	// GoalSteadyWorkerCPU bounds the worker's CPU per new event at
	// GoalPacedRate, batched (with 1 and with 2 processes: theirs summed).
	GoalSteadyWorkerCPU = 100 * time.Microsecond
	// GoalSteadyDBFactor bounds the database CPU per new event at
	// GoalPacedRate, batched, as a multiple of the per-event floor's (the
	// rule floor written one event per transaction, in the same run).
	GoalSteadyDBFactor = 0.5
	// GoalSettledP99 bounds, at GoalPacedRate, the time from a callback's
	// publish to its settled event acknowledged on the settled-event topic.
	GoalSettledP99 = 30 * time.Millisecond
	// GoalOutboxDBFactor bounds the batched row's database CPU per event
	// with settled events on over the same backlog's with them off.
	GoalOutboxDBFactor = 1.15
	// GoalOutboxRateShare is the least share of the events/s with settled
	// events off that the batched row keeps with them on.
	GoalOutboxRateShare = 0.90
	// GoalPeakRSSMiB bounds the worker's peak RSS over a
	// 1,000,000-message backlog (make bench-backlog).
	GoalPeakRSSMiB = 128
	goalRSSBacklog = 1_000_000
)

// tableHead writes the facts, one a line, and a blank line to b, and
// returns the table that follows them with its header row written.
func tableHead(b *strings.Builder, facts []string, header string) *tabwriter.Writer {
	for _, f := range facts {
		fmt.Fprintln(b, f)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, header)
	return tw
}

// WriteTable writes the facts, the table, the goals and the sanity checks.
func (r Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	tw := tableHead(&b, r.Facts, "row\tmessages\tevents\telapsed\tstartup\tmsgs/s\tevents/s\t×transport\t×floor\t"+
		"worker µs/ev\tdb µs/ev\tstmts/ev\tp50\tp99\tpeak RSS\t")
	transport, _ := r.Row(RowTransport)
	floor, _ := r.Row(RowFloor)
	for _, row := range r.Rows {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			row.Name, countOrDash(row.Messages), row.Events, row.Elapsed.Round(time.Millisecond), dur(row.Startup),
			rateOrDash(row.Rate), row.EventRate,
			ratio(row.Rate, transport.Rate), ratio(row.EventRate, floor.EventRate),
			perUnitText(row.WorkerPerEvent()), perUnitText(row.DBPerEvent()), stmtsText(row.StatementsPerEvent()),
			latency(row.P50), latency(row.P99), mibOrDash(row.PeakRSS))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("format table: %w", err)
	}
	b.WriteString("\n")
	fmt.Fprintln(&b, "messages are Kafka messages (channel retries included); events are distinct money events (tenant, idempotency key),")
	fmt.Fprintln(&b, "the unit every per-event figure divides by (a replay's are all duplicates); the raw rows and the floors read no messages.")
	fmt.Fprintln(&b, "×transport is msgs/s over the transport ceiling's, ×floor events/s over the rule floor's, from this same run.")
	fmt.Fprintln(&b, "worker and db µs/ev: utime+stime from /proc of the worker process (the harness on the first four rows, the readfloor")
	fmt.Fprintln(&b, "process on the paced read floor) and of the database server, over the row, per event; stmts/ev: the server's global")
	fmt.Fprintln(&b, "Questions counter over the row, per event.")
	fmt.Fprintln(&b, "Pipelines run from process start to the group's last commit (startup included); paced rows: msgs/s and events/s are")
	fmt.Fprintln(&b, "the publish rate reached, CPU and statements cover the whole row, p50/p99 are first publish -> claim settled_at per")
	fmt.Fprintln(&b, "distinct event, split in the notes at the claim's created_at; settled events (paced rows, in the notes): first publish ->")
	fmt.Fprintln(&b, "the settled event acknowledged on the settled-event topic (the outbox row's published_at), and settlement (its")
	fmt.Fprintln(&b, "settled_at) -> acknowledged. Every pipeline row but the one marked off writes and publishes settled events.")
	for _, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(&b, "  %s: %s\n", row.Key, row.Note)
		}
	}
	r.writeGoals(&b)
	writeSanity(&b, r.Problems)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// writeGoals writes the goals section.
func (r Result) writeGoals(b *strings.Builder) {
	b.WriteString("\ngoals (reported, not asserted):\n")
	floor, _ := r.Row(RowFloor)
	transport, _ := r.Row(RowTransport)
	per, _ := r.Row(RowPerMessage)
	bat, _ := r.Row(RowBatched)
	off, _ := r.Row(RowBatchedOff)
	rep, _ := r.Row(RowReplay)
	paced, _ := r.Row(RowPacedBatched)
	paced2, _ := r.Row(RowPacedBatched2)
	eventFloor, _ := r.Row(RowEventFloor)
	read, _ := r.Row(RowPacedRead)

	if floor.EventRate > 0 {
		share := bat.EventRate / floor.EventRate
		writeGoal(b, "batched events/s, ×rule floor", fmt.Sprintf("%.2f×", share), share >= GoalFloorShare,
			fmt.Sprintf(">= %.1f× (%.0f of %.0f)", GoalFloorShare, bat.EventRate, floor.EventRate))
	} else {
		goalLine(b, "batched events/s, ×rule floor", "-", fmt.Sprintf("goal >= %.1f×", GoalFloorShare), "unknown")
	}
	writeGoal(b, "batched distinct events/s", fmt.Sprintf("%.0f", bat.EventRate), bat.EventRate >= GoalBatchedEvents,
		fmt.Sprintf(">= %d", GoalBatchedEvents))
	if bat.SteadyRate > 0 && r.MessagesPerEvent > 0 {
		fmt.Fprintf(b, "  (after the first commit: batched about %.0f events/s; start-up weighs on short backlogs)\n",
			bat.SteadyRate/r.MessagesPerEvent)
	}
	if db, fl := bat.DBPerEvent(), floor.DBPerEvent(); db >= 0 && fl > 0 {
		writeGoal(b, "database CPU per new event", fmt.Sprintf("%.1f µs, %.2f×", db, db/fl), db <= GoalDBCPUFactor*fl,
			fmt.Sprintf("<= %.1f× the floor's %.1f µs", GoalDBCPUFactor, fl))
	} else {
		goalLine(b, "database CPU per new event", "-", fmt.Sprintf("goal <= %.1f× the rule floor's", GoalDBCPUFactor), "unknown")
	}
	writeCPUGoal(b, "worker CPU per new event", bat.WorkerPerEvent(), GoalWorkerCPU)
	writeGoal(b, "replay messages/s", fmt.Sprintf("%.0f", rep.Rate), rep.Rate >= GoalReplay, fmt.Sprintf(">= %d", GoalReplay))
	if rep.SteadyRate > 0 {
		fmt.Fprintf(b, "  (after the first commit: replay %.0f messages/s)\n", rep.SteadyRate)
	}
	writeCPUGoal(b, "replay worker CPU per message", rep.perMessage(rep.WorkerCPU), GoalReplayWorkerCPU)
	goalLine(b, "replay msgs/s, ×transport ceiling", ratio(rep.Rate, transport.Rate), "reported", "")
	writeOutboxGoals(b, bat, off, r.Outbox)
	writeSteadyGoals(b, paced, eventFloor, fmt.Sprintf("p99 publish->settled at %.0f ev/s", paced.EventRate), "1 proc")
	writeSettledGoal(b, paced, fmt.Sprintf("p99 publish->settled event at %.0f ev/s", paced.EventRate))
	fmt.Fprintf(b, "  (paced, batched: worker %s µs and database %s µs CPU, %s statements per event)\n",
		perUnitText(paced.WorkerPerEvent()), perUnitText(paced.DBPerEvent()), stmtsText(paced.StatementsPerEvent()))
	if rf := read.WorkerPerEvent(); rf >= 0 {
		goalLine(b, "steady read floor CPU/event", perUnitText(rf)+" µs",
			fmt.Sprintf("reported: %.0f%% of the worker goal's %.0f µs", 100*rf/float64(GoalSteadyWorkerCPU/time.Microsecond),
				float64(GoalSteadyWorkerCPU)/float64(time.Microsecond)), "")
		b.WriteString("  (what reading and decoding alone cost per event at this rate, before any statement: the paced read floor row)\n")
	}
	writeSteadyGoals(b, paced2, eventFloor, fmt.Sprintf("p99 at %.0f ev/s, 2 procs", paced2.EventRate), "2 procs")
	writeSettledGoal(b, paced2, fmt.Sprintf("p99 settled event at %.0f ev/s, 2 procs", paced2.EventRate))
	fmt.Fprintf(b, "  (paced, batched, 2 processes: worker %s µs (both summed) and database %s µs CPU, %s statements per event)\n",
		perUnitText(paced2.WorkerPerEvent()), perUnitText(paced2.DBPerEvent()), stmtsText(paced2.StatementsPerEvent()))
	if paced.EventRate < 0.95*GoalPacedRate || paced2.EventRate < 0.95*GoalPacedRate {
		fmt.Fprintf(b, "  (the steady-load goals are set at %d events/s: paced at %.0f and %.0f, they count as NOT met)\n",
			GoalPacedRate, paced.EventRate, paced2.EventRate)
	}
	fmt.Fprintf(b, "  batch size 1 beside %s: %s vs %s statements, worker %s vs %s µs, database %s vs %s µs per event; %.0f vs %.0f events/s\n",
		r.batchMax(), stmtsText(per.StatementsPerEvent()), stmtsText(bat.StatementsPerEvent()),
		perUnitText(per.WorkerPerEvent()), perUnitText(bat.WorkerPerEvent()),
		perUnitText(per.DBPerEvent()), perUnitText(bat.DBPerEvent()), per.EventRate, bat.EventRate)
	goalLine(b, "peak RSS, batched", mibOrDash(bat.PeakRSS), fmt.Sprintf("goal <= %d MiB", GoalPeakRSSMiB), "see below")
	fmt.Fprintf(b, "  (the RSS goal is for a %d-message backlog, measured by make bench-backlog; this backlog was %d messages)\n",
		goalRSSBacklog, bat.Messages)
}

// writeOutboxGoals writes what the outbox costs the batched backlog: the
// database's CPU per event and the events/s, settled events on over off,
// as the median of the run's pairs (each pair's beside it), met within
// GoalOutboxDBFactor and GoalOutboxRateShare, and the first pair's
// statements and worker CPU per event (bat on, off off).
func writeOutboxGoals(b *strings.Builder, bat, off Row, pairs []OutboxPair) {
	median := func(of func(OutboxPair) float64) (float64, string) {
		var vs []float64
		var each []string
		for _, p := range pairs {
			if v := of(p); v >= 0 {
				vs = append(vs, v)
				each = append(each, fmt.Sprintf("%.2f", v))
			}
		}
		if len(vs) == 0 {
			return -1, ""
		}
		slices.Sort(vs)
		m := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		return m, strings.Join(each, ", ")
	}
	if db, each := median(func(p OutboxPair) float64 { return p.DBCPU }); db >= 0 {
		writeGoal(b, "outbox: database CPU/event, on/off", fmt.Sprintf("%.2f×", db), db <= GoalOutboxDBFactor,
			fmt.Sprintf("<= %.2f× (median of %s)", GoalOutboxDBFactor, each))
	} else {
		goalLine(b, "outbox: database CPU/event, on/off", "-", fmt.Sprintf("goal <= %.2f×", GoalOutboxDBFactor), "unknown")
	}
	if rate, each := median(func(p OutboxPair) float64 { return p.Rate }); rate >= 0 {
		writeGoal(b, "outbox: events/s, on/off", fmt.Sprintf("%.2f×", rate), rate >= GoalOutboxRateShare,
			fmt.Sprintf(">= %.2f× (median of %s)", GoalOutboxRateShare, each))
	} else {
		goalLine(b, "outbox: events/s, on/off", "-", fmt.Sprintf("goal >= %.2f×", GoalOutboxRateShare), "unknown")
	}
	if st, each := median(func(p OutboxPair) float64 { return p.Statements }); st >= 0 {
		goalLine(b, "outbox: statements/event, on/off", fmt.Sprintf("%.2f×", st), "reported (median of "+each+")", "")
	}
	if w, each := median(func(p OutboxPair) float64 { return p.WorkerCPU }); w >= 0 {
		goalLine(b, "outbox: worker CPU/event, on/off", fmt.Sprintf("%.2f×", w), "reported (median of "+each+")", "")
	}
	fmt.Fprintf(b, "  (first pair, the batched rows: %s vs %s statements, worker %s vs %s µs, database %s vs %s µs per event, %.0f vs %.0f events/s)\n",
		stmtsText(bat.StatementsPerEvent()), stmtsText(off.StatementsPerEvent()),
		perUnitText(bat.WorkerPerEvent()), perUnitText(off.WorkerPerEvent()),
		perUnitText(bat.DBPerEvent()), perUnitText(off.DBPerEvent()), bat.EventRate, off.EventRate)
}

// writeSettledGoal writes the settled-event latency goal of a paced row
// (named name): its p99 from publish to settled event acknowledged, met
// within GoalSettledP99 at GoalPacedRate (95% of it reached) or more.
func writeSettledGoal(b *strings.Builder, row Row, name string) {
	want := fmt.Sprintf("<= %s at %d events/s", latency(GoalSettledP99), GoalPacedRate)
	if row.SettledP99 <= 0 {
		goalLine(b, name, "-", "goal "+want, "unknown")
		return
	}
	writeGoal(b, name, latency(row.SettledP99), row.SettledP99 <= GoalSettledP99 && row.EventRate >= 0.95*GoalPacedRate, want)
	fmt.Fprintf(b, "  (p50 %s; settlement -> acked p50/p99 %s/%s)\n", latency(row.SettledP50), latency(row.AckP50), latency(row.AckP99))
}

// writeSteadyGoals writes the steady-load goals of a paced batched row:
// its p99 publish→settled (named p99Name), its worker's CPU per event and
// its database's CPU per event against the per-event floor's, each met
// only at GoalPacedRate (95% of it reached) or more; procs ends the CPU
// goals' names.
func writeSteadyGoals(b *strings.Builder, row, eventFloor Row, p99Name, procs string) {
	atRate := row.EventRate >= 0.95*GoalPacedRate
	rateWant := fmt.Sprintf(" at %d events/s", GoalPacedRate)
	writeGoal(b, p99Name, latency(row.P99), row.P99 > 0 && row.P99 <= GoalP99 && atRate,
		fmt.Sprintf("<= %s%s", latency(GoalP99), rateWant))

	name := "steady worker CPU/event, " + procs
	bound := float64(GoalSteadyWorkerCPU) / float64(time.Microsecond)
	want := fmt.Sprintf("<= %.0f µs%s", bound, rateWant)
	if w := row.WorkerPerEvent(); w >= 0 {
		writeGoal(b, name, perUnitText(w)+" µs", w <= bound && atRate, want)
	} else {
		goalLine(b, name, "-", "goal "+want, "unknown")
	}

	name = "steady database CPU/event, " + procs
	if db, fl := row.DBPerEvent(), eventFloor.DBPerEvent(); db >= 0 && fl > 0 {
		writeGoal(b, name, fmt.Sprintf("%.1f µs, %.2f×", db, db/fl), db <= GoalSteadyDBFactor*fl && atRate,
			fmt.Sprintf("<= %.1f× the event floor's %.1f µs", GoalSteadyDBFactor, fl))
	} else {
		goalLine(b, name, "-", fmt.Sprintf("goal <= %.1f× the per-event floor's", GoalSteadyDBFactor), "unknown")
	}
}

// batchMax reads the default batch size back from the batched row's name.
func (r Result) batchMax() string {
	bat, _ := r.Row(RowBatched)
	if _, n, ok := strings.Cut(bat.Name, "PAYCB_BATCH_MAX="); ok {
		return n
	}
	return "the default"
}

// writeCPUGoal writes a goal line for a CPU time per unit (µs, -1 when
// unknown) against its bound.
func writeCPUGoal(b *strings.Builder, name string, got float64, bound time.Duration) {
	want := fmt.Sprintf("<= %.0f µs", float64(bound)/float64(time.Microsecond))
	if got < 0 {
		goalLine(b, name, "-", "goal "+want, "unknown")
		return
	}
	writeGoal(b, name, perUnitText(got)+" µs", got <= float64(bound)/float64(time.Microsecond), want)
}

// WriteBenchfmt writes the rows in Go benchmark format, so benchstat can
// compare runs: one line per row, the iterations being its distinct
// events and ns/op the time per event, with msgs/s, events/s, the CPU and
// statement figures per event, the latencies and the peak RSS as extra
// units where the row has them.
func (r Result) WriteBenchfmt(w io.Writer) error {
	var b strings.Builder
	for _, row := range r.Rows {
		if row.Events == 0 || row.EventRate == 0 {
			continue
		}
		fmt.Fprintf(&b, "BenchmarkE2E/%s %d %.1f ns/op", row.Key, row.Events, 1e9/row.EventRate)
		if row.Rate > 0 {
			fmt.Fprintf(&b, " %.0f msgs/s", row.Rate)
		}
		fmt.Fprintf(&b, " %.0f events/s", row.EventRate)
		writeCosts(&b, row)
		if row.P50 > 0 {
			fmt.Fprintf(&b, " %.3f p50-ms %.3f p99-ms", ms(row.P50), ms(row.P99))
		}
		if row.SettledP50 > 0 {
			fmt.Fprintf(&b, " %.3f settled-p50-ms %.3f settled-p99-ms %.3f ack-p99-ms", ms(row.SettledP50), ms(row.SettledP99), ms(row.AckP99))
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

// writeCosts appends a row's known CPU and statement figures per event in
// Go benchmark units.
func writeCosts(b *strings.Builder, row Row) {
	for _, m := range []struct {
		v    float64
		unit string
	}{
		{row.WorkerPerEvent(), "worker-us/event"},
		{row.DBPerEvent(), "db-us/event"},
		{row.StatementsPerEvent(), "stmts/event"},
	} {
		if m.v >= 0 {
			fmt.Fprintf(b, " %.3f %s", m.v, m.unit)
		}
	}
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

func countOrDash(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func rateOrDash(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// perUnitText formats µs per unit; "-" when unknown (below zero).
func perUnitText(us float64) string {
	if us < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", us)
}

// stmtsText formats statements per event; "-" when unknown.
func stmtsText(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func mibOrDash(b int64) string {
	if b <= 0 {
		return "-"
	}
	return mib(b)
}

// writeGoal writes one line of the goals section: met or NOT met.
func writeGoal(b *strings.Builder, name, got string, ok bool, want string) {
	mark := "met"
	if !ok {
		mark = "NOT met"
	}
	goalLine(b, name, got, "goal "+want, mark)
}

// goalLine writes one line of the goals section.
func goalLine(b *strings.Builder, name, got, want, mark string) {
	fmt.Fprintf(b, "  %-36s %18s   %-40s %s\n", name, got, want, mark)
}

// writeSanity writes the sanity section: ok, or every problem found.
func writeSanity(b *strings.Builder, problems []string) {
	b.WriteString("\nsanity (reconcile, claims, totals per tenant): ")
	if len(problems) == 0 {
		b.WriteString("ok\n")
		return
	}
	fmt.Fprintf(b, "%d PROBLEMS\n", len(problems))
	for _, p := range problems {
		fmt.Fprintf(b, "  - %s\n", p)
	}
}
