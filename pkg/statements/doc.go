// Package statements parses the channels' daily statement files (对账单)
// into one shape: a WeChat Pay trade bill (bill_type=ALL, plain or gzip,
// current 27-column and legacy 24-column headers), an Alipay trade bill
// (the zip, GBK), and for Shouqianba, which publishes no statement file, a
// file of per-order query responses (one /upay/v2/query response a line).
//
// Parsers find columns by header name, check the file against its own
// summary or footer and refuse it with the difference when they disagree,
// and turn amounts into int64 fen with the same exact decimal parsing as
// the callbacks (channels.ParseYuan), never a float. They never touch a
// database or the network: storing and reconciling statements is the
// caller's job. Facts and sources: docs/statements.md.
//
// The channels themselves are channels.Spec values in the channel
// registry (channels.All); this package cannot be named there (it imports
// channels), so it keeps one Parser per channel keyed by the Spec's code
// (parsers.go, ParserOf). TestParsersCoverRegistry fails for a registered
// channel without one, and Parse refuses such a channel by name
// (ErrNoParser).
package statements
