package channelstest

import (
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels" // every test that builds callbacks has the built-in channels
	"github.com/paycallback/paycallback/pkg/internal/registry"
	"github.com/paycallback/paycallback/pkg/statements"
)

// Register adds spec to the channel registry (channels.All, Lookup) and
// b to this package's builders for the rest of the test, and removes both
// when it ends (tb.Cleanup). It is the only way to add a channel at run
// time, and it needs a testing.TB, which only a test binary has: a
// production binary cannot register a channel, by accident or otherwise.
// It fails the test on a spec that does not validate (channels.Spec.Validate),
// a code already registered, or builders missing.
//
// While it is registered every package sees the channel, so call it from a
// test that does not run in parallel (t.Parallel tests start only after
// every sequential test of the package has finished).
func Register(tb testing.TB, spec channels.Spec, b Bodies) {
	tb.Helper()
	if b.TradeNo == nil || b.Payment == nil || b.Refund == nil {
		tb.Fatalf("channelstest.Register %s: every Bodies builder is required", spec.Code)
		return
	}
	remove, err := registry.Channel(spec)
	if err != nil {
		tb.Fatalf("channelstest.Register: %v", err)
		return
	}
	tb.Cleanup(remove)
	removeBodies, err := registry.Bodies(string(spec.Code), b)
	if err != nil {
		tb.Fatalf("channelstest.Register: %v", err)
		return
	}
	tb.Cleanup(removeBodies)
}

// RegisterParser adds p as the statement parser of the channel code for
// the rest of the test and removes it when the test ends, like Register:
// with both, a test's own channel is whole (its statements parse and
// reconcile as a built-in channel's do). It fails the test on a parser
// without Parse or Refunds, or a code that has one already.
func RegisterParser(tb testing.TB, code channels.Channel, p statements.Parser) {
	tb.Helper()
	remove, err := registry.Parser(string(code), p)
	if err != nil {
		tb.Fatalf("channelstest.RegisterParser: %v", err)
		return
	}
	tb.Cleanup(remove)
}
