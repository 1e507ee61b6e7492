// Package settledpubtest checks a settled-event topic against the outbox
// that fed it, for tests: every message valid against
// docs/settled-event.schema.json, byte for byte its outbox row's value,
// with the contract's key and headers, and per trade trade_seq increasing
// on the topic.
//
// It is test machinery: production code never imports it.
package settledpubtest
