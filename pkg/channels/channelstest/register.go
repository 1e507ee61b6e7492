package channelstest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/internal/registry"
)

// Bodies builds the callbacks of one channel for tests: what NewTrade,
// PaymentEnvelope and RefundEnvelope ask of a channel. Every channel of
// channels.All() has one (TestBodiesCoverRegistry checks the built-in
// ones; Register takes one with each channel it adds).
type Bodies struct {
	// TradeNo is a realistic, unique channel trade number for seq.
	TradeNo func(seq int) string
	// Payment is the payment notification of t (the Kafka value).
	Payment func(t Trade, d Delivery) []byte
	// Refund is the successful refund notification of r on t.
	Refund func(t Trade, r Refund, d Delivery) []byte
}

var (
	bodiesMu sync.RWMutex
	bodies   = map[channels.Channel]Bodies{
		channels.WeChat: {
			TradeNo: func(seq int) string { return fmt.Sprintf("42000022112024060%012d", seq) },
			Payment: WeChatPayment,
			Refund:  func(t Trade, r Refund, d Delivery) []byte { return WeChatRefund(t, r, "SUCCESS", d) },
		},
		channels.Alipay: {
			TradeNo: func(seq int) string { return fmt.Sprintf("2024060122001439%012d", seq) },
			Payment: AlipayPayment,
			Refund:  AlipayRefund,
		},
		channels.SQB: {
			TradeNo: func(seq int) string { return fmt.Sprintf("789325%010d", seq) },
			Payment: SQBPayment,
			Refund:  SQBRefund,
		},
	}
)

// BodiesOf returns the test-body builders of ch and whether it has any.
func BodiesOf(ch channels.Channel) (Bodies, bool) {
	bodiesMu.RLock()
	defer bodiesMu.RUnlock()
	b, ok := bodies[ch]
	return b, ok
}

// mustBodies is BodiesOf that panics on a channel without builders: a
// test's own mistake.
func mustBodies(ch channels.Channel) Bodies {
	b, ok := BodiesOf(ch)
	if !ok {
		panic("channelstest: unknown channel " + string(ch))
	}
	return b
}

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
	remove, err := registry.Register(spec)
	if err != nil {
		tb.Fatalf("channelstest.Register: %v", err)
		return
	}
	bodiesMu.Lock()
	bodies[spec.Code] = b
	bodiesMu.Unlock()
	tb.Cleanup(func() {
		bodiesMu.Lock()
		delete(bodies, spec.Code)
		bodiesMu.Unlock()
		remove()
	})
}
