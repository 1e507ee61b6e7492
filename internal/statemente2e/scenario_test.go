package statemente2e

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// tenant is the one tenant of the scenario.
const tenant = 1001

// event is one money event of the scenario: what the channel did, and the
// callbacks (if any) it sent about it.
type event struct {
	trade  channelstest.Trade
	refund *channelstest.Refund // nil for the payment
	// own is the event's own amount: the order total, or the refund's.
	own int64
	at  time.Time
	// decoded is the canonical event the callback carries (or would carry,
	// for a barcode payment).
	decoded channels.Event
	// copies are the callback's deliveries, channel retries included;
	// none for a barcode payment.
	copies []demo.Message
	// barcode: a WeChat barcode (MICROPAY) payment, which the channel never
	// notifies; only the statement knows it.
	barcode bool
	// withheld: the callbacks are held back until after the statements
	// have been reconciled.
	withheld bool
}

func (e *event) key() string { return string(e.decoded.Key) }

// rebuildable reports whether the statement describes the event exactly, so
// that reconcile --publish-missing may publish it: payments, and refunds
// of WeChat (each its own amount); not the refunds of Alipay and
// Shouqianba, whose callbacks report cumulative amounts.
func (e *event) rebuildable() bool { return e.refund == nil || !e.trade.Channel.Cumulative() }

// scenario is the stream of one tenant over two Beijing days on the three
// channels, the part of it withheld, and the statements of the full stream.
type scenario struct {
	days   []string
	events []*event
	// lines are each channel's statement lines for the full stream.
	lines map[channels.Channel][]statements.Line
	// barcode holds the WeChat barcode payments' trade numbers.
	barcode map[string]bool
	// paid and refunded are the money the channels moved, in fen.
	paid, refunded int64
}

// withheldRole names which callbacks of a trade are withheld: its payment,
// its refunds (all of them, or only the last one) or both.
type withheldRole struct {
	ch      channels.Channel
	day     int // 0 or 1
	trade   int // the trade's index on its channel and day
	payment bool
	refunds string // "", "all" or "last"
}

// withheldRoles are chosen so that each shows in its statement day's
// reconciliation as missing_in_ledger, and as nothing else: a cumulative
// channel's refunds are withheld from the last on (the later callback's
// cumulative amount would carry an earlier refund withheld behind it, so
// nothing would show for it once both statements are imported, and its
// late callback would settle NO_MONEY; TestAlipayRefundLostThenOvertakenAcrossDays
// covers that), and all of a trade's refunds on a Shouqianba order line,
// which reports them together.
var withheldRoles = []withheldRole{
	{ch: channels.WeChat, day: 0, trade: 0, payment: true},                 // a payment never refunded
	{ch: channels.WeChat, day: 0, trade: 1, refunds: "all"},                // a refund of a delivered payment
	{ch: channels.WeChat, day: 0, trade: 2, refunds: "last"},               // the second refund, the next day
	{ch: channels.WeChat, day: 1, trade: 3, payment: true, refunds: "all"}, // both sides of a fully refunded trade
	{ch: channels.WeChat, day: 1, trade: 4, payment: true},
	{ch: channels.Alipay, day: 0, trade: 0, payment: true},
	{ch: channels.Alipay, day: 0, trade: 1, refunds: "all"},
	{ch: channels.Alipay, day: 0, trade: 2, refunds: "last"}, // lands on the second day
	{ch: channels.Alipay, day: 1, trade: 4, payment: true},
	{ch: channels.SQB, day: 0, trade: 4, payment: true},
	{ch: channels.SQB, day: 0, trade: 3, refunds: "all"},
	{ch: channels.SQB, day: 1, trade: 1, payment: true, refunds: "all"},
}

const (
	tradesPerDay   = 8 // per channel
	barcodesPerDay = 2
)

// newScenario builds the scenario: per channel and day eight trades paid
// between 09:00 and 20:00 (one in four never refunded, one refunded once
// in part, one twice, the second time the next day for the first day's
// trades, one refunded in full), two WeChat barcode payments a day (one of
// them refunded, its refund notified), every notification delivered one to
// three times, some retries without a key.
func newScenario(t *testing.T) *scenario {
	t.Helper()
	rng := rand.New(rand.NewPCG(16, 2024))
	day0 := time.Date(2024, 6, 1, 0, 0, 0, 0, statements.Beijing)
	s := &scenario{barcode: map[string]bool{}, lines: map[channels.Channel][]statements.Line{}}
	dec := channels.NewDecoder(channelstest.Keys())
	decode := func(env []byte) channels.Event {
		res, err := dec.Decode(env)
		require.NoError(t, err)
		require.False(t, res.Ignored)
		return res.Event
	}
	deliver := func(e *event, build func(channelstest.Delivery) []byte) {
		key := []byte(fmt.Sprintf("%s:%s", e.trade.Channel, e.trade.TradeNo))
		// A cumulative refund's retries keep their key: one that overtook an
		// earlier refund of its trade on another partition would carry that
		// refund's money too, and the earlier refund's claim would settle
		// NO_MONEY, which checkInvariants counts as a failure here. The
		// reconciliation of that case is TestAlipayRefundLostThenOvertakenAcrossDays.
		cumulative := e.refund != nil && e.trade.Channel.Cumulative()
		for a := range 1 + rng.IntN(3) {
			k := key
			if a > 0 && !cumulative && rng.IntN(4) == 0 {
				k = nil // a retry the receiver could not key: any partition
			}
			e.copies = append(e.copies, demo.Message{
				Key: k, Value: build(channelstest.Delivery{Attempt: a}),
				Note: fmt.Sprintf("%s attempt %d", e.decoded.Key, a),
			})
		}
	}
	addPayment := func(tr channelstest.Trade, barcode bool) *event {
		e := &event{trade: tr, own: tr.Total, at: tr.PaidAt, barcode: barcode}
		if barcode {
			e.decoded = decode(channelstest.WeChatPayment(tr, channelstest.Delivery{Edit: func(p map[string]any) { p["trade_type"] = "MICROPAY" }}))
			s.barcode[tr.TradeNo] = true
		} else {
			e.decoded = decode(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
			deliver(e, func(d channelstest.Delivery) []byte { return channelstest.PaymentEnvelope(tr, d) })
		}
		s.events = append(s.events, e)
		s.paid += tr.Total
		return e
	}
	addRefund := func(tr channelstest.Trade, r channelstest.Refund) *event {
		e := &event{trade: tr, refund: &r, own: r.Amount, at: r.At}
		e.decoded = decode(channelstest.RefundEnvelope(tr, r, channelstest.Delivery{}))
		deliver(e, func(d channelstest.Delivery) []byte { return channelstest.RefundEnvelope(tr, r, d) })
		s.events = append(s.events, e)
		s.refunded += r.Amount
		return e
	}
	refundNo := func(tr channelstest.Trade, n int) string { return fmt.Sprintf("RF%s-%d", tr.MerchantOrderNo, n) }

	type tradeID struct {
		ch         channels.Channel
		day, index int
	}
	byTrade := map[tradeID][]*event{}
	for d := range 2 {
		day := day0.AddDate(0, 0, d)
		s.days = append(s.days, day.Format(time.DateOnly))
		for ci, ch := range channels.Codes() {
			for i := range tradesPerDay {
				tr := channelstest.NewTrade(ch, 10000*(ci+1)+100*d+i)
				tr.TenantID = tenant
				tr.Total = 100 + rng.Int64N(99900)
				tr.PaidAt = day.Add(9*time.Hour + time.Duration(rng.IntN(11*3600))*time.Second)
				evs := []*event{addPayment(tr, false)}
				later := func(hours int) time.Time {
					return tr.PaidAt.Add(time.Duration(hours)*time.Hour + time.Duration(rng.IntN(3000))*time.Second)
				}
				switch i % 4 {
				case 1:
					a := 1 + rng.Int64N(tr.Total/2)
					evs = append(evs, addRefund(tr, channelstest.Refund{No: refundNo(tr, 1), Amount: a, Cumulative: a, At: later(1)}))
				case 2:
					a := 1 + rng.Int64N(tr.Total/2)
					at2 := later(2)
					if d == 0 {
						at2 = day.AddDate(0, 0, 1).Add(10*time.Hour + time.Duration(i)*time.Minute)
					}
					evs = append(evs,
						addRefund(tr, channelstest.Refund{No: refundNo(tr, 1), Amount: a, Cumulative: a, At: later(1)}),
						addRefund(tr, channelstest.Refund{No: refundNo(tr, 2), Amount: tr.Total - a, Cumulative: tr.Total, At: at2}))
				case 3:
					evs = append(evs, addRefund(tr, channelstest.Refund{No: refundNo(tr, 1), Amount: tr.Total, Cumulative: tr.Total, At: later(1)}))
				}
				byTrade[tradeID{ch, d, i}] = evs
			}
		}
		for b := range barcodesPerDay {
			tr := channelstest.NewTrade(channels.WeChat, 90000+100*d+b)
			tr.TenantID = tenant
			tr.Total = 100 + rng.Int64N(9900)
			tr.PaidAt = day.Add(8*time.Hour + time.Duration(rng.IntN(12*3600))*time.Second)
			addPayment(tr, true)
			if b == 0 {
				addRefund(tr, channelstest.Refund{No: refundNo(tr, 1), Amount: tr.Total, At: tr.PaidAt.Add(30 * time.Minute)})
			}
		}
	}
	for _, w := range withheldRoles {
		evs := byTrade[tradeID{w.ch, w.day, w.trade}]
		require.NotEmpty(t, evs, "withheld role %+v", w)
		if w.payment {
			evs[0].withheld = true
		}
		refunds := evs[1:]
		require.True(t, w.refunds == "" || len(refunds) > 0, "withheld role %+v: the trade has no refunds", w)
		switch w.refunds {
		case "all":
			for _, e := range refunds {
				e.withheld = true
			}
		case "last":
			refunds[len(refunds)-1].withheld = true
		}
	}

	var decoded []channels.Event
	for _, e := range s.events {
		decoded = append(decoded, e.decoded)
	}
	for _, ch := range channels.Codes() {
		lines, err := statementsample.FromEvents(ch, decoded)
		require.NoError(t, err)
		s.lines[ch] = lines
	}
	return s
}

// messages returns the deliveries of the events for which keep is true, in
// the order they would arrive: by the channel's notify time (the event's
// time, plus four minutes per retry).
func (s *scenario) messages(keep func(*event) bool) []demo.Message {
	type arrival struct {
		at  time.Time
		msg demo.Message
	}
	var all []arrival
	for _, e := range s.events {
		if !keep(e) {
			continue
		}
		for a, m := range e.copies {
			all = append(all, arrival{e.at.Add(time.Second + time.Duration(a)*4*time.Minute), m})
		}
	}
	slices.SortStableFunc(all, func(a, b arrival) int { return a.at.Compare(b.at) })
	out := make([]demo.Message, len(all))
	for i, a := range all {
		out[i] = a.msg
	}
	return out
}

// expectedItem is one discrepancy a statement reconciliation must report.
type expectedItem struct {
	Channel, Day, Category, TradeNo, RefundNo, Key string
	StatementAmount                                int64
}

// missing returns what the statements' reconciliation must report for
// the events for which pick is true and that never reached the ledger:
// each missing_in_ledger, on the day of the statement line that shows it.
//
// WeChat lines: one per payment (keyed) and per refund (keyed by refund
// number). Alipay: payments keyed; refunds as the trade's total of the
// day, unkeyed. Shouqianba: one order line per trade, dated by the trade's
// last event: the payment keyed, the refunds as one unkeyed total.
func (s *scenario) missing(pick func(*event) bool) []expectedItem {
	last := map[string]time.Time{}
	for _, e := range s.events {
		if k := string(e.trade.Channel) + ":" + e.trade.TradeNo; e.at.After(last[k]) {
			last[k] = e.at
		}
	}
	var items []expectedItem
	totals := map[expectedItem]int64{} // per-trade refund totals, amount left zero in the key
	for _, e := range s.events {
		if !pick(e) {
			continue
		}
		ch := e.trade.Channel
		it := expectedItem{Channel: string(ch), Day: statementsample.Day(e.at), Category: "missing_in_ledger", TradeNo: e.trade.TradeNo}
		if ch == channels.SQB {
			it.Day = statementsample.Day(last[string(ch)+":"+e.trade.TradeNo])
		}
		switch {
		case e.refund == nil:
			it.Key, it.StatementAmount = e.key(), e.own
			items = append(items, it)
		case ch == channels.WeChat:
			it.RefundNo, it.Key, it.StatementAmount = e.refund.No, e.key(), e.own
			items = append(items, it)
		default:
			totals[it] += e.own
		}
	}
	for it, sum := range totals {
		it.StatementAmount = sum
		items = append(items, it)
	}
	sortItems(items)
	return items
}

func sortItems(items []expectedItem) {
	slices.SortFunc(items, func(a, b expectedItem) int {
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Day, b.Day), cmp.Compare(a.Category, b.Category),
			cmp.Compare(a.TradeNo, b.TradeNo), cmp.Compare(a.RefundNo, b.RefundNo), cmp.Compare(a.Key, b.Key),
			cmp.Compare(a.StatementAmount, b.StatementAmount))
	})
}
