package settlement_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func TestSettleBatch(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)

		t.Run("one transaction settles several trades, several events of one trade in order", func(t *testing.T) {
			a := channelstest.NewTrade(channels.Alipay, 1)
			w := channelstest.NewTrade(channels.WeChat, 2)
			settledAlready := h.deliver(t, channelstest.PaymentEnvelope(w, channelstest.Delivery{}), 0)
			evs := []channels.Event{
				h.decode(t, channelstest.RefundEnvelope(a, refundAt(a, "R2", 0, 900, 2), channelstest.Delivery{})),
				h.decode(t, channelstest.PaymentEnvelope(a, channelstest.Delivery{})),
				h.decode(t, channelstest.RefundEnvelope(a, refundAt(a, "R1", 0, 300, 1), channelstest.Delivery{})),
				h.decode(t, channelstest.RefundEnvelope(w, refundAt(w, "R1", 2580, 0, 1), channelstest.Delivery{})),
				h.decode(t, channelstest.RefundEnvelope(a, refundAt(a, "R3", 0, 2581, 3), channelstest.Delivery{})),
			}
			for i, ev := range evs {
				h.acquire(t, ev, int64(i+1))
			}
			res, err := h.svc.SettleBatch(ctx, append(evs, settledAlready.ev))
			require.NoError(t, err)
			require.Len(t, res, 6)
			type got struct {
				Outcome idempotent.Outcome
				Amount  int64
				Lost    bool
			}
			var gots []got
			for _, r := range res {
				gots = append(gots, got{r.Outcome, r.Amount, r.FenceLost})
			}
			assert.Equal(t, []got{
				{idempotent.OutcomePosted, 900, false},
				{idempotent.OutcomePosted, 2580, false},
				{idempotent.OutcomeNoMoney, 0, false},
				{idempotent.OutcomePosted, 2580, false},
				{idempotent.OutcomeOverRefund, 0, false},
				{"", 0, true},
			}, gots)
			oa := order(t, db, a)
			assert.Equal(t, settlement.OrderPartiallyRefunded, oa.Status)
			assert.Equal(t, int64(900), oa.RefundedAmount)
			assert.Equal(t, settlement.OrderRefunded, order(t, db, w).Status)
			for _, ev := range evs {
				assert.Equal(t, idempotent.StatusSettled, mustClaim(t, h, ev).Status)
			}
			mustCheck(t, db)
		})

		t.Run("registrations are matched as the single settlement matches them", func(t *testing.T) {
			wc := channelstest.NewTrade(channels.WeChat, 20)
			al := channelstest.NewTrade(channels.Alipay, 21)
			h.deliver(t, channelstest.PaymentEnvelope(wc, channelstest.Delivery{}), 30)
			h.deliver(t, channelstest.PaymentEnvelope(al, channelstest.Delivery{}), 31)
			for _, r := range []settlement.RefundRequest{
				request(wc, "RF-a", 300), request(wc, "RF-b", 400), // RF-b will come back as 500
				request(al, "AL-1", 200), request(al, "AL-2", 100),
			} {
				_, err := h.svc.RegisterRefund(ctx, r)
				require.NoError(t, err)
			}
			unregBefore := metric(t, h, "paycb_refund_unregistered_total")
			mismatchBefore := metric(t, h, "paycb_refund_registration_mismatch_total", "reason", settlement.MismatchAmount)
			evs := []channels.Event{
				h.decode(t, channelstest.RefundEnvelope(wc, refundAt(wc, "RF-a", 300, 0, 1), channelstest.Delivery{})),
				h.decode(t, channelstest.RefundEnvelope(wc, refundAt(wc, "RF-b", 500, 0, 2), channelstest.Delivery{})),
				h.decode(t, channelstest.RefundEnvelope(wc, refundAt(wc, "RF-c", 100, 0, 3), channelstest.Delivery{})),
				h.decode(t, channelstest.RefundEnvelope(al, refundAt(al, "AL-2", 0, 300, 2), channelstest.Delivery{})),
				h.decode(t, channelstest.RefundEnvelope(al, refundAt(al, "AL-1", 0, 200, 1), channelstest.Delivery{})),
			}
			for i, ev := range evs {
				h.acquire(t, ev, int64(40+i))
			}
			res, err := h.svc.SettleBatch(ctx, evs)
			require.NoError(t, err)
			require.Len(t, res, len(evs))
			for _, no := range []string{"RF-a", "RF-b"} {
				reg, err := h.svc.GetRegistration(ctx, wc.TenantID, wc.Channel, wc.TradeNo, no)
				require.NoError(t, err)
				assert.Equal(t, settlement.RegistrationSucceeded, reg.Status, no)
			}
			for _, no := range []string{"AL-1", "AL-2"} {
				reg, err := h.svc.GetRegistration(ctx, al.TenantID, al.Channel, al.TradeNo, no)
				require.NoError(t, err)
				assert.Equal(t, settlement.RegistrationSucceeded, reg.Status, no)
			}
			assert.InDelta(t, unregBefore+1, metric(t, h, "paycb_refund_unregistered_total"), 0, "RF-c has no registration")
			assert.InDelta(t, mismatchBefore+1, metric(t, h, "paycb_refund_registration_mismatch_total", "reason", settlement.MismatchAmount), 0,
				"RF-b registered 400, refunded 500")
			assert.Equal(t, int64(300), order(t, db, al).RefundedAmount)
			mustCheck(t, db)
		})

		t.Run("any failure rolls the whole batch back", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.SQB, 3)
			pay := h.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
			unclaimed := h.decode(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 0, 100, 1), channelstest.Delivery{}))
			h.acquire(t, pay, 10)
			_, err := h.svc.SettleBatch(ctx, []channels.Event{pay, unclaimed})
			require.ErrorIs(t, err, idempotent.ErrNotFound)
			assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, pay).Status)
			assert.Zero(t, ledgerRows(t, db, pay.Key), "nothing posted")
			if o, err := settlement.GetOrder(ctx, db, tr.TenantID, tr.Channel, tr.TradeNo); err == nil {
				// On MySQL a batch creates its new trades' order rows ahead of
				// its transaction: an empty row is all that may remain.
				assert.Equal(t, settlement.OrderPendingPayment, o.Status)
				assert.Zero(t, o.PaidAmount)
				assert.Zero(t, o.RefundedAmount)
			} else {
				require.ErrorIs(t, err, settlement.ErrOrderNotFound)
			}

			_, err = h.svc.SettleBatch(ctx, []channels.Event{pay, pay})
			require.ErrorIs(t, err, settlement.ErrInvalidEvent, "one key twice")
			res, err := h.svc.SettleBatch(ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, res)
		})
	})
}

// TestConcurrentBatchesCreateTrades settles, from several goroutines at
// once, successive batches of events of the same new trades, as partitions
// do when a trade's events (or a channel's unkeyed retries) land on
// different partitions. Each goroutine's window of trades overlaps the
// others' by different amounts, so a batch meets several creators of its
// new order rows in turn. Whichever batch creates an order row, the others
// find it in the same transaction: no batch fails for losing that race,
// and the orders add up.
func TestConcurrentBatchesCreateTrades(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		const (
			settlers = 6  // goroutines: one pays, the others refund 100 each
			window   = 24 // trades per batch
			shift    = 4  // how far each settler's windows are shifted
			rounds   = 8  // batches per settler
			trades   = rounds*window + settlers*shift
		)
		trade := func(n int) channelstest.Trade { return channelstest.NewTrade(channels.WeChat, 800+n) }
		batches := make([][][]channels.Event, settlers)
		for g := range settlers {
			for r := range rounds {
				var evs []channels.Event
				for n := r*window + g*shift; n < (r+1)*window+g*shift; n++ {
					tr := trade(n)
					v := channelstest.PaymentEnvelope(tr, channelstest.Delivery{})
					if g > 0 {
						v = channelstest.RefundEnvelope(tr, refundAt(tr, fmt.Sprintf("R%d", g), 100, 0, g), channelstest.Delivery{})
					}
					ev := h.decode(t, v)
					h.acquire(t, ev, int64(10000+g*1000+n))
					evs = append(evs, ev)
				}
				batches[g] = append(batches[g], evs)
			}
		}
		errs := make([]error, settlers)
		var start, done sync.WaitGroup
		start.Add(1)
		for g := range settlers {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				for _, evs := range batches[g] {
					// Deadlocks are retried, as the worker retries them;
					// losing the race to create an order row must not
					// surface at all.
					err := retry(func() error {
						res, err := h.svc.SettleBatch(ctx, evs)
						if err == nil && len(res) != len(evs) {
							return fmt.Errorf("%d results for %d events", len(res), len(evs))
						}
						return err
					})
					if err != nil {
						errs[g] = err
						return
					}
				}
			}()
		}
		start.Done()
		done.Wait()
		for g, err := range errs {
			require.NoError(t, err, "settler %d", g)
		}
		for n := range trades {
			var paid, refunded int64
			for g := range settlers {
				if n >= g*shift && n < rounds*window+g*shift {
					if g == 0 {
						paid = 2580
					} else {
						refunded += 100
					}
				}
			}
			if paid == 0 && refunded == 0 {
				continue
			}
			o := order(t, db, trade(n))
			assert.Equal(t, paid, o.PaidAmount, "trade %d", n)
			assert.Equal(t, refunded, o.RefundedAmount, "trade %d", n)
		}
		mustCheck(t, db)
	})
}

// TestSettleBatchLeavesBusyOrdersToASecondTransaction: a batch does not
// wait, holding its other locks, for an order row another transaction
// holds. It settles the rest first, commits, and settles the busy trade's
// events in a second transaction once the row is free.
func TestSettleBatchLeavesBusyOrdersToASecondTransaction(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	h := newHarness(t, db)
	busyTrade, freeTrade := channelstest.NewTrade(channels.SQB, 50), channelstest.NewTrade(channels.Alipay, 51)
	h.deliver(t, channelstest.PaymentEnvelope(busyTrade, channelstest.Delivery{}), 1)
	evs := []channels.Event{
		h.decode(t, channelstest.RefundEnvelope(busyTrade, refundAt(busyTrade, "R1", 0, 1000, 1), channelstest.Delivery{})),
		h.decode(t, channelstest.PaymentEnvelope(freeTrade, channelstest.Delivery{})),
		h.decode(t, channelstest.RefundEnvelope(busyTrade, refundAt(busyTrade, "R2", 0, 1500, 2), channelstest.Delivery{})),
	}
	for i, ev := range evs {
		h.acquire(t, ev, int64(10+i))
	}

	// Another settler holds the busy trade's order row (and only that row:
	// locked by primary key).
	id := order(t, db, busyTrade).ID
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	var locked int64
	require.NoError(t, holder.NewSelect().Table("ss_channel_order").Column("id").
		Where("id = ?", id).For("UPDATE").Scan(ctx, &locked))

	type outcome struct {
		res []settlement.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.svc.SettleBatch(ctx, evs)
		done <- outcome{res, err}
	}()
	require.Eventually(t, func() bool { return mustClaim(t, h, evs[1]).Status == idempotent.StatusSettled },
		time.Minute, 5*time.Millisecond, "the free trade is settled and committed while the other row is held")
	assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, evs[0]).Status)
	assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, evs[2]).Status)
	select {
	case o := <-done:
		t.Fatalf("SettleBatch returned while the row was held: %+v", o)
	default:
	}

	require.NoError(t, holder.Rollback())
	o := <-done
	require.NoError(t, o.err)
	require.Len(t, o.res, 3)
	assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomePosted, Amount: 1000, SettledAt: o.res[0].SettledAt}, o.res[0])
	assert.Equal(t, idempotent.OutcomePosted, o.res[1].Outcome)
	assert.Equal(t, settlement.Result{Outcome: idempotent.OutcomePosted, Amount: 500, SettledAt: o.res[2].SettledAt}, o.res[2])
	assert.Equal(t, int64(1500), order(t, db, busyTrade).RefundedAmount, "the busy trade's refunds, in order")
	mustCheck(t, db)
}

// TestSettleBatchReportsAPartlySettledBatch: when the second transaction
// (the busy trades') fails, the first has committed; SettleBatch says which
// events it settled, and the others are left ACQUIRED.
func TestSettleBatchReportsAPartlySettledBatch(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	h := newHarness(t, db)
	busyTrade, freeTrade := channelstest.NewTrade(channels.WeChat, 60), channelstest.NewTrade(channels.Alipay, 61)
	h.deliver(t, channelstest.PaymentEnvelope(busyTrade, channelstest.Delivery{}), 1)
	evs := []channels.Event{
		h.decode(t, channelstest.RefundEnvelope(busyTrade, refundAt(busyTrade, "R1", 700, 0, 1), channelstest.Delivery{})),
		h.decode(t, channelstest.PaymentEnvelope(freeTrade, channelstest.Delivery{})),
	}
	for i, ev := range evs {
		h.acquire(t, ev, int64(20+i))
	}
	id := order(t, db, busyTrade).ID
	holder, err := db.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	var locked int64
	require.NoError(t, holder.NewSelect().Table("ss_channel_order").Column("id").
		Where("id = ?", id).For("UPDATE").Scan(context.Background(), &locked))

	// The second transaction waits for the held row until its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res []settlement.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.svc.SettleBatch(ctx, evs)
		done <- outcome{res, err}
	}()
	require.Eventually(t, func() bool { return mustClaim(t, h, evs[1]).Status == idempotent.StatusSettled },
		time.Minute, 5*time.Millisecond)
	cancel()
	o := <-done
	require.ErrorIs(t, o.err, settlement.ErrBatchIncomplete)
	require.Len(t, o.res, 2)
	assert.Equal(t, settlement.Result{}, o.res[0], "the busy trade's refund was not settled")
	assert.Equal(t, idempotent.OutcomePosted, o.res[1].Outcome)
	assert.False(t, o.res[1].SettledAt.IsZero())
	require.NoError(t, holder.Rollback())
	assert.Equal(t, idempotent.StatusAcquired, mustClaim(t, h, evs[0]).Status)
	assert.Zero(t, ledgerRows(t, db, evs[0].Key))
	mustCheck(t, db)
}
