package settlement

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// errNoOrder is returned by selectOrder when the trade has no order row.
var errNoOrder = errors.New("no order row")

func selectOrder(ctx context.Context, db bun.IDB, tenantID int64, ch channels.Channel, tradeNo string, forUpdate bool) (Order, error) {
	var ord Order
	q := db.NewSelect().Model(&ord).
		Where("tenant_id = ?", tenantID).
		Where("channel_code = ?", string(ch)).
		Where("channel_trade_no = ?", tradeNo)
	if forUpdate {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Order{}, fmt.Errorf("order %s/%s: %w", ch, tradeNo, errNoOrder)
		}
		return Order{}, fmt.Errorf("read order %s/%s: %w", ch, tradeNo, err)
	}
	ord.normalise()
	return ord, nil
}

// TradeMerchant reads, from the pool (the latest committed row), what the
// trade's order row records of its payment's merchant check: the merchant
// the payment was checked and bound for (Order.BoundMerchantID; "" when
// there is no order row, no payment posted, or a payment posted unchecked)
// and whether a payment is posted. The worker asks it about a Shouqianba
// refund or cancel that names no merchant. Errors are database errors.
func (s *Service) TradeMerchant(ctx context.Context, tenantID int64, ch channels.Channel, tradeNo string) (merchant string, paid bool, err error) {
	var row struct {
		Merchant string `bun:"bound_merchant_id"`
		Paid     int64  `bun:"paid_amount"`
	}
	err = s.db.NewSelect().Table("ss_channel_order").Column("bound_merchant_id", "paid_amount").
		Where("tenant_id = ?", tenantID).Where("channel_code = ?", string(ch)).Where("channel_trade_no = ?", tradeNo).
		Scan(ctx, &row)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("read the merchant of order %s/%s: %w", ch, tradeNo, err)
	}
	return row.Merchant, row.Paid > 0, nil
}

// postingRows builds the two balanced rows of ev's posting of amount fen.
// A non-positive amount is refused: the ledger never holds a zero row.
func postingRows(ev channels.Event, amount int64, now time.Time) ([]ledgerRow, error) {
	if amount <= 0 {
		return nil, fmt.Errorf("post %s: refusing a ledger amount of %d", ev.Key, amount)
	}
	debit, credit := ReceivableAccount(ev.Channel), AccountMerchantPayable
	if ev.Type == idempotent.RefundSucceeded {
		debit, credit = credit, debit
	}
	rows := []ledgerRow{
		{Account: debit, Direction: string(Debit)},
		{Account: credit, Direction: string(Credit)},
	}
	for i := range rows {
		rows[i].TenantID = ev.TenantID
		rows[i].IdempotentKey = string(ev.Key)
		rows[i].Channel = string(ev.Channel)
		rows[i].TradeNo = ev.TradeNo
		rows[i].Amount = amount
		rows[i].Currency = ev.Currency
		rows[i].CreatedAt = now
	}
	return rows, nil
}

// insertLedger inserts rows with one statement. A hit on the ledger's
// unique key wraps errAlreadyPosted.
func insertLedger(ctx context.Context, tx bun.Tx, rows []ledgerRow) error {
	_, err := tx.NewInsert().Model(&rows).
		Column("tenant_id", "idempotent_key", "channel_code", "channel_trade_no", "account", "direction",
			"amount", "currency", "created_at").
		Returning("").
		Exec(ctx)
	if err != nil {
		// ss_ledger_entry has one unique key besides its auto-increment
		// primary key: uk_ledger_source.
		if err = idempotent.ClassifyDuplicate(err); errors.Is(err, idempotent.ErrDuplicateKey) {
			return fmt.Errorf("%w: %w", errAlreadyPosted, err)
		}
		return err
	}
	return nil
}
