// Package conformance is the suite every registered payment channel
// passes: its tests range over the channel registry (channels.All) and run
// the same checks on each, the built-in channels and a fake fourth one
// (FAKEPAY) that a test adds through channelstest.Register alone. A
// channel is conformant when its sample callbacks decode (a payment, a
// refund, and a redelivery with the same key and fingerprint), settle
// into a ledger that reconciles clean in every arrival order (MariaDB,
// internal/ledgertest), its sample statement parses back into the lines
// it was written from and is imported only into the day it is of, each
// line once, and it shows under its own metric label and in
// `consumer dlq show`.
//
// The package holds tests only; it must never be imported.
package conformance
