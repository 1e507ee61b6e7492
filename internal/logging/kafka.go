package logging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/segmentio/kafka-go"
)

// KafkaLogger adapts one of kafka-go's loggers to slog: each line is a
// record at level with component=kafka. A line whose error says only that
// an operation was cancelled (a reader closed or a generation ended at a
// rebalance, a shutdown) is DEBUG whatever the level: it is expected, not a
// warning. Lines at WARN or above go through repeats, when given, so that
// a failure that keeps recurring backs off.
func KafkaLogger(logger *slog.Logger, level slog.Level, repeats *Suppressor) kafka.LoggerFunc {
	return func(format string, args ...any) {
		ctx := context.Background()
		lvl := level
		if cancelledOnly(args) {
			lvl = slog.LevelDebug
		}
		if !logger.Enabled(ctx, lvl) {
			return
		}
		msg := strings.TrimSpace(fmt.Sprintf(format, args...))
		if repeats != nil && lvl >= slog.LevelWarn {
			repeats.Log(ctx, lvl, msg, msg, "component", "kafka")
			return
		}
		logger.Log(ctx, lvl, msg, "component", "kafka")
	}
}

// cancelledOnly reports whether one of a kafka-go log line's arguments is
// an error saying that an operation was cancelled or its generation ended.
func cancelledOnly(args []any) bool {
	for _, a := range args {
		if err, ok := a.(error); ok && (errors.Is(err, context.Canceled) || errors.Is(err, kafka.ErrGenerationEnded)) {
			return true
		}
	}
	return false
}
