// Package alipay is one payment channel, Alipay trade_status_sync notifications (ALIPAY): form-urlencoded,
// amounts in yuan strings, refunds reported as the cumulative refunded.
//
// It holds everything the worker knows of the channel: its Spec (code,
// decoder, refund model, merchant fields and the facts the rest of the
// worker asks: see channels.Spec), its statement parser, its query client
// (signed requests, verified and decoded answers: docs/queries.md), its
// realistic sample callbacks, answers and statements, its tests, fuzz
// targets and published samples (testdata/published/README.md and
// testdata/query/SOURCES name their sources). Package allchannels
// registers it; nothing else names it. The wire format and its traps are
// described in docs/channels.md.
//
// Like package channels, it must never hold state, do I/O, log, read the
// environment or clock, or import anything that talks to a database.
package alipay
