package settlement_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// outboxRow is an ss_settled_outbox row as a test reads it.
type outboxRow struct {
	Key         string `bun:"idempotent_key"`
	Channel     string `bun:"channel_code"`
	TradeNo     string `bun:"channel_trade_no"`
	TradeSeq    int64  `bun:"trade_seq"`
	EventType   string `bun:"event_type"`
	Source      string `bun:"source"`
	Value       []byte `bun:"value"`
	Published   bool   `bun:"published"`
	PublishedAt string `bun:"published_at"`
}

// settledEvents reads the tenant's settled events, trade by trade in
// trade_seq order, and checks that each row's value decodes, encodes again
// to the very bytes stored, and agrees with the row's columns.
func settledEvents(tb testing.TB, db bun.IDB, tenant int64) []settled.Event {
	tb.Helper()
	var rows []outboxRow
	require.NoError(tb, db.NewSelect().Table("ss_settled_outbox").
		Column("idempotent_key", "channel_code", "channel_trade_no", "trade_seq", "event_type", "source", "value", "published", "published_at").
		Where("tenant_id = ?", tenant).OrderExpr("channel_code, channel_trade_no, trade_seq").
		Scan(context.Background(), &rows))
	out := make([]settled.Event, len(rows))
	for i, r := range rows {
		e, err := settled.Decode(r.Value)
		require.NoError(tb, err, "%s", r.Value)
		again, err := settled.Encode(e)
		require.NoError(tb, err)
		require.True(tb, bytes.Equal(r.Value, again), "stored value is not the encoder's bytes:\n%s\n%s", r.Value, again)
		require.Equal(tb, settled.EventID(tenant, r.Key), e.EventID)
		require.Equal(tb, []any{r.Channel, r.TradeNo, r.TradeSeq, r.EventType, r.Source},
			[]any{e.Channel, e.ChannelTradeNo, e.TradeSeq, e.EventType, string(e.Source)})
		require.False(tb, r.Published, "nothing publishes yet")
		require.Contains(tb, r.PublishedAt, "1970-01-01", "written with its placeholder, so the mark updates in place")
		out[i] = e
	}
	return out
}

// checkSettledEvents holds the tenant's settled events to the contract and
// returns them: exactly one per claim settled POSTED and none for another
// outcome; per trade, trade_seq 1, 2, 3, … without gaps and the order row's
// counter at the last; the amounts, payments less refunds, equal to the
// trade's ledger; the last event's order fields equal to the order row.
func checkSettledEvents(tb testing.TB, db bun.IDB, tenant int64) []settled.Event {
	tb.Helper()
	ctx := context.Background()
	evs := settledEvents(tb, db, tenant)

	var posted []string
	require.NoError(tb, db.NewSelect().Table("ss_channel_idempotent").Column("idempotent_key").
		Where("tenant_id = ?", tenant).Where("settle_outcome = ?", string(idempotent.OutcomePosted)).
		Scan(ctx, &posted))
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.EventID
	}
	for i := range posted {
		posted[i] = settled.EventID(tenant, posted[i])
	}
	require.ElementsMatch(tb, posted, ids, "one settled event per claim settled POSTED, none for another")

	type trade struct{ channel, tradeNo string }
	byTrade := map[trade][]settled.Event{}
	for _, e := range evs {
		t := trade{e.Channel, e.ChannelTradeNo}
		byTrade[t] = append(byTrade[t], e)
	}
	bals, err := settlement.Balances(ctx, db, tenant)
	require.NoError(tb, err)
	net := map[trade]int64{}
	for _, b := range bals {
		if b.Account == settlement.ReceivableAccount(b.Channel) {
			net[trade{string(b.Channel), b.TradeNo}] += b.Debit - b.Credit
		}
	}
	for t, list := range byTrade {
		var sum int64
		for i, e := range list {
			require.Equal(tb, int64(i+1), e.TradeSeq, "%v: trade_seq without gaps from 1", t)
			if e.EventType == settled.PaymentReceived {
				sum += e.Amount
			} else {
				sum -= e.Amount
			}
		}
		assert.Equal(tb, net[t], sum, "%v: the events' amounts are the trade's ledger", t)
		ord, err := settlement.GetOrder(ctx, db, tenant, channels.Channel(t.channel), t.tradeNo)
		require.NoError(tb, err)
		last := list[len(list)-1]
		assert.Equal(tb, []any{string(ord.Status), ord.Amount, ord.RefundedAmount, ord.SettledSeq, ord.MerchantOrderNo},
			[]any{last.OrderStatus, last.OrderAmount, last.RefundedAmount, last.TradeSeq, last.MerchantOrderNo},
			"%v: the last event's order fields are the order row", t)
	}
	return evs
}

// TestSettledEventsOfEveryPath settles through every path settlement has
// and checks each writes exactly its event: per message (Settle), a batch
// on the set-based path (SettleBatch), a merged round (SettleMerged), a
// claim settled from its stored event (SettleStored), events of statements
// and queries (SettleBatchFrom), refunds after the payment, a Shouqianba
// cancel before and after its payment, in one batch and in two; a late
// cumulative refund (NO_MONEY) and an over-refund have none.
func TestSettledEventsOfEveryPath(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		const tenant = 1001
		byKey := func() map[string]settled.Event {
			out := map[string]settled.Event{}
			for _, e := range checkSettledEvents(t, db, tenant) {
				out[e.EventID] = e
			}
			return out
		}
		id := func(k idempotent.Key) string { return settled.EventID(tenant, string(k)) }

		// Per message: a payment, a redelivery, a refund.
		wx := channelstest.NewTrade(channels.WeChat, 7101)
		pay := h.deliver(t, channelstest.PaymentEnvelope(wx, channelstest.Delivery{}), 1)
		h.deliver(t, channelstest.PaymentEnvelope(wx, channelstest.Delivery{Attempt: 1}), 2)
		ref := h.deliver(t, channelstest.RefundEnvelope(wx, refundAt(wx, "R1", 300, 0, 1), channelstest.Delivery{}), 3)
		got := byKey()
		require.Len(t, got, 2)
		p, r := got[id(pay.ev.Key)], got[id(ref.ev.Key)]
		assert.Equal(t, settled.Event{
			EventID: id(pay.ev.Key), EventType: settled.PaymentReceived, TenantID: tenant, Channel: "WECHAT",
			ChannelTradeNo: wx.TradeNo, MerchantOrderNo: wx.MerchantOrderNo, Amount: wx.Total, Currency: "CNY",
			OrderStatus: settled.OrderPaid, OrderAmount: wx.Total, TradeSeq: 1, OccurredAt: wx.PaidAt.UTC(),
			SettledAt: p.SettledAt, Source: settled.SourceCallback,
		}, p)
		assert.Equal(t, []any{settled.RefundSucceeded, "R1", int64(300), settled.OrderPartiallyRefunded, int64(300), int64(2)},
			[]any{r.EventType, r.RefundNo, r.Amount, r.OrderStatus, r.RefundedAmount, r.TradeSeq})

		// A batch on the set-based path: nine new trades and a refund of
		// the first, in one transaction.
		var vals [][]byte
		var first channelstest.Trade
		for i := range 9 {
			tr := channelstest.NewTrade(channels.Codes()[i%3], 7200+i)
			if i == 0 {
				first = tr
			}
			vals = append(vals, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		}
		vals = append(vals, channelstest.RefundEnvelope(first, refundAt(first, "B1", 100, 100, 1), channelstest.Delivery{}))
		dels := h.deliverBatch(t, vals, 100)
		got = byKey()
		require.Len(t, got, 12)
		assert.Equal(t, int64(2), got[id(dels[9].ev.Key)].TradeSeq)
		assert.Equal(t, got[id(dels[0].ev.Key)].SettledAt, got[id(dels[9].ev.Key)].SettledAt, "one transaction")

		// A merged round.
		var evs []channels.Event
		for i := range 3 {
			ev := h.decode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Codes()[i], 7300+i), channelstest.Delivery{}))
			h.acquire(t, ev, int64(200+i))
			evs = append(evs, ev)
		}
		res, err := h.svc.SettleMerged(ctx, evs)
		require.NoError(t, err)
		for i := range res {
			assert.Equal(t, idempotent.OutcomePosted, res[i].Outcome)
		}
		require.Len(t, byKey(), 15)

		// Statement and query events.
		st := h.decode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.WeChat, 7401), channelstest.Delivery{}))
		qu := h.decode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Alipay, 7402), channelstest.Delivery{}))
		h.acquire(t, st, 300)
		h.acquire(t, qu, 301)
		_, err = h.svc.SettleBatchFrom(ctx, []channels.Event{st, qu}, []settled.Source{settled.SourceStatement, settled.SourceQuery})
		require.NoError(t, err)
		_, err = h.svc.SettleBatchFrom(ctx, []channels.Event{st}, []settled.Source{"replay"})
		require.ErrorIs(t, err, settlement.ErrInvalidEvent)
		got = byKey()
		assert.Equal(t, settled.SourceStatement, got[id(st.Key)].Source)
		assert.Equal(t, settled.SourceQuery, got[id(qu.Key)].Source)

		// From the stored event (the sweeper), which names its source.
		orphan := h.decode(t, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.SQB, 7501), channelstest.Delivery{}))
		body := settlement.AppendStoredEvent(nil, orphan, settled.SourceStatement)
		_, err = h.claims.Acquire(ctx, idempotent.Claim{
			TenantID: orphan.TenantID, Key: orphan.Key, EventType: orphan.Type, Fingerprint: orphan.Fingerprint, Event: body,
			Source: idempotent.Source{Topic: "channel-events", Offset: 400},
		})
		require.NoError(t, err)
		rec, err := h.claims.Get(ctx, orphan.TenantID, orphan.Key)
		require.NoError(t, err)
		sr, err := h.svc.SettleStored(ctx, rec)
		require.NoError(t, err)
		require.Equal(t, idempotent.OutcomePosted, sr.Outcome)
		assert.Equal(t, settled.SourceStatement, byKey()[id(orphan.Key)].Source)

		// A late cumulative refund moves nothing (NO_MONEY), an over-refund
		// nothing either: neither has an event.
		ali := channelstest.NewTrade(channels.Alipay, 7601)
		h.deliver(t, channelstest.PaymentEnvelope(ali, channelstest.Delivery{}), 500)
		hi := h.deliver(t, channelstest.RefundEnvelope(ali, refundAt(ali, "A2", 500, 500, 2), channelstest.Delivery{}), 501)
		lo := h.deliver(t, channelstest.RefundEnvelope(ali, refundAt(ali, "A1", 300, 300, 1), channelstest.Delivery{}), 502)
		over := h.deliver(t, channelstest.RefundEnvelope(ali, refundAt(ali, "A3", 0, ali.Total+1, 3), channelstest.Delivery{}), 503)
		assert.Equal(t, idempotent.OutcomeNoMoney, lo.result.Outcome)
		assert.Equal(t, idempotent.OutcomeOverRefund, over.result.Outcome)
		got = byKey()
		assert.Equal(t, int64(500), got[id(hi.ev.Key)].Amount)
		assert.NotContains(t, got, id(lo.ev.Key))
		assert.NotContains(t, got, id(over.ev.Key))

		// Shouqianba: a cancel after the payment reverses it; a cancel
		// before its payment moves nothing and has no event until the
		// payment, whose settlement reverses it and writes both events, in
		// two transactions and in one batch.
		after := channelstest.NewTrade(channels.SQB, 7701)
		h.deliver(t, channelstest.PaymentEnvelope(after, channelstest.Delivery{}), 600)
		c1 := h.deliver(t, channelstest.SQBCancel(after, channelstest.Delivery{}), 601)
		c := byKey()[id(c1.ev.Key)]
		assert.Equal(t, []any{settled.RefundSucceeded, after.Total, settled.OrderRefunded, after.Total, int64(2)},
			[]any{c.EventType, c.Amount, c.OrderStatus, c.RefundedAmount, c.TradeSeq})

		before := channelstest.NewTrade(channels.SQB, 7702)
		c2 := h.deliver(t, channelstest.SQBCancel(before, channelstest.Delivery{}), 610)
		require.Equal(t, idempotent.OutcomeNoMoney, c2.result.Outcome)
		assert.NotContains(t, byKey(), id(c2.ev.Key))
		p2 := h.deliver(t, channelstest.PaymentEnvelope(before, channelstest.Delivery{}), 611)
		got = byKey()
		pe, ce := got[id(p2.ev.Key)], got[id(c2.ev.Key)]
		assert.Equal(t, []any{int64(1), before.Total, settled.OrderPaid, int64(0)},
			[]any{pe.TradeSeq, pe.Amount, settled.OrderPaid, pe.RefundedAmount}, "the payment as it was posted")
		assert.Equal(t, []any{int64(2), before.Total, settled.OrderRefunded, before.Total, c2.ev.OccurredAt.UTC()},
			[]any{ce.TradeSeq, ce.Amount, ce.OrderStatus, ce.RefundedAmount, ce.OccurredAt}, "the cancel's reversal, at the cancel's time")

		inOne := channelstest.NewTrade(channels.SQB, 7703)
		one := h.deliverBatch(t, [][]byte{
			channelstest.SQBCancel(inOne, channelstest.Delivery{}), channelstest.PaymentEnvelope(inOne, channelstest.Delivery{}),
		}, 620)
		got = byKey()
		assert.Equal(t, int64(1), got[id(one[1].ev.Key)].TradeSeq)
		assert.Equal(t, int64(2), got[id(one[0].ev.Key)].TradeSeq)
		assert.Equal(t, settled.OrderRefunded, got[id(one[0].ev.Key)].OrderStatus)
		mustCheck(t, db)
	})
}

// TestSettledEventRolledBackWithItsSettlement: a settlement whose
// transaction fails after its postings (here the outbox refuses its row:
// another row holds the trade's first trade_seq) writes nothing, neither
// postings nor event nor counter, and leaves its claim ACQUIRED; settled
// again once the fault is gone, it writes its one event.
func TestSettledEventRolledBackWithItsSettlement(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		tr := channelstest.NewTrade(channels.WeChat, 7801)
		_, err := db.ExecContext(ctx, "INSERT INTO ss_settled_outbox (tenant_id, idempotent_key, channel_code, channel_trade_no, "+
			"trade_seq, event_type, source, value, settled_at) VALUES (?, 'planted', 'WECHAT', ?, 1, 'PAYMENT_RECEIVED', 'callback', '{}', ?)",
			tr.TenantID, tr.TradeNo, tr.PaidAt)
		require.NoError(t, err)

		ev := h.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		h.acquire(t, ev, 1)
		_, err = h.svc.Settle(ctx, ev)
		// At the INSERT, or at COMMIT in TiDB's optimistic mode: the
		// server's duplicate-key error either way.
		require.ErrorIs(t, idempotent.ClassifyDuplicate(err), idempotent.ErrDuplicateKey)
		assert.Zero(t, ledgerRows(t, db, ev.Key), "no postings")
		rec, err := h.claims.Get(ctx, ev.TenantID, ev.Key)
		require.NoError(t, err)
		assert.Equal(t, idempotent.StatusAcquired, rec.Status)
		n, err := db.NewSelect().Table("ss_settled_outbox").Where("tenant_id = ?", tr.TenantID).Count(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "only the planted row")
		if o, err := settlement.GetOrder(ctx, db, tr.TenantID, tr.Channel, tr.TradeNo); err == nil {
			assert.Zero(t, o.SettledSeq)
		}

		_, err = db.ExecContext(ctx, "DELETE FROM ss_settled_outbox WHERE idempotent_key = 'planted'")
		require.NoError(t, err)
		res, err := h.svc.SettleStored(ctx, rec)
		require.NoError(t, err)
		assert.Equal(t, idempotent.OutcomePosted, res.Outcome)
		evs := checkSettledEvents(t, db, tr.TenantID)
		require.Len(t, evs, 1)
		assert.Equal(t, int64(1), evs[0].TradeSeq)
	})
}

// outboxStatements counts the statements that name ss_settled_outbox.
type outboxStatements struct{ n atomic.Int64 }

func (c *outboxStatements) BeforeQuery(ctx context.Context, q *bun.QueryEvent) context.Context {
	if strings.Contains(q.Query, "ss_settled_outbox") {
		c.n.Add(1)
	}
	return ctx
}

func (*outboxStatements) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestSettledEventsAreOneInsertPerTransaction: a batch writes all its
// events with one statement whatever its size, and a transaction that
// posts nothing writes none.
func TestSettledEventsAreOneInsertPerTransaction(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		counter := &outboxStatements{}
		h := newHarness(t, db.WithQueryHook(counter))
		var vals [][]byte
		for i := range 12 {
			tr := channelstest.NewTrade(channels.Codes()[i%3], 7900+i)
			vals = append(vals, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
			if i%3 == 0 {
				vals = append(vals, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 100, 100, 1), channelstest.Delivery{}))
			}
		}
		h.deliverBatch(t, vals, 0)
		assert.Equal(t, int64(1), counter.n.Load(), "one INSERT for the batch's 16 events")
		require.Len(t, checkSettledEvents(t, db, 1001), 16)

		ali := channelstest.NewTrade(channels.Alipay, 7950)
		h.deliver(t, channelstest.PaymentEnvelope(ali, channelstest.Delivery{}), 100)
		h.deliver(t, channelstest.RefundEnvelope(ali, refundAt(ali, "A2", 500, 500, 2), channelstest.Delivery{}), 101)
		before := counter.n.Load()
		lo := h.deliver(t, channelstest.RefundEnvelope(ali, refundAt(ali, "A1", 300, 300, 1), channelstest.Delivery{}), 102)
		require.Equal(t, idempotent.OutcomeNoMoney, lo.result.Outcome)
		assert.Equal(t, before, counter.n.Load(), "NO_MONEY writes no event and costs no statement")
	})
}

// TestSettledEventOfAnAlreadyPostedClaim: a claim whose postings the
// ledger already holds (a path bypassed the claim) is settled POSTED
// without new postings, and still has its one settled event: the amount
// its postings hold, the order row as it is; settled again, nothing more.
func TestSettledEventOfAnAlreadyPostedClaim(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		tr := channelstest.NewTrade(channels.WeChat, 7990)
		h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 0)
		ref := h.decode(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R9", 250, 0, 1), channelstest.Delivery{}))
		for _, side := range [][2]string{{settlement.AccountMerchantPayable, "DEBIT"}, {settlement.ReceivableAccount(tr.Channel), "CREDIT"}} {
			_, err := db.ExecContext(ctx, "INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, "+
				"account, direction, amount, currency, created_at) VALUES (?, ?, ?, ?, ?, ?, 250, 'CNY', ?)",
				tr.TenantID, string(ref.Key), string(tr.Channel), tr.TradeNo, side[0], side[1], tr.PaidAt)
			require.NoError(t, err)
		}
		h.acquire(t, ref, 1)
		res, err := h.svc.Settle(ctx, ref)
		require.NoError(t, err)
		require.True(t, res.AlreadyPosted)
		evs := checkSettledEvents(t, db, tr.TenantID)
		require.Len(t, evs, 2)
		assert.Equal(t, []any{settled.EventID(tr.TenantID, string(ref.Key)), int64(250), int64(2)},
			[]any{evs[1].EventID, evs[1].Amount, evs[1].TradeSeq})

		rec, err := h.claims.Get(ctx, ref.TenantID, ref.Key)
		require.NoError(t, err)
		again, err := h.svc.SettleStored(ctx, rec)
		require.NoError(t, err)
		assert.True(t, again.FenceLost)
		assert.Len(t, checkSettledEvents(t, db, tr.TenantID), 2)
	})
}

// TestSettledEventsOff: with settled events off (PAYCB_SETTLED_TOPIC=none)
// neither a single settlement nor a batch writes an outbox row or advances
// a trade's counter, so a trade's first event once they are on again is
// trade_seq 1.
func TestSettledEventsOff(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		h.svc.SetSettledEvents(false)
		const tenant = 1001
		wx := channelstest.NewTrade(channels.WeChat, 7601)
		h.deliver(t, channelstest.PaymentEnvelope(wx, channelstest.Delivery{}), 1)
		var vals [][]byte
		for i := range 4 {
			vals = append(vals, channelstest.PaymentEnvelope(channelstest.NewTrade(channels.Codes()[i%3], 7610+i), channelstest.Delivery{}))
		}
		h.deliverBatch(t, vals, 10)
		n, err := db.NewSelect().Table("ss_settled_outbox").Count(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "no outbox row while settled events are off")
		assert.Zero(t, order(t, db, wx).SettledSeq, "the counter stays")
		mustCheck(t, db)

		h.svc.SetSettledEvents(true)
		h.deliver(t, channelstest.RefundEnvelope(wx, refundAt(wx, "R1", 100, 0, 1), channelstest.Delivery{}), 20)
		evs := settledEvents(t, db, tenant)
		require.Len(t, evs, 1)
		assert.Equal(t, int64(1), evs[0].TradeSeq)
	})
}

// TestStoredEventNamesItsSource: a callback's event is stored as
// channels.Event's own JSON, byte for byte; a statement's or a query's
// carries its source beside the fields, and reads back as the same event.
func TestStoredEventNamesItsSource(t *testing.T) {
	ev, _ := channelstest.StatementPayment(channelstest.NewTrade(channels.WeChat, 8101))
	plain, err := json.Marshal(ev)
	require.NoError(t, err)
	assert.Equal(t, string(plain), string(settlement.AppendStoredEvent(nil, ev, settled.SourceCallback)))
	assert.Equal(t, string(plain), string(settlement.AppendStoredEvent(nil, ev, "replay")), "no source that is not one")
	for _, src := range []settled.Source{settled.SourceStatement, settled.SourceQuery} {
		b := settlement.AppendStoredEvent([]byte("prefix"), ev, src)
		require.True(t, bytes.HasPrefix(b, []byte("prefix")))
		var back channels.Event
		require.NoError(t, json.Unmarshal(b[len("prefix"):], &back))
		assert.Equal(t, ev, back)
		var v struct {
			Source settled.Source `json:"source"`
		}
		require.NoError(t, json.Unmarshal(b[len("prefix"):], &v))
		assert.Equal(t, src, v.Source)
	}
	assert.Equal(t, settled.SourceStatement, settlement.SourceOf(channels.Result{Event: ev, FromStatement: true}))
	assert.Equal(t, settled.SourceCallback, settlement.SourceOf(channels.Result{Event: ev}))
}
