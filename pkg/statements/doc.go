// Package statements is the channels' daily statement files (对账单) in
// one shape: Statement, Line, Totals, and Parse, which dispatches a file to
// its channel's Parser. The parsers live in the channel packages (a WeChat
// Pay trade bill, plain or gzip, in pkg/channels/wechat; an Alipay trade
// bill zip, GBK, in pkg/channels/alipay; for Shouqianba, which publishes
// no statement file, a file of per-order query responses in
// pkg/channels/sqb), and package allchannels registers each beside the
// channel's Spec (parsers.go, ParserOf). A Parser also says how its
// statement's refunds are compared, which lines are settled money or the
// channel's cancel, and how its merchant maps to the merchant binding,
// so the import and reconciliation ask it rather than the channel's code.
//
// Parsers find columns by header name, check the file against its own
// summary or footer and refuse it with the difference when they disagree,
// and turn amounts into int64 fen with the same exact decimal parsing as
// the callbacks (channels.ParseYuan), never a float. They never touch a
// database or the network: storing and reconciling statements is the
// caller's job. Facts and sources: docs/statements.md.
//
// A statement of a daily bill is one day (Statement.BillDay: the window
// the file states, or the Day its caller gives, every line on it), and
// holds each payment, refund or order once (Statement.CheckUnique); the
// import refuses anything else before it stores a line.
//
// TestParsersCoverRegistry fails for a registered channel without a
// parser, and Parse refuses such a channel by name (ErrNoParser).
package statements
