package settlement_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestTotals: the totals sum the ledger and the orders; reconciliation's
// ledger checks find each kind of corruption.
func TestTotals(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		tr := channelstest.NewTrade(channels.Alipay, 1)
		h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 1)
		h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "R1", 0, 580, 1), channelstest.Delivery{}), 2)

		rep := mustCheck(t, db)
		assert.Equal(t, 4, rep.Entries)
		assert.Equal(t, int64(2580+580), rep.Debits)
		assert.Equal(t, rep.Debits, rep.Credits)
		assert.Equal(t, 1, rep.Orders)
		assert.Equal(t, settlement.TenantTotals{Orders: 1, Paid: 2580, Refunded: 580, MerchantPayableNet: 2000}, rep.Tenants[1001])

		bals, err := settlement.Balances(ctx, db, 1001)
		require.NoError(t, err)
		require.Len(t, bals, 2)
		assert.Equal(t, settlement.Balance{
			TenantID: 1001, Channel: channels.Alipay, TradeNo: tr.TradeNo,
			Account: "channel_receivable:ALIPAY", Debit: 2580, Credit: 580,
		}, bals[0])
		assert.Equal(t, int64(-2000), bals[1].Net())

		insert := func(t *testing.T, key, account, dir string, amount int64, trade string) {
			t.Helper()
			_, err := db.NewRaw(`INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no,
				account, direction, amount, currency, created_at) VALUES (1001, ?, 'ALIPAY', ?, ?, ?, ?, 'CNY', ?)`,
				key, trade, account, dir, amount, time.Now().UTC()).Exec(ctx)
			require.NoError(t, err)
		}
		for _, tc := range []struct {
			name    string
			corrupt func(t *testing.T)
			want    map[string]int
		}{
			{"a zero-amount posting", func(t *testing.T) { //nolint:thelper // a test body
				insert(t, "ALIPAY:Z:PAYMENT_RECEIVED", "merchant_payable", "CREDIT", 0, tr.TradeNo)
				insert(t, "ALIPAY:Z:PAYMENT_RECEIVED", "channel_receivable:ALIPAY", "DEBIT", 0, tr.TradeNo)
			}, map[string]int{settlement.CheckLedgerRow: 2, settlement.CheckPostingWithoutClaim: 1}},
			{"a one-sided posting on a trade with no order", func(t *testing.T) { //nolint:thelper // a test body
				insert(t, "ALIPAY:ONE:PAYMENT_RECEIVED", "merchant_payable", "CREDIT", 7, "ONE")
			}, map[string]int{settlement.CheckLedgerRow: 2, settlement.CheckPostingWithoutClaim: 2, settlement.CheckLedgerWithoutOrder: 1}},
			{"an order row that disagrees with the ledger", func(t *testing.T) { //nolint:thelper // a test body
				_, err := db.NewRaw("UPDATE ss_channel_order SET refunded_amount = 600").Exec(ctx)
				require.NoError(t, err)
			}, map[string]int{
				settlement.CheckLedgerRow: 2, settlement.CheckPostingWithoutClaim: 2, settlement.CheckLedgerWithoutOrder: 1,
				settlement.CheckOrderLedger: 1, settlement.CheckOrderState: 1,
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.corrupt(t)
				rep, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{Checks: settlement.LedgerChecks})
				require.NoError(t, err)
				require.Error(t, rep.Err())
				got := map[string]int{}
				for c, n := range rep.Counts() {
					if n > 0 {
						got[c] = n
					}
				}
				assert.Equal(t, tc.want, got, "discrepancies (cumulative over the cases): %+v", rep.Discrepancies)
			})
		}
	})
}
