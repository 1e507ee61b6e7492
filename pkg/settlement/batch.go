package settlement

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// SettleBatch settles the ACQUIRED claims of evs in one transaction, with
// one commit for all of them: results[i] is evs[i]'s, exactly as Settle
// would have given it had the events been settled one after another in the
// order of evs. A claim found SETTLED already gives FenceLost for that
// event only.
//
// Locks are taken claims first, sorted by (tenant, key), then order rows,
// sorted by (tenant, channel, trade), so batches and single settles never
// wait on each other in a cycle.
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
	seen := make(map[idempotent.TenantKey]bool, len(evs))
	for _, ev := range evs {
		if err := ev.Validate(); err != nil {
			return nil, fmt.Errorf("settle batch: %s: %w: %w", ev.Key, ErrInvalidEvent, err)
		}
		k := idempotent.TenantKey{TenantID: ev.TenantID, Key: ev.Key}
		if seen[k] {
			return nil, fmt.Errorf("settle batch: %w: %s appears twice", ErrInvalidEvent, ev.Key)
		}
		seen[k] = true
	}

	sts := make([]settlement, len(evs))
	lost := make([]bool, len(evs))
	err := s.db.RunInTx(ctx, s.txOptions(), func(ctx context.Context, tx bun.Tx) error {
		for i := range evs {
			sts[i], lost[i] = settlement{ev: evs[i]}, false
		}
		byClaim := make([]int, len(evs))
		for i := range byClaim {
			byClaim[i] = i
		}
		slices.SortFunc(byClaim, func(a, b int) int {
			return cmp.Or(cmp.Compare(evs[a].TenantID, evs[b].TenantID), cmp.Compare(evs[a].Key, evs[b].Key))
		})
		for _, i := range byClaim {
			switch err := s.lockClaim(ctx, tx, evs[i]); {
			case errors.Is(err, errFenceLost):
				lost[i] = true
			case err != nil:
				return fmt.Errorf("%s: %w", evs[i].Key, err)
			}
		}

		now := s.claims.Now()
		type trade struct {
			tenant  int64
			channel channels.Channel
			tradeNo string
		}
		tradeOf := func(ev channels.Event) trade { return trade{ev.TenantID, ev.Channel, ev.TradeNo} }
		var trades []int // index of the first event of each trade
		firsts := map[trade]bool{}
		for i, ev := range evs {
			if !lost[i] && !firsts[tradeOf(ev)] {
				firsts[tradeOf(ev)] = true
				trades = append(trades, i)
			}
		}
		slices.SortFunc(trades, func(a, b int) int {
			x, y := evs[a], evs[b]
			return cmp.Or(cmp.Compare(x.TenantID, y.TenantID), cmp.Compare(x.Channel, y.Channel), cmp.Compare(x.TradeNo, y.TradeNo))
		})
		orders := make(map[trade]*Order, len(trades))
		for _, i := range trades {
			ord, err := s.lockOrder(ctx, tx, evs[i], now)
			if err != nil {
				return err
			}
			orders[tradeOf(evs[i])] = &ord
		}

		for i := range evs {
			if lost[i] {
				continue
			}
			if err := s.apply(ctx, tx, &sts[i], orders[tradeOf(evs[i])], now); err != nil {
				return fmt.Errorf("%s: %w", evs[i].Key, err)
			}
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
