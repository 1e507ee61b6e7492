package consumer

import (
	"context"

	"github.com/segmentio/kafka-go"

	"github.com/paycallback/paycallback/internal/pipeline"
)

// Handler is what a partition loop needs of the pipeline: a batch of its
// messages, in offset order, taken to outcomes it can tell durable;
// *pipeline.Pipeline is the implementation.
//
// Handle works on every message of msgs whose state is not Done and
// returns nil when every one is Done: the offset after the last may then be
// committed. Any error means some outcome is not durable, and the loop
// retries the messages not Done, in place, with the same states (which
// remember what earlier attempts learnt). An error wrapping only
// pipeline.ErrClaimInFlight means the messages not Done wait for another
// worker's settlement, not a failure; any other error failed in the stage
// pipeline.StageOf names. The loop never decides an outcome itself: it
// commits an offset only past messages whose state is Done.
type Handler interface {
	Handle(ctx context.Context, msgs []kafka.Message, states []pipeline.MessageState) error
}
