package statementbook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/pkg/statements"
)

// queryRefund is one refund of a needs_query item the querier is to ask
// about: a statement line with a refund number.
type queryRefund struct {
	tradeNo, refundNo string
	amount            int64
}

// queryWork makes the refunds of the needs_query items the querier's work
// and says in each item's Query what the querier does about it.
//
// A refund the statement names but no callback brought becomes a refund
// registration (ss_refund_request, REGISTERED, the statement line's own
// amount, the callback's key), which the querier already leases and asks
// about once its first wait from now is over, and which the worker's
// settlement of the refund makes SUCCEEDED: the same row whichever of the
// callback, the answer or the statement comes first. A registration that
// exists is left as it is, so a second run adds nothing (the unique key
// uk_refund_request is the judge when two runs race). A per-trade refund
// total (Alipay, Shouqianba) stands for the day's refund lines of the
// trade: those whose key has no claim yet become registrations. Payments
// are not registered here: a payment registration is the initiating
// service's promise of an order and its expiry, which a statement line
// does not give.
func queryWork(ctx context.Context, db bun.IDB, tenant int64, ch channels.Channel, items []PublishItem, lines map[string]statementLine, now time.Time) error {
	perItem := make([][]queryRefund, len(items))
	var keys []string
	for i, it := range items {
		switch {
		case it.RefundNo != "":
			amount := it.Amount
			if l, ok := lines[lineKey(it.TradeNo, it.RefundNo)]; ok {
				amount = l.Amount
			}
			perItem[i] = []queryRefund{{it.TradeNo, it.RefundNo, amount}}
		case it.Key == "": // a per-trade refund total: the day's refund lines of the trade
			for _, l := range lines {
				if statements.Kind(l.Kind) == statements.KindRefund && l.TradeNo == it.TradeNo && l.RefundNo != "" {
					perItem[i] = append(perItem[i], queryRefund{l.TradeNo, l.RefundNo, l.Amount})
				}
			}
			slices.SortFunc(perItem[i], func(a, b queryRefund) int { return strings.Compare(a.refundNo, b.refundNo) })
		}
		for _, r := range perItem[i] {
			if k, err := idempotent.NewRefundKey(string(ch), r.tradeNo, r.refundNo); err == nil {
				keys = append(keys, string(k))
			}
		}
	}
	claimed, err := claimedKeys(ctx, db, tenant, keys)
	if err != nil {
		return err
	}
	at := now.UTC().Truncate(time.Microsecond)
	for i := range items {
		if perItem[i] == nil {
			items[i].Query = fmt.Sprintf("not the querier's work: it asks about registered payments and refunds, "+
				"and a statement line gives no payment registration; query the order by hand (%s)", orderQuery(ch))
			if items[i].Key == "" {
				items[i].Query = fmt.Sprintf("not the querier's work: no refund line of the trade names a refund number to ask about; "+
					"query the order by hand (%s)", orderQuery(ch))
			}
			continue
		}
		var says []string
		for _, r := range perItem[i] {
			key, err := idempotent.NewRefundKey(string(ch), r.tradeNo, r.refundNo)
			if err != nil {
				says = append(says, fmt.Sprintf("refund %s: not the querier's work: %v", r.refundNo, err))
				continue
			}
			if _, ok := claimed[string(key)]; ok {
				continue // its callback reached the worker: not what is missing
			}
			k := string(key)
			reg := settlement.Registration{
				TenantID: tenant, Channel: ch, TradeNo: r.tradeNo, RefundNo: r.refundNo, Amount: r.amount,
				Status: settlement.RegistrationRegistered, Key: &k, CreatedAt: at, UpdatedAt: at,
			}
			_, err = db.NewInsert().Model(&reg).
				Column("tenant_id", "channel_code", "channel_trade_no", "refund_no", "amount", "status",
					"idempotent_key", "created_at", "updated_at").Exec(ctx)
			if err := idempotent.ClassifyDuplicate(err); err != nil && !errors.Is(err, idempotent.ErrDuplicateKey) {
				return fmt.Errorf("publish missing: register refund %s/%s for the querier: %w", r.tradeNo, r.refundNo, err)
			}
			q, err := settlement.RefundQueryOf(ctx, db, tenant, ch, r.tradeNo, r.refundNo)
			if err != nil {
				return fmt.Errorf("publish missing: %w", err)
			}
			s := q.String()
			if len(perItem[i]) > 1 {
				s = "refund " + r.refundNo + ": " + s
			}
			says = append(says, s)
		}
		if len(says) == 0 {
			says = append(says, "every refund line of the trade has reached the worker: reconcile the day again")
		}
		items[i].Query = strings.Join(says, "; ")
	}
	return nil
}
