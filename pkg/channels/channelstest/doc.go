// Package channelstest is what tests need of the channels: the builders of
// package sample under the names the tests know them by, and Register, the
// one place a test adds a channel of its own (it needs a testing.TB, so no
// production binary can call it). Production code uses package sample.
package channelstest
