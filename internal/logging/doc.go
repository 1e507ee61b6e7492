// Package logging builds the process logger and keeps repeated failures
// from flooding it. Every log line of the binary, the libraries' included,
// goes through the one *slog.Logger that New returns; this package never
// writes anywhere but the writer it is given, and never logs on its own.
package logging
