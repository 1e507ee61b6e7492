package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
)

// partitionConsumer is the strictly ordered loop of one assigned partition
// in one generation.
type partitionConsumer struct {
	w         *Worker
	gen       *kafka.Generation
	commits   *offsetCommitter // the generation's, shared by its partitions
	partition int
	start     int64 // the committed offset (next to read) or kafka.FirstOffset
	// stop ends when the worker is shutting down: a failing batch is then
	// tried no more (see process), since finishing it is not draining.
	stop context.Context
	// repeats writes the loop's recurring failures with backoff; cleared
	// whenever the partition moves again.
	repeats *logging.Suppressor
	// state is what the monitor and readiness see of this loop.
	state *partitionState
}

// run fetches, handles and commits messages in order until the generation
// ends or the worker stops. On stop it finishes the in-flight message,
// commits it, reports drained, and keeps the generation open until the
// group closes it, so that the other partitions can finish theirs too.
func (pc *partitionConsumer) run(genCtx, stop, hardStop context.Context, drained *drainGroup) {
	var once sync.Once
	markDrained := func() { once.Do(drained.done) }
	defer markDrained()
	pc.stop = stop
	w := pc.w
	log := w.logger.With("partition", pc.partition, "generation", pc.gen.ID)
	pc.repeats = logging.NewSuppressor(log)
	pc.state = w.own(pc.partition)
	defer w.drop(pc.partition, pc.state)

	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     w.cfg.Brokers,
		Topic:       w.cfg.Topic,
		Partition:   pc.partition,
		Dialer:      w.cfg.Dialer,
		MinBytes:    w.cfg.MinBytes,
		MaxBytes:    w.cfg.MaxBytes,
		MaxWait:     w.cfg.MaxWait,
		Logger:      kafkaLogger(log, slog.LevelDebug, nil),
		ErrorLogger: kafkaLogger(log, slog.LevelWarn, pc.repeats),
		// No lag polling: the lag metric comes from the fetched messages'
		// high-water marks, and a poll cut short by a rebalance is noise.
		ReadLagInterval: -1,
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
	var held heldMessages
	committed := int64(-1) // the last offset this loop offered to the committer
	// commitUpTo offers the committer everything before the first held
	// message, or the whole of last when nothing is held; the committer
	// commits it in the background, never making the loop wait (see
	// offsetCommitter). It reports false when nothing more may be
	// committed in this generation.
	commitUpTo := func(last kafka.Message) bool {
		next := last.Offset + 1
		if !held.empty() {
			next = held.msgs[0].Offset
		}
		if next <= committed {
			return true
		}
		if err := w.fault(procCtx, FaultBeforeCommit); err != nil {
			return false // a simulated crash: the offset stays uncommitted
		}
		pc.commits.Offer(pc.partition, next)
		committed = next
		var oldest *kafka.Message
		if !held.empty() {
			oldest = &held.msgs[0]
		}
		w.advanced(pc.state, next, oldest)
		if last.HighWaterMark > 0 {
			w.metrics.SetConsumerLag(pc.partition, max(last.HighWaterMark-next, 0))
		}
		return true
	}
	var last kafka.Message
	// Once stopping, fetch nothing more, even what is buffered.
	for stop.Err() == nil {
		var msg kafka.Message
		var err error
		if held.empty() {
			msg, err = reader.FetchMessage(fetchCtx)
		} else {
			// Look at the held messages again soon, whether or not more
			// messages come.
			msg, err = fetchWithin(fetchCtx, reader, inFlightPoll.Delay(held.polls))
			if errors.Is(err, context.DeadlineExceeded) && fetchCtx.Err() == nil {
				held.polls++
				if !pc.recheck(procCtx, &held) || !commitUpTo(last) {
					break
				}
				continue
			}
		}
		if err != nil {
			if fetchCtx.Err() != nil {
				break
			}
			w.metrics.ProcessingError(metrics.StageFetch)
			pc.repeats.Log(fetchCtx, slog.LevelWarn, "fetch failed: "+err.Error(), "fetch failed", "error", err.Error())
			if !w.cfg.Backoff.Wait(fetchCtx, fetchFailures) {
				break
			}
			fetchFailures++
			continue
		}
		fetchFailures = 0
		pc.repeats.Clear(fetchCtx)
		batch = append(batch[:0], msg)
		for len(batch) < w.cfg.BatchMax {
			more, ok := fetchBuffered(fetchCtx, reader)
			if !ok {
				break
			}
			batch = append(batch, more)
		}
		w.holding(pc.state, batch[0])
		states := make([]pipeline.MessageState, len(batch))
		if !pc.process(procCtx, batch, states, held.room(w.cfg.BatchMax)) {
			break // generation ended or shutdown cap: commit nothing more
		}
		// The messages held before this batch: their claims may be
		// settled by now.
		if !held.empty() && !pc.recheck(procCtx, &held) {
			break
		}
		held.add(batch, states)
		last = batch[len(batch)-1]
		if !commitUpTo(last) {
			break
		}
	}
	// Stopping: the held messages are in flight too; finish them, then
	// commit.
	for stop.Err() != nil && !held.empty() && procCtx.Err() == nil {
		if !inFlightPoll.Wait(procCtx, held.polls) {
			break
		}
		held.polls++
		if !pc.recheck(procCtx, &held) || !commitUpTo(last) {
			break
		}
	}
	if stop.Err() != nil && committed >= 0 && procCtx.Err() == nil {
		// Stopping: commit what this loop finished now, not at the next
		// interval (the generation's end commits it too, should this
		// fail).
		pc.commit(procCtx, log, committed)
	}
	markDrained()
	if stop.Err() != nil {
		// Keep the generation open until the group closes it; returning now
		// would end it under the other partitions' in-flight messages.
		<-genCtx.Done()
	}
}

// heldMessages are a partition's messages that wait for a claim another
// worker is settling right now (pipeline.ErrClaimInFlight), in offset
// order, with what their attempts learnt. A duplicate of an event moves no money of
// its own: its outcome is the claim's, settled by the claim's maker. So
// the partition goes on handling the messages after it, in order, while
// it waits, and commits nothing past the first held message until that
// claim is settled.
type heldMessages struct {
	msgs   []kafka.Message
	states []pipeline.MessageState
	polls  int // looks since the oldest held message was held
}

func (h *heldMessages) empty() bool { return len(h.msgs) == 0 }

// room reports whether more messages may be held: at most limit (the
// batch size) are, beyond which the partition waits in place.
func (h *heldMessages) room(limit int) bool { return len(h.msgs) < limit }

// add holds the messages of batch that are not done.
func (h *heldMessages) add(batch []kafka.Message, states []pipeline.MessageState) {
	if h.empty() {
		h.polls = 0
	}
	for i := range batch {
		if !states[i].Done() {
			h.msgs = append(h.msgs, batch[i])
			h.states = append(h.states, states[i])
		}
	}
}

// drop removes the messages that are done.
func (h *heldMessages) drop() {
	n := 0
	for i := range h.msgs {
		if !h.states[i].Done() {
			h.msgs[n], h.states[n] = h.msgs[i], h.states[i]
			n++
		}
	}
	clear(h.msgs[n:])
	h.msgs, h.states = h.msgs[:n], h.states[:n]
	if n == 0 {
		h.polls = 0
	}
}

// recheck handles the held messages again and drops those that are done.
// It reports false when ctx ended first.
func (pc *partitionConsumer) recheck(ctx context.Context, h *heldMessages) bool {
	if !pc.process(ctx, h.msgs, h.states, true) {
		return false
	}
	h.drop()
	return true
}

// process retries the batch in place until every message's outcome is
// durable, or, when mayHold, until the only messages not done wait for a
// claim another worker is settling (the caller holds them; see
// heldMessages). It reports false when ctx ended first, or when an attempt
// failed once the worker is stopping: nothing may be committed. A shutdown
// finishes the attempts under way; it does not wait out retries of a
// message that is failing (it stays uncommitted and is redelivered to the
// partition's next owner), so a stuck partition cannot hold the shutdown to
// its cap.
func (pc *partitionConsumer) process(ctx context.Context, batch []kafka.Message, states []pipeline.MessageState, mayHold bool) bool {
	w := pc.w
	// The backoff between failed attempts ends at ctx's end or at stop.
	retryCtx, cancelRetry := context.WithCancel(ctx)
	defer cancelRetry()
	if pc.stop != nil {
		defer context.AfterFunc(pc.stop, cancelRetry)()
	}
	polls, failures := 0, 0
	for {
		err := w.handler.Handle(ctx, batch, states)
		if err == nil {
			if failures > 0 {
				pc.repeats.Clear(ctx)
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, pipeline.ErrClaimInFlight) {
			// Routine: another worker is settling the claim right now and
			// will be done in milliseconds.
			w.waiting(pc.state, err)
			if mayHold {
				return true
			}
			if !inFlightPoll.Wait(ctx, polls) {
				return false
			}
			polls++
			continue
		}
		w.metrics.ProcessingError(pipeline.StageOf(err))
		w.attemptFailed(pc.state, err)
		const msg = "messages not handled; retrying in place"
		pc.repeats.Log(ctx, slog.LevelWarn, msg+": "+string(pipeline.StageOf(err))+": "+err.Error(), msg, "first_offset", batch[0].Offset,
			"messages", len(batch), "attempt", failures+1, "stage", string(pipeline.StageOf(err)), "error", err.Error())
		if !w.cfg.Backoff.Wait(retryCtx, failures) || pc.stopping() {
			if pc.stopping() {
				w.logger.Info("stopping: failing messages left uncommitted for redelivery", "partition", pc.partition,
					"first_offset", batch[0].Offset, "messages", len(batch))
			}
			return false
		}
		failures++
	}
}

// stopping reports whether the worker is shutting down.
func (pc *partitionConsumer) stopping() bool { return pc.stop != nil && pc.stop.Err() != nil }

// inFlightPoll paces the looks at a claim that another worker is settling
// (pipeline.ErrClaimInFlight): its settlement commits within milliseconds,
// and the whole partition waits for it, so the first looks come quickly. Each look
// is one claim lookup of the messages still waiting; the wait for another
// worker's claim ends at pipeline.InFlightGrace whatever happens, and a
// Shouqianba refund held for its trade's payment at
// pipeline.Pipeline.MerchantlessHold.
var inFlightPoll = Backoff{Min: 2 * time.Millisecond, Max: 20 * time.Millisecond}

// fetchBuffered returns a message the reader already has, waiting at most
// a moment: batching must not add waiting at low load.
func fetchBuffered(ctx context.Context, r *kafka.Reader) (kafka.Message, bool) {
	m, err := fetchWithin(ctx, r, 300*time.Microsecond)
	return m, err == nil
}

// fetchWithin fetches the next message, waiting at most d; on timeout the
// error is context.DeadlineExceeded and no message is lost.
func fetchWithin(ctx context.Context, r *kafka.Reader, d time.Duration) (kafka.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return r.FetchMessage(ctx)
}

// commit commits next (the offset after the handled message: Kafka's
// committed offset is the next one to read) for this partition now, with
// whatever the other partitions offered, retrying until it succeeds or the
// generation ends. Committing it also commits everything before it on the
// partition.
func (pc *partitionConsumer) commit(ctx context.Context, log *slog.Logger, next int64) bool {
	w := pc.w
	for attempt := 0; ; attempt++ {
		err := pc.commits.Commit(pc.partition, next)
		if err == nil {
			return true
		}
		w.metrics.ProcessingError(metrics.StageCommit)
		if generationOver(err) || ctx.Err() != nil {
			// Expected at a rebalance: the partition's next owner handles
			// the message again, and its outcome is already durable.
			log.Debug("offset not committed: generation over", "offset", next, "error", err.Error())
			return false
		}
		const msg = "offset commit failed; retrying"
		pc.repeats.Log(ctx, slog.LevelWarn, msg+": "+err.Error(), msg, "offset", next, "attempt", attempt+1, "error", err.Error())
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
