package logging

import (
	"io"
	"log/slog"
)

// New returns the process logger: JSON lines on w when format is "json",
// slog's text format otherwise, dropping records below level. Durations are
// written as Go duration strings ("1.5s") in both formats, also inside
// groups (slog's JSON handler alone would write nanoseconds).
func New(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationString is the handlers' ReplaceAttr: a duration becomes its
// String form. The handler calls it for every attribute that is not a
// group, at any depth, after resolving LogValuers.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
