package settled_test

import (
	"fmt"

	"github.com/paycallback/paycallback/pkg/settled"
)

// A downstream consumer applies each trade's events once, in trade_seq
// order: the topic delivers at least once, so it drops a trade_seq it has
// already applied (a redelivery or a republish), and a gap means an event
// it has not seen yet. Here the applied sequence numbers are kept in a map;
// a real service keeps them with what it applied, in one transaction.
func Example_dropSeenTradeSeq() {
	applied := map[string]int64{} // message key → last trade_seq applied
	apply := func(value []byte) {
		e, err := settled.Decode(value)
		if err != nil {
			fmt.Println("refused:", err)
			return
		}
		last := applied[e.MessageKey()]
		switch {
		case e.TradeSeq <= last:
			fmt.Printf("drop %s seq %d: already applied\n", e.EventID, e.TradeSeq)
			return
		case e.TradeSeq > last+1:
			fmt.Printf("wait: %s seq %d after %d\n", e.MessageKey(), e.TradeSeq, last)
			return
		}
		applied[e.MessageKey()] = e.TradeSeq
		fmt.Printf("apply %s %d fen, order %s\n", e.EventType, e.Amount, e.OrderStatus)
	}

	pay, _ := settled.Encode(payment())
	ref, _ := settled.Encode(refund())
	for _, v := range [][]byte{pay, pay, ref, pay, ref} {
		apply(v)
	}
	// Output:
	// apply PAYMENT_RECEIVED 1200 fen, order PAID
	// drop 1001:WECHAT:4200000000202612050000000001:PAYMENT_RECEIVED seq 1: already applied
	// apply REFUND_SUCCEEDED 300 fen, order PARTIALLY_REFUNDED
	// drop 1001:WECHAT:4200000000202612050000000001:PAYMENT_RECEIVED seq 1: already applied
	// drop 1001:WECHAT:4200000000202612050000000001:REFUND_SUCCEEDED:rf:1 seq 2: already applied
}
