// Package demo generates a realistic stream of channel callbacks and runs the
// whole worker against an in-process Kafka (kfake) and the embedded SQLite
// database, then summarises what happened. `consumer demo` is its front end;
// the end-to-end tests reuse the stream.
package demo
