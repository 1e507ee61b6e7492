package consumer

import (
	"context"

	"github.com/paycallback/paycallback/internal/pipeline"
)

// FaultBeforeCommit is the consumer's fault point: the message is handled;
// its offset commit is next. Config.Fault is called there.
const FaultBeforeCommit pipeline.FaultPoint = "before-commit"

// fault calls Config.Fault at point, when set.
func (w *Worker) fault(ctx context.Context, point pipeline.FaultPoint) error {
	if w.cfg.Fault == nil {
		return nil
	}
	return w.cfg.Fault(ctx, point)
}
