package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// ruleFloor writes what the exactly-once rule requires for every event and
// nothing more, batch events at a time, in stream order, on one
// connection: the claims inserted ACQUIRED by one multi-row insert
// committed on its own, then one transaction with the batch's order rows
// (one multi-row upsert that leaves each at its state after the batch),
// its ledger rows (one multi-row insert) and the fence (one UPDATE moving
// exactly those claims from ACQUIRED to SETTLED, checked to have moved
// them all). The rows and columns are the pipeline's own
// (idempotent.Store.AcquireMany and SettleMany, settlement.SettleBatch),
// decided in memory by settlement's own decision (settlement.Decide): the
// floor under what the pipeline's database work can cost. It returns the elapsed time.
func ruleFloor(ctx context.Context, conn bun.Conn, events []storageEvent, batch int) (time.Duration, error) {
	orders := map[floorTrade]*settlement.Order{}
	start := time.Now()
	for rest := events; len(rest) > 0; {
		n := min(batch, len(rest))
		if err := floorBatch(ctx, conn, rest[:n], orders); err != nil {
			return 0, err
		}
		rest = rest[n:]
	}
	return time.Since(start), nil
}

// floorTrade identifies an order row.
type floorTrade struct {
	tenant  int64
	channel channels.Channel
	tradeNo string
}

// floorStatement is one SQL statement being built: its text and arguments.
type floorStatement struct {
	sql  strings.Builder
	args []any
}

// floorBatch claims events and settles them.
func floorBatch(ctx context.Context, conn bun.Conn, events []storageEvent, orders map[floorTrade]*settlement.Order) error {
	now := time.Now().UTC().Truncate(time.Microsecond)

	// The claims, in (tenant, key) order as AcquireMany inserts them, with
	// its batch token, committed by themselves.
	sorted := slices.Clone(events)
	slices.SortFunc(sorted, func(a, b storageEvent) int {
		return cmp.Or(cmp.Compare(a.ev.TenantID, b.ev.TenantID), cmp.Compare(a.ev.Key, b.ev.Key))
	})
	var token [16]byte
	if _, err := rand.Read(token[:]); err != nil {
		return fmt.Errorf("rule floor: batch token: %w", err)
	}
	var claims floorStatement
	claims.sql.WriteString("INSERT INTO ss_channel_idempotent (tenant_id, idempotent_key, event_type, status, fingerprint, " +
		"event_json, source_topic, source_partition, source_offset, created_at, batch_token) VALUES ")
	for i, e := range sorted {
		if i > 0 {
			claims.sql.WriteString(", ")
		}
		claims.sql.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		claims.args = append(claims.args, e.ev.TenantID, string(e.ev.Key), string(e.ev.Type), string(idempotent.StatusAcquired),
			e.ev.Fingerprint, e.json, mainTopic, e.partition, e.offset, now, token[:])
	}
	claims.sql.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	res, err := conn.ExecContext(ctx, claims.sql.String(), claims.args...)
	if err != nil {
		return fmt.Errorf("rule floor: claim %d events: %w", len(events), err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("rule floor: claim %d events: rows affected: %w", len(events), err)
	} else if n != int64(len(events)) {
		return fmt.Errorf("rule floor: claim %d events: %d rows inserted", len(events), n)
	}

	// The decisions, in stream order, on the orders as they stand.
	outcomes := make([]idempotent.Outcome, len(events))
	touched := map[floorTrade]bool{}
	var touchedOrder []floorTrade
	var ledger floorStatement
	ledger.sql.WriteString("INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, account, " +
		"direction, amount, currency, created_at) VALUES ")
	posted := 0
	for i, e := range events {
		ev := e.ev
		t := floorTrade{ev.TenantID, ev.Channel, ev.TradeNo}
		o := orders[t]
		if o == nil {
			o = &settlement.Order{
				TenantID: ev.TenantID, Channel: ev.Channel, TradeNo: ev.TradeNo, MerchantOrderNo: ev.MerchantOrderNo,
				Currency: ev.Currency, Amount: ev.OrderTotal, Status: settlement.OrderPendingPayment, CreatedAt: now, UpdatedAt: now,
			}
			orders[t] = o
		}
		if !touched[t] {
			touched[t] = true
			touchedOrder = append(touchedOrder, t)
		}
		// settlement's own decision, on the order as the floor keeps it.
		d, err := settlement.Decide(*o, ev, now)
		if err != nil {
			return fmt.Errorf("rule floor: %s: %w", ev.Key, err)
		}
		if d.Reversal != 0 {
			return fmt.Errorf("rule floor: %s: a cancel's reversal is not among the rows the floor writes", ev.Key)
		}
		if d.Write {
			*o = d.Order
		}
		outcomes[i] = d.Outcome
		if d.Outcome != idempotent.OutcomePosted {
			continue
		}
		amount := d.Amount
		debit, credit := settlement.ReceivableAccount(ev.Channel), settlement.AccountMerchantPayable
		if ev.Type == idempotent.RefundSucceeded {
			debit, credit = credit, debit
		}
		for _, side := range []struct{ account, direction string }{
			{debit, string(settlement.Debit)}, {credit, string(settlement.Credit)},
		} {
			if posted > 0 {
				ledger.sql.WriteString(", ")
			}
			posted++
			ledger.sql.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			ledger.args = append(ledger.args, ev.TenantID, string(ev.Key), string(ev.Channel), ev.TradeNo, side.account,
				side.direction, amount, ev.Currency, now)
		}
	}

	// The order rows: every trade of the batch at its state after the
	// batch, new or not, in (tenant, channel, trade) order.
	slices.SortFunc(touchedOrder, func(a, b floorTrade) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.channel, b.channel), cmp.Compare(a.tradeNo, b.tradeNo))
	})
	var upsert floorStatement
	upsert.sql.WriteString("INSERT INTO ss_channel_order (tenant_id, channel_code, channel_trade_no, merchant_order_no, amount, " +
		"paid_amount, refunded_amount, max_cumulative_refund, currency, status, paid_at, last_refund_at, created_at, updated_at) VALUES ")
	for i, t := range touchedOrder {
		o := orders[t]
		if i > 0 {
			upsert.sql.WriteString(", ")
		}
		upsert.sql.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		upsert.args = append(upsert.args, o.TenantID, string(o.Channel), o.TradeNo, o.MerchantOrderNo, o.Amount,
			o.PaidAmount, o.RefundedAmount, o.MaxCumulativeRefund, o.Currency, string(o.Status), o.PaidAt, o.LastRefundAt,
			o.CreatedAt, o.UpdatedAt)
	}
	upsert.sql.WriteString(" ON DUPLICATE KEY UPDATE paid_amount = VALUES(paid_amount), refunded_amount = VALUES(refunded_amount), " +
		"max_cumulative_refund = VALUES(max_cumulative_refund), status = VALUES(status), paid_at = VALUES(paid_at), " +
		"last_refund_at = VALUES(last_refund_at), updated_at = VALUES(updated_at)")

	fence := fenceStatement(events, outcomes, now)

	err = conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, upsert.sql.String(), upsert.args...); err != nil {
			return fmt.Errorf("write %d orders: %w", len(touchedOrder), err)
		}
		if posted > 0 {
			if _, err := tx.ExecContext(ctx, ledger.sql.String(), ledger.args...); err != nil {
				return fmt.Errorf("post %d ledger rows: %w", posted, err)
			}
		}
		res, err := tx.ExecContext(ctx, fence.sql.String(), fence.args...)
		if err != nil {
			return fmt.Errorf("fence %d claims: %w", len(events), err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("fence %d claims: rows affected: %w", len(events), err)
		} else if n != int64(len(events)) {
			return fmt.Errorf("fence %d claims: %d were ACQUIRED", len(events), n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rule floor: settle %d events: %w", len(events), err)
	}
	return nil
}

// fenceStatement is the one UPDATE that settles a batch's claims: by the
// unique key, one range per tenant, only those still ACQUIRED. Outcomes
// other than POSTED (refunds that move no money) are listed one by one.
func fenceStatement(events []storageEvent, outcomes []idempotent.Outcome, now time.Time) *floorStatement {
	var f floorStatement
	f.sql.WriteString("UPDATE ss_channel_idempotent FORCE INDEX (uk_idem) SET status = ?, settle_outcome = ")
	f.args = append(f.args, string(idempotent.StatusSettled))
	var others []int
	for i, o := range outcomes {
		if o != idempotent.OutcomePosted {
			others = append(others, i)
		}
	}
	if len(others) == 0 {
		f.sql.WriteString("?")
	} else {
		f.sql.WriteString("CASE")
		for _, i := range others {
			f.sql.WriteString(" WHEN tenant_id = ? AND idempotent_key = ? THEN ?")
			f.args = append(f.args, events[i].ev.TenantID, string(events[i].ev.Key), string(outcomes[i]))
		}
		f.sql.WriteString(" ELSE ? END")
	}
	f.args = append(f.args, string(idempotent.OutcomePosted))
	f.sql.WriteString(", settled_at = ? WHERE (")
	f.args = append(f.args, now)
	byTenant := map[int64][]string{}
	var tenants []int64
	for _, e := range events {
		if byTenant[e.ev.TenantID] == nil {
			tenants = append(tenants, e.ev.TenantID)
		}
		byTenant[e.ev.TenantID] = append(byTenant[e.ev.TenantID], string(e.ev.Key))
	}
	slices.Sort(tenants)
	for i, t := range tenants {
		if i > 0 {
			f.sql.WriteString(" OR ")
		}
		f.sql.WriteString("(tenant_id = ? AND idempotent_key IN (?))")
		f.args = append(f.args, t, bun.List(byTenant[t]))
	}
	f.sql.WriteString(") AND status = ?")
	f.args = append(f.args, string(idempotent.StatusAcquired))
	return &f
}
