package app_test

import (
	"testing"
	"time"

	"github.com/paycallback/paycallback/internal/demo"
)

// TestEveryEventRacedFromTwoPartitionsSettlesOnce produces the stream twice:
// as generated, and again with every key changed, so that each trade's
// messages arrive in order on two partitions at once and every event is
// settled by two partitions racing each other (with TEST_MYSQL_NODES, on
// different nodes of the cluster). Each event leaves one SETTLED claim and
// the ledger shows what the channels reported, once.
func TestEveryEventRacedFromTwoPartitionsSettlesOnce(t *testing.T) {
	h := newHarness(t, 8)
	s := demo.Generate(demo.StreamOptions{Seed: 21, Trades: 120, NoTraps: true})
	copies := make([]demo.Message, 0, 2*len(s.Messages))
	copies = append(copies, s.Messages...)
	for _, m := range s.Messages {
		c := m
		if m.Key != nil {
			// Another key of the same trade: another partition, in order.
			c.Key = append([]byte("copy/"), m.Key...)
		}
		copies = append(copies, c)
	}
	h.produce(copies)
	h.start(nil)
	h.waitConsumed(3 * time.Minute)

	raced := s
	raced.Messages = copies
	h.checkStream(raced)
}
