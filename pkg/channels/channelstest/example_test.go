package channelstest_test

import (
	"fmt"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// A payment, a channel retry of it (different bytes) and a partial refund,
// decoded: the retry has the payment's key and fingerprint.
func Example() {
	d := channels.NewDecoder(channelstest.Keys())
	trade := channelstest.NewTrade(channels.WeChat, 42)
	stream := [][]byte{
		channelstest.PaymentEnvelope(trade, channelstest.Delivery{}),
		channelstest.PaymentEnvelope(trade, channelstest.Delivery{Attempt: 1}),
		channelstest.RefundEnvelope(trade, channelstest.Refund{No: "RF-42-1", Amount: 1000}, channelstest.Delivery{}),
	}
	fmt.Println("retry differs in bytes:", string(stream[0]) != string(stream[1]))
	for _, v := range stream {
		res, err := d.Decode(v)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(res.Event.Key, res.Event.OrderTotal, res.Event.RefundAmount, res.Event.Fingerprint[:12])
	}
	// Output:
	// retry differs in bytes: true
	// WECHAT:42000022112024060000000000042:PAYMENT_RECEIVED 2580 0 3e93b0f3c56f
	// WECHAT:42000022112024060000000000042:PAYMENT_RECEIVED 2580 0 3e93b0f3c56f
	// WECHAT:42000022112024060000000000042:REFUND_SUCCEEDED:RF-42-1 2580 1000 3d8c51a157ce
}
