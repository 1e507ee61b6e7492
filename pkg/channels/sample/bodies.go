package sample

import (
	"errors"
	"fmt"
	"sync"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/internal/registry"
	"github.com/paycallback/paycallback/pkg/statements"
)

// Bodies builds the callbacks of one channel: what NewTrade,
// PaymentEnvelope and RefundEnvelope ask of a channel. Every registered
// channel has one (allchannels registers the built-in channels' and
// channelstest.Register a test channel's).
type Bodies struct {
	// TradeNo is a realistic, unique channel trade number for seq.
	TradeNo func(seq int) string
	// Payment is the payment notification of t (the Kafka value).
	Payment func(t Trade, d Delivery) []byte
	// Refund is the successful refund notification of r on t.
	Refund func(t Trade, r Refund, d Delivery) []byte
	// StatementLines (optional for a test's own channel that has no
	// statement) are the lines the channel's statements report for events, decoded callbacks of the channel, each key once, in any
	// order (statementsample.FromEvents sorts them).
	StatementLines func(events []channels.Event) ([]statements.Line, error)
	// Statement (optional likewise) is a statement file of the channel
	// holding lines, in the
	// layout its statement parser reads (one day's for a channel whose
	// files are daily).
	Statement func(lines []statements.Line) ([]byte, error)
}

var (
	bodiesMu sync.RWMutex
	bodies   = map[channels.Channel]Bodies{}
)

func init() { registry.Bodies = register }

// BodiesOf returns the builders of ch and whether it has any.
func BodiesOf(ch channels.Channel) (Bodies, bool) {
	bodiesMu.RLock()
	defer bodiesMu.RUnlock()
	b, ok := bodies[ch]
	return b, ok
}

// mustBodies is BodiesOf that panics on a channel without builders: the
// caller's own mistake.
func mustBodies(ch channels.Channel) Bodies {
	b, ok := BodiesOf(ch)
	if !ok {
		panic("sample: unknown channel " + string(ch))
	}
	return b
}

var errBodiesRegistered = errors.New("sample bodies already registered")

// register adds the Bodies v for code and returns the function that
// removes them again; it is reached only through pkg/internal/registry.
func register(code string, v any) (func(), error) {
	b, ok := v.(Bodies)
	if !ok {
		return nil, fmt.Errorf("register sample bodies %s: %T is not a sample.Bodies", code, v)
	}
	if b.TradeNo == nil || b.Payment == nil || b.Refund == nil {
		return nil, fmt.Errorf("register sample bodies %s: every Bodies builder is required", code)
	}
	ch := channels.Channel(code)
	bodiesMu.Lock()
	defer bodiesMu.Unlock()
	if _, dup := bodies[ch]; dup {
		return nil, fmt.Errorf("register sample bodies: %w: %s", errBodiesRegistered, code)
	}
	bodies[ch] = b
	return func() {
		bodiesMu.Lock()
		defer bodiesMu.Unlock()
		delete(bodies, ch)
	}, nil
}
