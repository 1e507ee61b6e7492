// Package demo generates a realistic stream of channel callbacks and runs the
// whole worker against an in-process Kafka (kfake) and the embedded SQLite
// database, then summarises what happened. Beside the stream it registers
// WeChat barcode payments that never call back and runs the querier
// in-process, apart from the worker, against a fake WeChat
// (internal/fakechannel), so that the summary shows them recovered by query.
// `consumer demo` is its front end; the end-to-end tests reuse the stream.
// It never talks to a real channel: its keys and its channel are fakes.
package demo
