package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/paycallback/paycallback/internal/consumer"
	"github.com/paycallback/paycallback/internal/pipeline"
)

// FaultKind names one kind of injected fault.
type FaultKind string

// The faults a schedule draws from.
const (
	// Crash: the worker that reaches Point for the Nth time after the fault
	// is armed blocks there, as a process dying at that boundary would; it
	// is then stopped under a tiny shutdown cap and a fresh worker started.
	Crash FaultKind = "crash"
	// DBDown: every database connection is closed and new ones refused for
	// Down.
	DBDown FaultKind = "db-down"
	// CutCommit: the connection carrying the next COMMIT is dropped right
	// after the COMMIT is forwarded, so its sender cannot know the outcome.
	CutCommit FaultKind = "cut-commit"
	// CommitErrors: the next Count OffsetCommit requests fail with Code.
	CommitErrors FaultKind = "offset-commit-errors"
	// FetchErrors: the next Count Fetch requests for the input topic fail
	// with Code on every partition asked for.
	FetchErrors FaultKind = "fetch-errors"
	// Join: an extra worker joins the group (a rebalance).
	Join FaultKind = "join"
	// Leave: the newest worker leaves the group gracefully (a rebalance);
	// never the last one.
	Leave FaultKind = "leave"
)

// Fault is one scheduled fault.
type Fault struct {
	Kind FaultKind
	// Point and Nth place a Crash.
	Point pipeline.FaultPoint
	Nth   int
	// Count and Code shape CommitErrors and FetchErrors.
	Count int
	Code  int16
	// Down is how long a DBDown lasts.
	Down time.Duration
}

func (f Fault) String() string {
	switch f.Kind {
	case Crash:
		return fmt.Sprintf("crash@%s#%d", f.Point, f.Nth)
	case DBDown:
		return fmt.Sprintf("db-down(%s)", f.Down)
	case CommitErrors, FetchErrors:
		return fmt.Sprintf("%s(%d×code %d)", f.Kind, f.Count, f.Code)
	default:
		return string(f.Kind)
	}
}

// Step is the faults applied together once a chunk of the stream has been
// consumed, before the next chunk is produced.
type Step struct {
	Faults []Fault
}

// Schedule is everything a seed decides.
type Schedule struct {
	Seed       uint64
	Trades     int
	Partitions int
	// Workers is how many workers start.
	Workers int
	// BatchMax is every worker's PAYCB_BATCH_MAX.
	BatchMax int
	// OrphanAfter is every worker's PAYCB_ORPHAN_AFTER: short, so that live
	// sweepers race live settlers, or long, so that only redelivery settles.
	OrphanAfter time.Duration
	// Chunks are the stream's cut points: chunk i is messages
	// [Chunks[i], Chunks[i+1]) (the last runs to the end). Steps[i] is
	// applied after chunk i is consumed; len(Steps) == len(Chunks)-1.
	Chunks []int
	Steps  []Step
}

var crashPoints = []pipeline.FaultPoint{pipeline.FaultAfterAcquire, pipeline.FaultAfterSettle, consumer.FaultBeforeCommit, pipeline.FaultBeforeDeadLetter}

// Kafka error codes the broker faults answer with: retriable errors that
// leave the member in its generation. (REBALANCE_IN_PROGRESS and the like
// would claim a rebalance the coordinator never starts.)
var (
	commitCodes = []int16{7, 14, 15, 16} // REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
	fetchCodes  = []int16{6, 7, 56}      // NOT_LEADER_FOR_PARTITION, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR
)

// NewSchedule returns seed's schedule for a stream of messages messages
// (len(demo.Generate(...).Messages) for the schedule's Trades: call Plan to
// get both).
func newSchedule(seed uint64, messages int, sch Schedule) Schedule {
	rng := rand.New(rand.NewPCG(seed, seed^0x5deece66d))
	steps := 3 + rng.IntN(4)
	sch.Chunks = []int{0}
	for i := 1; i <= steps; i++ {
		sch.Chunks = append(sch.Chunks, messages*i/(steps+1))
	}
	for range steps {
		var st Step
		for range 1 + rng.IntN(3) {
			st.Faults = append(st.Faults, randomFault(rng))
		}
		sch.Steps = append(sch.Steps, st)
	}
	return sch
}

func randomFault(rng *rand.Rand) Fault {
	switch rng.IntN(9) {
	case 0, 1, 2:
		p := crashPoints[rng.IntN(len(crashPoints))]
		nth := 1 + rng.IntN(5)
		if p == pipeline.FaultBeforeDeadLetter {
			nth = 1 // a stream has two dead letters
		}
		return Fault{Kind: Crash, Point: p, Nth: nth}
	case 3:
		return Fault{Kind: DBDown, Down: time.Duration(100+rng.IntN(700)) * time.Millisecond}
	case 4:
		return Fault{Kind: CutCommit}
	case 5:
		return Fault{Kind: CommitErrors, Count: 1 + rng.IntN(5), Code: commitCodes[rng.IntN(len(commitCodes))]}
	case 6:
		return Fault{Kind: FetchErrors, Count: 1 + rng.IntN(5), Code: fetchCodes[rng.IntN(len(fetchCodes))]}
	case 7:
		return Fault{Kind: Join}
	default:
		return Fault{Kind: Leave}
	}
}

// String is the schedule in one line, for a failing seed's report.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d trades=%d partitions=%d workers=%d batch-max=%d orphan-after=%s chunks=%v steps=[",
		s.Seed, s.Trades, s.Partitions, s.Workers, s.BatchMax, s.OrphanAfter, s.Chunks)
	for i, st := range s.Steps {
		if i > 0 {
			b.WriteString(" | ")
		}
		for j, f := range st.Faults {
			if j > 0 {
				b.WriteString(" ")
			}
			b.WriteString(f.String())
		}
	}
	b.WriteString("]")
	return b.String()
}
