// Package sqb is one payment channel, Shouqianba upay (SQB): JSON whose values are all strings, refunds
// reported as the cumulative refunded, a CANCELED order netting its trade
// to zero.
//
// It holds everything the worker knows of the channel: its Spec (code,
// decoder, refund model, merchant fields and the facts the rest of the
// worker asks: see channels.Spec), its statement parser, its query client
// (the signed order query and its answer's reading: BuildQueryRequest,
// DecodeQueryAnswer; docs/queries.md), its realistic
// sample callbacks and statements, its tests, fuzz targets and published
// samples (testdata/published/README.md names their sources). Package
// allchannels registers it; nothing else names it. The wire format and
// its traps are described in docs/channels.md.
//
// Like package channels, it must never hold state, do I/O, log, read the
// environment or clock, or import anything that talks to a database.
package sqb
