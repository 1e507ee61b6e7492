package demo

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
)

// Message is one Kafka message of the stream.
type Message struct {
	Key   []byte
	Value []byte
	// Note says what the message is, for logs and failing tests.
	Note string
}

// Stream is a generated stream and what it must produce.
type Stream struct {
	Messages []Message
	// Events is the number of distinct money events (payments and
	// refunds): the claims the stream must leave, all SETTLED.
	Events int
	// Trades is the number of trades.
	Trades int
	// Conflicts and Malformed are the messages that must be dead-lettered
	// as conflict and malformed.
	Conflicts int
	Malformed int
	// Paid and Refunded are the money the channels reported per tenant:
	// what the ledger must show.
	Paid     map[int64]int64
	Refunded map[int64]int64
}

// StreamOptions shape Generate's stream.
type StreamOptions struct {
	Seed   uint64
	Trades int // default 300
	// Tenants (default 1001 and 1002).
	Tenants []int64
	// NoTraps leaves out the conflicting duplicate and the malformed
	// message.
	NoTraps bool
	// ReceivedAt, when set, is every envelope's received_at (the demo sets
	// it to the start time so latency figures are meaningful).
	ReceivedAt time.Time
	// Channels are the channels trades are paid through (default every
	// registered channel, channels.All: WECHAT, ALIPAY and SQB), chosen at
	// random per trade.
	Channels []channels.Channel
	// TradePrefix is put before every trade number (e.g. "TEST…" to mark
	// a smoke test's trades); the numbers stay unique per Seed.
	TradePrefix string
	// WeChatKey, when set, returns the APIv3 key that encrypts a tenant's
	// WeChat resources (default sample.APIv3Key).
	WeChatKey func(tenantID int64) string
}

// Generate builds a stream the way the channels deliver it: every trade is
// paid, some are refunded in parts (and some in full), every notification is
// delivered one to three times (channel retries with different delivery
// fields), some duplicates carry no key and so may land on another partition
// at the same moment, some refunds arrive before their payment, and, unless
// NoTraps, one payment is re-sent with a different amount (a conflict) and
// one message is not JSON at all. The same options give the same stream.
func Generate(o StreamOptions) Stream {
	if o.Trades <= 0 {
		o.Trades = 300
	}
	if len(o.Tenants) == 0 {
		o.Tenants = []int64{1001, 1002}
	}
	chans := channels.Codes()
	if len(o.Channels) > 0 {
		chans = o.Channels
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	s := Stream{Trades: o.Trades, Paid: map[int64]int64{}, Refunded: map[int64]int64{}}

	type trade struct {
		msgs []Message
	}
	var perTrade []trade
	for i := range o.Trades {
		ch := chans[rng.IntN(len(chans))]
		t := sample.NewTrade(ch, int(o.Seed%1000)*100000+i)
		t.TradeNo = o.TradePrefix + t.TradeNo
		t.TenantID = o.Tenants[rng.IntN(len(o.Tenants))]
		var apiv3Key string
		if o.WeChatKey != nil {
			apiv3Key = o.WeChatKey(t.TenantID)
		}
		t.Total = 100 + rng.Int64N(99900) // 1.00 to 999.99 yuan
		key := []byte(fmt.Sprintf("%s:%s", ch, t.TradeNo))

		var tr trade
		deliver := func(note string, build func(d sample.Delivery) []byte) {
			copies := 1 + rng.IntN(3)
			for a := range copies {
				k := key
				if a > 0 && rng.IntN(4) == 0 {
					k = nil // a duplicate on another partition, concurrently
				}
				tr.msgs = append(tr.msgs, Message{Key: k, Value: build(sample.Delivery{Attempt: a, ReceivedAt: o.ReceivedAt, APIv3Key: apiv3Key}), Note: fmt.Sprintf("%s attempt %d", note, a)})
			}
		}
		deliver("payment "+string(key), func(d sample.Delivery) []byte { return sample.PaymentEnvelope(t, d) })
		s.Events++
		s.Paid[t.TenantID] += t.Total

		// Refunds: none for half the trades, else one to three partial
		// refunds, sometimes up to the full total.
		var cumulative int64
		if rng.IntN(2) == 0 {
			n := 1 + rng.IntN(3)
			for r := range n {
				left := t.Total - cumulative
				if left <= 0 {
					break
				}
				amount := 1 + rng.Int64N(max(left/2, 1))
				if r == n-1 && rng.IntN(3) == 0 {
					amount = left // refunded in full
				}
				cumulative += amount
				ref := sample.Refund{No: fmt.Sprintf("RF%s-%d", t.TradeNo, r+1), Amount: amount, Cumulative: cumulative}
				ref.At = t.PaidAt.Add(time.Duration(r+1) * time.Hour)
				deliver(fmt.Sprintf("refund %d of %s", r+1, key), func(d sample.Delivery) []byte {
					return sample.RefundEnvelope(t, ref, d)
				})
				s.Events++
			}
			s.Refunded[t.TenantID] += cumulative
		}
		// Some trades' notifications arrive in any order: a refund before
		// its payment, a late retry of an early one.
		if rng.IntN(5) == 0 {
			rng.Shuffle(len(tr.msgs), func(i, j int) { tr.msgs[i], tr.msgs[j] = tr.msgs[j], tr.msgs[i] })
		}
		perTrade = append(perTrade, tr)
	}
	// The first trade's refund always comes before its payment.
	if len(perTrade[0].msgs) > 1 {
		first := perTrade[0].msgs
		perTrade[0].msgs = append(first[len(first)-1:], first[:len(first)-1]...)
	}

	// Interleave trades as a busy shop would: trades overlap in time, each
	// trade's own notifications keep their relative order. Each message
	// comes from one of the earliest open trades, so the stream moves
	// forward. window holds those (up to interleaveWindow open trades, in
	// order); every trade from next on is still untouched, hence open.
	// Keeping the window rather than rescanning every trade for each
	// message keeps a million-message stream linear.
	const interleaveWindow = 8
	window := make([]int, 0, interleaveWindow)
	next := 0
	for ; next < len(perTrade) && len(window) < interleaveWindow; next++ {
		window = append(window, next)
	}
	for len(window) > 0 {
		w := rng.IntN(len(window))
		i := window[w]
		s.Messages = append(s.Messages, perTrade[i].msgs[0])
		perTrade[i].msgs = perTrade[i].msgs[1:]
		if len(perTrade[i].msgs) == 0 {
			window = append(window[:w], window[w+1:]...)
			if next < len(perTrade) {
				window = append(window, next)
				next++
			}
		}
	}

	if !o.NoTraps {
		// A payment re-sent with a different amount: same key, different
		// fingerprint, on the last registered channel.
		codes := channels.Codes()
		t := sample.NewTrade(codes[len(codes)-1], int(o.Seed%1000)*100000+o.Trades+1)
		t.TradeNo = o.TradePrefix + t.TradeNo
		t.TenantID = o.Tenants[0]
		key := []byte(fmt.Sprintf("%s:%s", t.Channel, t.TradeNo))
		s.Messages = append(s.Messages,
			Message{Key: key, Value: sample.PaymentEnvelope(t, sample.Delivery{ReceivedAt: o.ReceivedAt}), Note: "payment before a conflicting copy"})
		s.Events++
		s.Paid[t.TenantID] += t.Total
		bad := t
		bad.Total += 100
		s.Messages = append(s.Messages,
			Message{Key: key, Value: sample.PaymentEnvelope(bad, sample.Delivery{Attempt: 1, ReceivedAt: o.ReceivedAt}), Note: "conflicting payment"})
		s.Conflicts++
		s.Messages = append(s.Messages, Message{Key: []byte("WECHAT:broken"), Value: []byte(`{"tenant_id": 1001, "channel": "WECHAT", "body": `), Note: "malformed"})
		s.Malformed++
	}
	return s
}
