package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// keyOn returns a message key for trade that Produce sends to partition p
// of a topic of partitions partitions: the trade's usual key, or that key
// with a suffix when the usual one hashes elsewhere (correctness must never
// depend on the key).
func keyOn(t *testing.T, tr channelstest.Trade, p, partitions int) []byte {
	t.Helper()
	base := string(tr.Channel) + ":" + tr.TradeNo
	for i := 0; i < 1000; i++ {
		k := base
		if i > 0 {
			k = fmt.Sprintf("%s#%d", base, i)
		}
		if kafkaops.PartitionOf([]byte(k), partitions) == p {
			return []byte(k)
		}
	}
	t.Fatalf("no key of %s hashes to partition %d", base, p)
	return nil
}

// TestConcurrentCumulativeRefundsOfOneTradeFromTwoPartitions: Alipay and
// Shouqianba refund callbacks carry the trade's cumulative refunded amount,
// so settling one turns it into a delta against the order row. Every
// trade's payment and refunds arrive on two partitions at once, one in
// order and the other in reverse with the payment last, round after round:
// the two partitions' batches settle the same trades concurrently. Each
// order must end with exactly the highest cumulative refunded, the ledger
// with exactly that much refunded per trade, nothing posted twice and the
// invariant checker clean.
func TestConcurrentCumulativeRefundsOfOneTradeFromTwoPartitions(t *testing.T) {
	const (
		partitions = 2
		rounds     = 3
		trades     = 40 // per round
		total      = 2580
		refunded   = 2000
	)
	cumulative := []int64{500, 1200, refunded}
	h := newHarness(t, partitions)
	h.start(nil)

	var all demo.Stream
	all.Paid, all.Refunded = map[int64]int64{}, map[int64]int64{}
	var tradesSeen []channelstest.Trade
	for round := 0; round < rounds; round++ {
		var inOrder, reversed []kafkaops.Message
		var round0 []demo.Message
		for i := 0; i < trades; i++ {
			ch := channels.Alipay
			if i%2 == 1 {
				ch = channels.SQB
			}
			tr := channelstest.NewTrade(ch, 7000+round*trades+i)
			tr.Total = total
			tradesSeen = append(tradesSeen, tr)
			a, b := keyOn(t, tr, 0, partitions), keyOn(t, tr, 1, partitions)
			pay := channelstest.PaymentEnvelope(tr, channelstest.Delivery{})
			refunds := make([][]byte, len(cumulative))
			for n, c := range cumulative {
				refunds[n] = channelstest.RefundEnvelope(tr, channelstest.Refund{
					No: fmt.Sprintf("R%d", n+1), Cumulative: c, At: tr.PaidAt.Add(time.Duration(n+1) * time.Hour),
				}, channelstest.Delivery{})
			}
			inOrder = append(inOrder, kafkaops.Message{Key: a, Value: pay})
			for _, r := range refunds {
				inOrder = append(inOrder, kafkaops.Message{Key: a, Value: r})
			}
			for n := len(refunds) - 1; n >= 0; n-- {
				reversed = append(reversed, kafkaops.Message{Key: b, Value: refunds[n]})
			}
			reversed = append(reversed, kafkaops.Message{Key: b, Value: pay})
			all.Events += 1 + len(cumulative)
			all.Trades++
			all.Paid[tr.TenantID] += total
			all.Refunded[tr.TenantID] += refunded
		}
		// Interleaved, so both partitions fill while the worker reads.
		msgs := make([]kafkaops.Message, 0, len(inOrder)+len(reversed))
		for i := range inOrder {
			msgs = append(msgs, inOrder[i], reversed[i])
		}
		for _, m := range msgs {
			round0 = append(round0, demo.Message{Key: m.Key, Value: m.Value, Note: fmt.Sprintf("round %d", round)})
		}
		all.Messages = append(all.Messages, round0...)
		require.NoError(t, kafkaops.Produce(context.Background(), h.brokers, testTopic, msgs))
		h.waitConsumed(2 * time.Minute)
	}

	h.checkStream(all)
	ctx := context.Background()
	for _, tr := range tradesSeen {
		var ord struct {
			PaidAmount, RefundedAmount, MaxCumulativeRefund int64
			Status                                          string
		}
		require.NoError(t, h.db.NewSelect().Table("ss_channel_order").
			Column("paid_amount", "refunded_amount", "max_cumulative_refund", "status").
			Where("tenant_id = ? AND channel_code = ? AND channel_trade_no = ?", tr.TenantID, string(tr.Channel), tr.TradeNo).
			Scan(ctx, &ord.PaidAmount, &ord.RefundedAmount, &ord.MaxCumulativeRefund, &ord.Status), tr.TradeNo)
		assert.Equal(t, int64(total), ord.PaidAmount, tr.TradeNo)
		assert.Equal(t, int64(refunded), ord.RefundedAmount, tr.TradeNo)
		assert.Equal(t, int64(refunded), ord.MaxCumulativeRefund, tr.TradeNo)
		assert.Equal(t, "PARTIALLY_REFUNDED", ord.Status, tr.TradeNo)

		var debited, rows int64
		require.NoError(t, h.db.NewSelect().Table("ss_ledger_entry").
			ColumnExpr("COALESCE(SUM(amount), 0), COUNT(*)").
			Where("tenant_id = ? AND channel_code = ? AND channel_trade_no = ?", tr.TenantID, string(tr.Channel), tr.TradeNo).
			Where("account = ? AND direction = ?", "merchant_payable", "DEBIT").
			Scan(ctx, &debited, &rows), tr.TradeNo)
		assert.Equal(t, int64(refunded), debited, "%s: refunded exactly once in the ledger", tr.TradeNo)
		assert.LessOrEqual(t, rows, int64(len(cumulative)), "%s: at most one posting per refund", tr.TradeNo)
	}
}
