// Package wechat is one payment channel, WeChat Pay API v3 (WECHAT): JSON notifications whose resource is
// AES-256-GCM encrypted under the tenant's APIv3 key, refunds reported one
// by one.
//
// It holds everything the worker knows of the channel: its Spec (code,
// decoder, refund model, merchant fields and the facts the rest of the
// worker asks: see channels.Spec), its statement parser, its active-query
// client (query*.go: request signing, answer verification and reading,
// docs/queries.md), its realistic sample callbacks, statements and query
// answers, its tests, fuzz targets and published samples
// (testdata/published/README.md and testdata/query/SOURCES.md name their
// sources). Package allchannels registers it; nothing else names it. The
// wire format and its traps are described in docs/channels.md.
//
// Like package channels, it must never hold state, do I/O, log, read the
// environment or clock (the query client takes the time and nonce it
// signs with, and the key bytes, from its caller), or import anything
// that talks to a database.
package wechat
