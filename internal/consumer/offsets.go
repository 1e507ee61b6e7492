package consumer

import (
	"context"
	"log/slog"
	"sync"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/logging"
	"github.com/paycallback/paycallback/internal/metrics"
)

// generationCommits is a generation's offset committer and the count of
// its partition loops, which the committer's final flush waits for.
type generationCommits struct {
	*offsetCommitter
	loops sync.WaitGroup
}

// startCommitter starts gen's offset committer for partitions loops (see
// offsetCommitter.run): it sends the offered offsets every
// Config.CommitInterval and flushes them when gen ends, after every loop
// has called loops.Done.
func (w *Worker) startCommitter(gen *kafka.Generation, partitions int) *generationCommits {
	gc := &generationCommits{offsetCommitter: newOffsetCommitter(w.cfg.Topic, gen.CommitOffsets)}
	gc.interval = w.cfg.CommitInterval
	log := w.logger.With("generation", gen.ID)
	repeats := logging.NewSuppressor(log)
	gc.answered = func(offsets map[int]int64, err error) {
		ctx := context.Background()
		if err == nil {
			repeats.Clear(ctx)
			return
		}
		w.metrics.ProcessingError(metrics.StageCommit)
		if generationOver(err) {
			// Expected at a rebalance: the partitions' next owners handle
			// those messages again, and their outcomes are durable.
			log.Debug("offsets not committed: generation over", "partitions", len(offsets), "error", err.Error())
			return
		}
		const msg = "offset commit failed; retrying"
		repeats.Log(ctx, slog.LevelWarn, msg+": "+err.Error(), msg, "partitions", len(offsets), "error", err.Error())
	}
	gc.loops.Add(partitions)
	gen.Start(func(genCtx context.Context) { gc.run(genCtx, &gc.loops, w.cfg.Backoff) })
	return gc
}
