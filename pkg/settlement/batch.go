package settlement

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// tradeKey identifies an order row.
type tradeKey struct {
	tenant  int64
	channel channels.Channel
	tradeNo string
}

func tradeOf(ev channels.Event) tradeKey { return tradeKey{ev.TenantID, ev.Channel, ev.TradeNo} }

func compareTrades(x, y tradeKey) int {
	return cmp.Or(cmp.Compare(x.tenant, y.tenant), cmp.Compare(x.channel, y.channel), cmp.Compare(x.tradeNo, y.tradeNo))
}

// SettleBatch settles the ACQUIRED claims of evs in one transaction, with
// one commit for all of them: results[i] is evs[i]'s, exactly as Settle
// would have given it had the events been settled one after another in the
// order of evs. A claim found SETTLED already gives FenceLost for that
// event only.
//
// The work is set-based: one locking read of the claims, one upsert and one
// locking read of the order rows, one write of the changed orders, one
// insert of every ledger row and one fence UPDATE per tenant, whatever the
// batch size; only refunds with registrations add statements of their own.
// The decisions are Settle's own (decide), made in memory on the locked
// rows. Locks are taken claims first, in (tenant, key) order, then order
// rows in (tenant, channel, trade) order, so batches and single settles
// never wait on each other in a cycle.
//
// Errors: any failure rolls the whole batch back, writes nothing and leaves
// every claim ACQUIRED; the caller then settles the events one at a time
// with Settle, whose contract tells permanent errors from transient ones
// and which handles a ledger duplicate. An empty evs gives no results. Two
// events with one (tenant, key) are refused with ErrInvalidEvent.
func (s *Service) SettleBatch(ctx context.Context, evs []channels.Event) ([]Result, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	keys := make([]idempotent.TenantKey, len(evs))
	seen := make(map[idempotent.TenantKey]bool, len(evs))
	for i, ev := range evs {
		if err := ev.Validate(); err != nil {
			return nil, fmt.Errorf("settle batch: %s: %w: %w", ev.Key, ErrInvalidEvent, err)
		}
		keys[i] = idempotent.TenantKey{TenantID: ev.TenantID, Key: ev.Key}
		if seen[keys[i]] {
			return nil, fmt.Errorf("settle batch: %w: %s appears twice", ErrInvalidEvent, ev.Key)
		}
		seen[keys[i]] = true
	}

	sts := make([]settlement, len(evs))
	lost := make([]bool, len(evs))
	err := s.db.RunInTx(ctx, s.txOptions(), func(ctx context.Context, tx bun.Tx) error {
		for i := range evs {
			sts[i], lost[i] = settlement{ev: evs[i]}, false
		}
		// (1) The claims, locked in one read.
		claims, err := s.claims.LockMany(ctx, tx, keys)
		if err != nil {
			return err
		}
		for i, ev := range evs {
			rec, ok := claims[keys[i]]
			switch {
			case !ok:
				return fmt.Errorf("%s: lock claim: %w", ev.Key, idempotent.ErrNotFound)
			case rec.Status == idempotent.StatusSettled:
				lost[i] = true
			case rec.Fingerprint != ev.Fingerprint:
				return fmt.Errorf("%s: %w: claim %s, event %s", ev.Key, ErrFingerprintMismatch, rec.Fingerprint, ev.Fingerprint)
			}
		}

		// (2) The order rows, created where absent, then locked.
		now := s.claims.Now()
		orders, err := s.lockOrders(ctx, tx, evs, lost, now)
		if err != nil {
			return err
		}

		// The registrations of the batch's refunded trades, read and locked
		// at once; matched in memory below.
		regs, err := s.lockRegistrations(ctx, tx, evs, lost)
		if err != nil {
			return err
		}

		// (3) Decide each event in order on its (locked, in-memory) order.
		touched := map[tradeKey]bool{}
		var ledger []ledgerRow
		outcomes := make(map[idempotent.TenantKey]idempotent.Outcome, len(evs))
		for i, ev := range evs {
			if lost[i] {
				continue
			}
			t := tradeOf(ev)
			next, write, err := decide(&sts[i], *orders[t], now)
			if err != nil {
				return fmt.Errorf("%s: %w", ev.Key, err)
			}
			if write {
				*orders[t] = next
				touched[t] = true
			}
			if sts[i].outcome == idempotent.OutcomePosted {
				rows, err := postingRows(ev, sts[i].amount, now)
				if err != nil {
					return err
				}
				ledger = append(ledger, rows...)
			}
			if ev.Type == idempotent.RefundSucceeded && sts[i].outcome != idempotent.OutcomeOverRefund {
				trade := regs[t]
				reg, found := &Registration{}, false
				for _, r := range trade {
					if r.RefundNo == ev.RefundNo {
						reg, found = r, true
						break
					}
				}
				sums := func() (regSums, error) { return sumRegistrations(trade), nil }
				if err := s.applyRegistration(ctx, tx, &sts[i], next, now, reg, found, sums); err != nil {
					return fmt.Errorf("%s: %w", ev.Key, err)
				}
			}
			outcomes[keys[i]] = sts[i].outcome
		}

		// (4) Write: orders, ledger, then the fence.
		if err := s.writeOrders(ctx, tx, orders, touched); err != nil {
			return err
		}
		if len(ledger) > 0 {
			if err := insertLedger(ctx, tx, ledger); err != nil {
				return fmt.Errorf("post %d rows: %w", len(ledger), err)
			}
		}
		if err := s.claims.SettleMany(ctx, tx, outcomes); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("settle batch of %d: %w", len(evs), err)
	}
	at := s.claims.Now()
	out := make([]Result, len(evs))
	for i := range evs {
		if lost[i] {
			out[i] = Result{FenceLost: true, SettledAt: at}
			continue
		}
		out[i] = Result{Outcome: sts[i].outcome, Amount: sts[i].amount, SettledAt: at}
		s.report(ctx, &sts[i])
	}
	return out, nil
}

// lockOrders creates the order rows of the batch's trades where absent
// (the first event of a trade in the batch sets its total, merchant order
// number and currency) with one upsert that changes nothing on existing
// rows, then locks them with one read, in (tenant, channel, trade) order.
func (s *Service) lockOrders(ctx context.Context, tx bun.Tx, evs []channels.Event, lost []bool, now time.Time) (map[tradeKey]*Order, error) {
	firsts := map[tradeKey]bool{}
	var fresh []Order
	for i, ev := range evs {
		t := tradeOf(ev)
		if lost[i] || firsts[t] {
			continue
		}
		firsts[t] = true
		fresh = append(fresh, Order{
			TenantID: ev.TenantID, Channel: ev.Channel, TradeNo: ev.TradeNo, MerchantOrderNo: ev.MerchantOrderNo,
			Amount: ev.OrderTotal, Currency: ev.Currency, Status: OrderPendingPayment, CreatedAt: now, UpdatedAt: now,
		})
	}
	orders := make(map[tradeKey]*Order, len(fresh))
	if len(fresh) == 0 {
		return orders, nil
	}
	slices.SortFunc(fresh, func(a, b Order) int {
		return compareTrades(tradeKey{a.TenantID, a.Channel, a.TradeNo}, tradeKey{b.TenantID, b.Channel, b.TradeNo})
	})
	q := tx.NewInsert().Model(&fresh).
		Column("tenant_id", "channel_code", "channel_trade_no", "merchant_order_no", "amount", "currency",
			"status", "created_at", "updated_at").
		Returning("")
	if s.sqlite {
		q = q.On("CONFLICT DO NOTHING")
	} else {
		q = q.On("DUPLICATE KEY UPDATE").Set("id = id")
	}
	if _, err := q.Exec(ctx); err != nil {
		return nil, fmt.Errorf("create %d orders: %w", len(fresh), err)
	}

	tenants, chans, trades := map[int64]bool{}, map[string]bool{}, map[string]bool{}
	for _, o := range fresh {
		tenants[o.TenantID], chans[string(o.Channel)], trades[o.TradeNo] = true, true, true
	}
	var rows []Order
	sel := tx.NewSelect().Model(&rows).
		Where("tenant_id IN (?)", bun.In(keysOf(tenants))).
		Where("channel_code IN (?)", bun.In(keysOf(chans))).
		Where("channel_trade_no IN (?)", bun.In(keysOf(trades))).
		OrderExpr("tenant_id, channel_code, channel_trade_no")
	if !s.sqlite {
		sel = sel.For("UPDATE")
	}
	if err := sel.Scan(ctx); err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(fresh), err)
	}
	for i := range rows {
		rows[i].normalise()
		if t := (tradeKey{rows[i].TenantID, rows[i].Channel, rows[i].TradeNo}); firsts[t] {
			orders[t] = &rows[i]
		}
	}
	for t := range firsts {
		if orders[t] == nil {
			return nil, fmt.Errorf("order %s/%s: %w", t.channel, t.tradeNo, errNoOrder)
		}
	}
	return orders, nil
}

// lockRegistrations reads, with one locking read, the refund registrations
// of every trade the batch refunds, by trade.
func (s *Service) lockRegistrations(ctx context.Context, tx bun.Tx, evs []channels.Event, lost []bool) (map[tradeKey][]*Registration, error) {
	out := map[tradeKey][]*Registration{}
	tenants, chans, trades := map[int64]bool{}, map[string]bool{}, map[string]bool{}
	want := map[tradeKey]bool{}
	for i, ev := range evs {
		if lost[i] || ev.Type != idempotent.RefundSucceeded {
			continue
		}
		want[tradeOf(ev)] = true
		tenants[ev.TenantID], chans[string(ev.Channel)], trades[ev.TradeNo] = true, true, true
	}
	if len(want) == 0 {
		return out, nil
	}
	var rows []Registration
	q := tx.NewSelect().Model(&rows).
		Where("tenant_id IN (?)", bun.In(keysOf(tenants))).
		Where("channel_code IN (?)", bun.In(keysOf(chans))).
		Where("channel_trade_no IN (?)", bun.In(keysOf(trades))).
		OrderExpr("id")
	if !s.sqlite {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("lock registrations of %d trades: %w", len(want), err)
	}
	for i := range rows {
		rows[i].normalise()
		if t := (tradeKey{rows[i].TenantID, rows[i].Channel, rows[i].TradeNo}); want[t] {
			out[t] = append(out[t], &rows[i])
		}
	}
	return out, nil
}

// writeOrders writes the amounts, status and times of the touched orders
// (locked by tx) with one statement: an upsert on the primary key whose
// insert branch never runs, since every row exists.
func (s *Service) writeOrders(ctx context.Context, tx bun.Tx, orders map[tradeKey]*Order, touched map[tradeKey]bool) error {
	if len(touched) == 0 {
		return nil
	}
	rows := make([]Order, 0, len(touched))
	for t := range touched {
		rows = append(rows, *orders[t])
	}
	slices.SortFunc(rows, func(a, b Order) int { return cmp.Compare(a.ID, b.ID) })
	changed := []string{"paid_amount", "refunded_amount", "max_cumulative_refund", "status", "paid_at", "last_refund_at", "updated_at"}
	q := tx.NewInsert().Model(&rows).
		Column("id", "tenant_id", "channel_code", "channel_trade_no", "merchant_order_no", "amount",
			"paid_amount", "refunded_amount", "max_cumulative_refund", "currency", "status",
			"paid_at", "last_refund_at", "created_at", "updated_at").
		Returning("")
	if s.sqlite {
		q = q.On("CONFLICT (id) DO UPDATE")
		for _, c := range changed {
			q = q.Set(c + " = EXCLUDED." + c)
		}
	} else {
		q = q.On("DUPLICATE KEY UPDATE")
		for _, c := range changed {
			q = q.Set(c + " = VALUES(" + c + ")")
		}
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("update %d orders: %w", len(rows), err)
	}
	return nil
}

func keysOf[K cmp.Ordered](m map[K]bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
