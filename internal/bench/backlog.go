package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
)

// DefaultBacklog is the backlog RunBacklog measures by default: the size
// the memory goal (issue 6) is stated for.
const DefaultBacklog = goalRSSBacklog

// RowBacklog is the key of the backlog measurement's row.
const RowBacklog = "backlog"

// BacklogResult is what RunBacklog measured.
type BacklogResult struct {
	// Facts describe the run: machine, stream, server, producing.
	Facts []string
	// Requested is the backlog asked for; Row.Messages is the messages
	// actually produced and consumed, at least Requested.
	Requested int
	// Row is the batched consumer over the whole backlog: Messages,
	// Events, Elapsed (process start to the group's last commit), Rate,
	// EventRate, Startup, the worker's PeakRSS, and the CPU and statement
	// figures.
	Row Row
	// BrokerPeakRSS is the broker process's VmHWM in bytes: it holds the
	// whole backlog in memory.
	BrokerPeakRSS int64
	// Problems lists failed sanity checks; empty when all held.
	Problems []string
}

// RunBacklog measures the worker's peak RSS over a backlog: it produces a
// generated stream of at least backlog messages (default DefaultBacklog)
// to a broker process, then runs one batched consumer (PAYCB_BATCH_MAX =
// Options.BatchMax) over all of it until the group has committed
// everything, and checks the ledger it left. Of Options it uses Seed,
// ServerDSN, RepoDir, BinDir, GoTool, BatchMax and Logger. Like Run, it
// stops every subprocess and drops every database before it returns.
func RunBacklog(ctx context.Context, o Options, backlog int) (BacklogResult, error) {
	if backlog <= 0 {
		backlog = DefaultBacklog
	}
	var res BacklogResult
	err := session(ctx, o, []string{mainTopic}, func(h *harness, broker *proc) error {
		var err error
		res, err = h.backlog(ctx, broker, backlog)
		res.Problems = h.res.Problems
		if err != nil {
			return err
		}
		if err := broker.stop(10 * time.Second); err != nil {
			h.log.Warn("broker did not stop cleanly", "err", err)
		}
		return nil
	})
	return res, err
}

// backlogStream generates a stream of at least n messages. demo.Generate
// gives about four messages per trade (a payment and, for half the trades,
// one to three refunds, each delivered one to three times), so n/4 trades
// and a 0.2% margin nearly always suffice; when they do not, it generates
// again with trades added for the shortfall.
func backlogStream(seed uint64, n int) demo.Stream {
	trades := max(1, n/4+n/2000)
	for {
		s := demo.Generate(demo.StreamOptions{Seed: seed, Trades: trades, ReceivedAt: time.Now()})
		if len(s.Messages) >= n {
			return s
		}
		trades += (n-len(s.Messages))/3 + 1
	}
}

// backlog produces the backlog, runs the batched consumer over it, and
// checks the ledger.
func (h *harness) backlog(ctx context.Context, broker *proc, n int) (BacklogResult, error) {
	o := h.o
	res := BacklogResult{Requested: n}
	genStart := time.Now()
	stream := backlogStream(o.Seed, n)
	msgs := make([]kafkaops.Message, len(stream.Messages))
	var size int64
	for i, m := range stream.Messages {
		msgs[i] = kafkaops.Message{Key: m.Key, Value: m.Value}
		size += int64(len(m.Key) + len(m.Value))
	}
	count := len(msgs)
	h.log.Info("generated", "messages", count, "took", time.Since(genStart).Round(time.Millisecond))
	res.Facts = append(res.Facts,
		fmt.Sprintf("machine: %d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		fmt.Sprintf("stream: seed %d, %d trades, %d messages (%s of keys and values), %d distinct money events, "+
			"%d partitions, 3 channels, 2 tenants, %d conflicting and %d malformed",
			o.Seed, stream.Trades, count, mib(size), stream.Events, Partitions, stream.Conflicts, stream.Malformed))

	produceStart := time.Now()
	if err := kafkaops.Produce(ctx, h.brokers, mainTopic, msgs); err != nil {
		return res, err
	}
	produced := time.Since(produceStart)
	h.log.Info("produced", "messages", count, "took", produced.Round(time.Millisecond))
	res.Facts = append(res.Facts, fmt.Sprintf("produced: %d messages in %s (%.0f/s) before the consumer starts; not part of elapsed",
		count, produced.Round(time.Millisecond), float64(count)/produced.Seconds()))
	// Only the totals are needed from here on: let the messages go.
	stream.Messages = nil

	dsn, db, err := h.dbs.create(ctx, "backlog")
	if err != nil {
		return res, err
	}
	defer func() { _ = db.Close() }()
	info, err := serverInfo(ctx, db)
	if err != nil {
		return res, err
	}
	res.Facts = append(res.Facts, "database: "+info)
	res.Facts = append(res.Facts, h.serverFacts(ctx)...)
	res.Facts = append(res.Facts, h.consumerFacts()...)

	row, err := h.throughput(ctx, consumerRun{topic: mainTopic, group: h.dbs.prefix + "backlog", dsn: dsn, batchMax: o.BatchMax},
		count, stream.Events)
	if err != nil {
		return res, err
	}
	row.Key, row.Name = RowBacklog, fmt.Sprintf("backlog %d: PAYCB_BATCH_MAX=%d", n, o.BatchMax)
	h.add(row)
	res.Row = h.res.Rows[len(h.res.Rows)-1]
	if res.BrokerPeakRSS, err = broker.peakRSS(); err != nil {
		return res, err
	}
	h.log.Info("broker", "peak_rss", mib(res.BrokerPeakRSS))
	h.sanity(ctx, db, "backlog", mainTopic, stream)
	return res, nil
}

// WriteTable writes the facts, the row, the memory goal and the sanity
// checks.
func (r BacklogResult) WriteTable(w io.Writer) error {
	var b strings.Builder
	tw := tableHead(&b, r.Facts, "row\tmessages\tevents\telapsed\tstartup\tmsgs/s\tevents/s\tworker µs/ev\tdb µs/ev\tstmts/ev\t"+
		"worker peak RSS\tbroker peak RSS\t")
	row := r.Row
	_, _ = fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n",
		row.Name, row.Messages, row.Events, row.Elapsed.Round(time.Millisecond), dur(row.Startup), row.Rate, row.EventRate,
		perUnitText(row.WorkerPerEvent()), perUnitText(row.DBPerEvent()), stmtsText(row.StatementsPerEvent()),
		mibOrDash(row.PeakRSS), mibOrDash(r.BrokerPeakRSS))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("format table: %w", err)
	}
	b.WriteString("\n")
	fmt.Fprintln(&b, "messages are Kafka messages (channel retries included), events distinct money events; the whole backlog is")
	fmt.Fprintln(&b, "produced before the consumer starts, and elapsed runs from starting it to the group's last commit (startup")
	fmt.Fprintln(&b, "included); CPU (/proc utime+stime of the worker and of the database server) and statements (the server's")
	fmt.Fprintln(&b, "Questions) are per distinct event over that time; peak RSS is VmHWM, the worker and the broker (which holds the")
	fmt.Fprintln(&b, "backlog in memory) being separate processes.")

	b.WriteString("\ngoal (reported, not asserted):\n")
	writeGoal(&b, "worker peak RSS", mibOrDash(row.PeakRSS), row.PeakRSS > 0 && row.PeakRSS <= GoalPeakRSSMiB<<20,
		fmt.Sprintf("<= %d MiB", GoalPeakRSSMiB))
	if row.Messages < goalRSSBacklog {
		fmt.Fprintf(&b, "  (the goal is for a %d-message backlog; this backlog was %d messages)\n", goalRSSBacklog, row.Messages)
	}
	writeSanity(&b, r.Problems)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// WriteBenchfmt writes the row in Go benchmark format, so benchstat can
// compare runs of one backlog size: the name carries the requested size
// (BenchmarkE2E/backlog=N), the iterations are the messages, and the
// rates, the CPU and statement figures per distinct event (where known)
// and the RSS figures are extra units.
func (r BacklogResult) WriteBenchfmt(w io.Writer) error {
	row := r.Row
	if row.Messages == 0 || row.Rate == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "BenchmarkE2E/%s=%d %d %.1f ns/op %.0f msgs/s %.0f events/s",
		RowBacklog, r.Requested, row.Messages, 1e9/row.Rate, row.Rate, row.EventRate)
	writeCosts(&b, row)
	fmt.Fprintf(&b, " %.1f peak-RSS-MiB %.1f broker-peak-RSS-MiB\n", float64(row.PeakRSS)/(1<<20), float64(r.BrokerPeakRSS)/(1<<20))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write benchmark lines: %w", err)
	}
	return nil
}
