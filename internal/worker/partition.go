package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/metrics"
)

// partitionConsumer is the strictly ordered loop of one assigned partition
// in one generation.
type partitionConsumer struct {
	w         *Worker
	gen       *kafka.Generation
	commits   *offsetCommitter // the generation's, shared by its partitions
	partition int
	start     int64 // the committed offset (next to read) or kafka.FirstOffset
}

// run fetches, handles and commits messages in order until the generation
// ends or the worker stops. On stop it finishes the in-flight message,
// commits it, reports drained, and keeps the generation open until the
// group closes it, so that the other partitions can finish theirs too.
func (pc *partitionConsumer) run(genCtx, stop, hardStop context.Context, drained *drainGroup) {
	var once sync.Once
	markDrained := func() { once.Do(drained.done) }
	defer markDrained()
	w := pc.w
	log := w.logger.With("partition", pc.partition, "generation", pc.gen.ID)
	defer w.dropPartition(pc.partition)
	defer w.metrics.DeleteConsumerLag(pc.partition)

	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     w.cfg.Brokers,
		Topic:       w.cfg.Topic,
		Partition:   pc.partition,
		Dialer:      w.cfg.Dialer,
		MinBytes:    w.cfg.MinBytes,
		MaxBytes:    w.cfg.MaxBytes,
		MaxWait:     w.cfg.MaxWait,
		Logger:      kafka.LoggerFunc(w.kafkaLog(-8)), // below debug: kafka-go is chatty
		ErrorLogger: kafka.LoggerFunc(w.kafkaLog(4)),
	})
	defer reader.Close()
	w.stats.add(pc.partition, reader)
	defer w.stats.remove(pc.partition, reader)
	if err := reader.SetOffset(pc.start); err != nil {
		log.Error("set start offset", "offset", pc.start, "error", err.Error())
		return
	}
	log.Debug("partition assigned", "start", pc.start)

	// Fetching stops when the generation ends or the worker stops;
	// processing and committing only when the generation ends or the
	// shutdown cap passes.
	fetchCtx, cancelFetch := context.WithCancel(genCtx)
	defer cancelFetch()
	go func() {
		select {
		case <-stop.Done():
			cancelFetch()
		case <-fetchCtx.Done():
		}
	}()
	procCtx, cancelProc := context.WithCancel(genCtx)
	defer cancelProc()
	go func() {
		select {
		case <-hardStop.Done():
			cancelProc()
		case <-procCtx.Done():
		}
	}()

	fetchFailures := 0
	batch := make([]kafka.Message, 0, w.cfg.BatchMax)
	// Once stopping, fetch nothing more, even what is buffered.
	for stop.Err() == nil {
		msg, err := reader.FetchMessage(fetchCtx)
		if err != nil {
			if fetchCtx.Err() != nil {
				break
			}
			w.metrics.ProcessingError(metrics.StageFetch)
			log.Warn("fetch failed", "error", err.Error())
			if !w.cfg.Backoff.Wait(fetchCtx, fetchFailures) {
				break
			}
			fetchFailures++
			continue
		}
		fetchFailures = 0
		batch = append(batch[:0], msg)
		for len(batch) < w.cfg.BatchMax {
			more, ok := fetchBuffered(fetchCtx, reader)
			if !ok {
				break
			}
			batch = append(batch, more)
		}
		if !pc.process(procCtx, log, batch) {
			break // generation ended or shutdown cap: commit nothing more
		}
		if err := w.pipeline.Fault.at(procCtx, FaultBeforeCommit); err != nil {
			break // a simulated crash: the offset stays uncommitted
		}
		last := batch[len(batch)-1]
		if !pc.commit(procCtx, log, last.Offset+1) {
			break
		}
		if last.HighWaterMark > 0 {
			w.metrics.SetConsumerLag(pc.partition, max(last.HighWaterMark-last.Offset-1, 0))
		}
	}
	markDrained()
	if stop.Err() != nil {
		// Keep the generation open until the group closes it; returning now
		// would end it under the other partitions' in-flight messages.
		<-genCtx.Done()
	}
}

// process retries the batch in place until every message's outcome is
// durable. It reports false when ctx ended first: nothing may be committed.
// A batch of one with BatchMax 1 takes the per-message pipeline.
func (pc *partitionConsumer) process(ctx context.Context, log *slog.Logger, batch []kafka.Message) bool {
	w := pc.w
	states := make([]MessageState, len(batch))
	var since time.Time
	polls, failures := 0, 0
	for {
		var err error
		if w.cfg.BatchMax == 1 {
			err = w.pipeline.Handle(ctx, batch[0], &states[0])
		} else {
			err = w.pipeline.HandleBatch(ctx, batch, states)
		}
		if err == nil {
			if !since.IsZero() {
				w.setRetrying(pc.partition, time.Time{})
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, errClaimInFlight) {
			// Routine: another worker is settling the claim right now and
			// will be done in milliseconds; look again soon.
			if !inFlightPoll.Wait(ctx, polls) {
				return false
			}
			polls++
			continue
		}
		w.metrics.ProcessingError(StageOf(err))
		if since.IsZero() {
			since = time.Now()
			w.setRetrying(pc.partition, since)
		}
		log.Warn("messages not handled; retrying in place", "first_offset", batch[0].Offset,
			"messages", len(batch), "attempt", failures+1, "stage", string(StageOf(err)), "error", err.Error())
		if !w.cfg.Backoff.Wait(ctx, failures) {
			return false
		}
		failures++
	}
}

// inFlightPoll paces the looks at a claim that another worker is settling
// (errClaimInFlight): its settlement commits within milliseconds, and the
// whole partition waits for it, so the first looks come quickly. Each look
// is one claim lookup of the messages still waiting; the wait ends at
// InFlightGrace whatever happens.
var inFlightPoll = Backoff{Min: 2 * time.Millisecond, Max: 20 * time.Millisecond}

// fetchBuffered returns a message the reader already has, waiting at most
// a moment: batching must not add waiting at low load.
func fetchBuffered(ctx context.Context, r *kafka.Reader) (kafka.Message, bool) {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Microsecond)
	defer cancel()
	m, err := r.FetchMessage(ctx)
	return m, err == nil
}

// commit commits next (the offset after the handled message: Kafka's
// committed offset is the next one to read) for this partition, retrying
// until it succeeds or the generation ends. Committing it also commits
// everything before it on the partition.
func (pc *partitionConsumer) commit(ctx context.Context, log *slog.Logger, next int64) bool {
	w := pc.w
	for attempt := 0; ; attempt++ {
		err := pc.commits.Commit(pc.partition, next)
		if err == nil {
			w.setCommitted(pc.partition, next)
			return true
		}
		w.metrics.ProcessingError(metrics.StageCommit)
		if generationOver(err) || ctx.Err() != nil {
			log.Warn("offset not committed: generation over", "offset", next, "error", err.Error())
			return false
		}
		log.Warn("offset commit failed; retrying", "offset", next, "attempt", attempt+1, "error", err.Error())
		if !w.cfg.Backoff.Wait(ctx, attempt) {
			return false
		}
	}
}

// generationOver reports commit errors that mean this member no longer owns
// the partition in this generation.
func generationOver(err error) bool {
	return errors.Is(err, kafka.RebalanceInProgress) || errors.Is(err, kafka.IllegalGeneration) ||
		errors.Is(err, kafka.UnknownMemberId) || errors.Is(err, kafka.ErrGenerationEnded)
}
