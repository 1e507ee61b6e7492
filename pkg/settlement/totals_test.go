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

func TestCheck(t *testing.T) {
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
			want    []string
		}{
			{"a zero-amount posting", func(t *testing.T) { //nolint:thelper // a test body
				insert(t, "ALIPAY:Z:PAYMENT_RECEIVED", "merchant_payable", "CREDIT", 0, tr.TradeNo)
				insert(t, "ALIPAY:Z:PAYMENT_RECEIVED", "channel_receivable:ALIPAY", "DEBIT", 0, tr.TradeNo)
			}, []string{"zero or negative"}},
			{"a one-sided posting on a trade with no order", func(t *testing.T) { //nolint:thelper // a test body
				insert(t, "ALIPAY:ONE:PAYMENT_RECEIVED", "merchant_payable", "CREDIT", 7, "ONE")
			}, []string{"debits 0, credits 7", "1 rows, want one DEBIT and one CREDIT", "no order row", "merchant_payable net credit"}},
			{"an order row that disagrees with the ledger", func(t *testing.T) { //nolint:thelper // a test body
				_, err := db.NewRaw("UPDATE ss_channel_order SET refunded_amount = 600").Exec(ctx)
				require.NoError(t, err)
			}, []string{"paid 2580 − refunded 600", "highest cumulative 580"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.corrupt(t)
				rep, err := settlement.Check(ctx, db)
				require.NoError(t, err)
				require.False(t, rep.OK())
				require.Error(t, rep.Err())
				for _, w := range tc.want {
					assert.Contains(t, rep.Err().Error(), w)
				}
			})
		}
	})
}
