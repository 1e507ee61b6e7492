package sim_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sim"
)

var (
	seedFlag   = flag.Uint64("sim.seed", 0, "run this one seed (0: the fixed CI set, or -sim.seeds from -sim.start)")
	seedsFlag  = flag.Int("sim.seeds", 0, "run this many seeds from -sim.start instead of the fixed set")
	startFlag  = flag.Uint64("sim.start", 1000, "first seed of -sim.seeds")
	repeatFlag = flag.Int("sim.repeat", 1, "run each seed this many times (timing varies between runs)")
)

// ciSeeds is the fixed set `make test` runs: seeds 1 to 24, which between
// them inject every fault kind on both pipelines and both orphan thresholds,
// in about a minute and a half under -race.
var ciSeeds = func() []uint64 {
	out := make([]uint64, 24)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}()

// totals aggregates every run of the test binary, printed at the end.
var totals struct {
	sync.Mutex
	runs, faults, messages, events, recounted, lost, doubled int
	byKind                                                   map[sim.FaultKind]int
}

func seeds() []uint64 {
	if v := os.Getenv("SIM_SEED"); v != "" && *seedFlag == 0 {
		_, _ = fmt.Sscan(v, seedFlag)
	}
	switch {
	case *seedFlag != 0:
		return []uint64{*seedFlag}
	case *seedsFlag > 0:
		out := make([]uint64, *seedsFlag)
		for i := range out {
			out[i] = *startFlag + uint64(i)
		}
		return out
	default:
		return ciSeeds
	}
}

// TestSim plays each seed's stream and fault schedule and checks the
// invariants. A failure names the seed and the schedule; `make sim SEED=n`
// plays it again.
func TestSim(t *testing.T) {
	for _, seed := range seeds() {
		for rep := range *repeatFlag {
			t.Run(fmt.Sprintf("seed-%d/run-%d", seed, rep), func(t *testing.T) {
				stream, sch := sim.Plan(seed)
				env := sim.NewEnv(t, sch.Partitions)
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
				defer cancel()
				res, err := sim.Run(ctx, env, stream, sch)
				require.NoError(t, err, "seed %d: re-run with `make sim SEED=%d`\nschedule: %s", seed, seed, sch)
				r := res.Report
				t.Logf("seed %d: %d messages, %d events, %d faults %v, %d workers, recounted %d, lost %d, doubled %d, %s",
					seed, r.Messages, r.Events, res.Faults(), res.Injected, res.Workers, r.Recounted, r.Lost, r.Doubled, res.Elapsed.Round(time.Millisecond))
				record(res)
				require.NoError(t, r.Err(), "seed %d: re-run with `make sim SEED=%d`\nschedule: %s\ninjected: %v", seed, seed, sch, res.Injected)
			})
		}
	}
}

func record(res sim.Result) {
	totals.Lock()
	defer totals.Unlock()
	if totals.byKind == nil {
		totals.byKind = map[sim.FaultKind]int{}
	}
	totals.runs++
	totals.faults += res.Faults()
	for k, v := range res.Injected {
		totals.byKind[k] += v
	}
	totals.messages += res.Report.Messages
	totals.events += res.Report.Events
	totals.recounted += res.Report.Recounted
	totals.lost += res.Report.Lost
	totals.doubled += res.Report.Doubled
}

// quiet drops the MySQL driver's own log lines: the faults make it print
// one per killed connection, and the workers' errors already say it.
type quiet struct{}

func (quiet) Print(...any) {}

func TestMain(m *testing.M) {
	flag.Parse()
	_ = mysql.SetLogger(quiet{})
	code := m.Run()
	totals.Lock()
	if totals.runs > 0 {
		kinds := make([]string, 0, len(totals.byKind))
		for k, v := range totals.byKind {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(kinds)
		fmt.Printf("sim: %d runs, %d messages, %d distinct events, %d faults injected (%s), %d messages handled again, lost %d, posted twice %d\n",
			totals.runs, totals.messages, totals.events, totals.faults, strings.Join(kinds, " "), totals.recounted, totals.lost, totals.doubled)
	}
	totals.Unlock()
	os.Exit(code)
}
