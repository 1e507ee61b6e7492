package settlement_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/dbengine"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// paymentRequest registers tr's payment as the service starting it would.
func paymentRequest(tr channelstest.Trade) settlement.PaymentRequest {
	created := tr.PaidAt.Add(-time.Minute)
	return settlement.PaymentRequest{
		TenantID: tr.TenantID, Channel: tr.Channel, MerchantID: "1900000100", MerchantOrderNo: tr.MerchantOrderNo,
		Amount: tr.Total, Currency: "CNY", CreatedAt: created, ExpiresAt: created.Add(5 * time.Minute),
	}
}

func paymentRegistration(tb testing.TB, h *harness, tr channelstest.Trade) settlement.PaymentRegistration {
	tb.Helper()
	reg, err := h.svc.GetPaymentRegistration(context.Background(), tr.TenantID, tr.Channel, tr.MerchantOrderNo)
	require.NoError(tb, err)
	return reg
}

func TestPaymentRegistrationIsSettledInEitherOrder(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)

		t.Run("registered, then paid", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.WeChat, 1)
			reg, err := h.svc.RegisterPayment(ctx, paymentRequest(tr))
			require.NoError(t, err)
			assert.Equal(t, settlement.RegistrationRegistered, reg.Status)
			assert.False(t, reg.Existing)
			assert.Nil(t, reg.TradeNo)

			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 1)
			got := paymentRegistration(t, h, tr)
			assert.Equal(t, settlement.RegistrationSucceeded, got.Status)
			require.NotNil(t, got.TradeNo)
			assert.Equal(t, tr.TradeNo, *got.TradeNo)
		})

		t.Run("paid, then registered", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.Alipay, 2)
			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 2)
			reg, err := h.svc.RegisterPayment(ctx, paymentRequest(tr))
			require.NoError(t, err)
			assert.Equal(t, settlement.RegistrationSucceeded, reg.Status, "its payment is posted already")
			require.NotNil(t, reg.TradeNo)
			assert.Equal(t, tr.TradeNo, *reg.TradeNo)
			assert.Equal(t, settlement.RegistrationSucceeded, paymentRegistration(t, h, tr).Status)
		})

		t.Run("a batch of payments marks each registration with its own trade", func(t *testing.T) {
			var values [][]byte
			var trades []channelstest.Trade
			for seq := 10; seq < 16; seq++ {
				tr := channelstest.NewTrade(channels.SQB, seq)
				trades = append(trades, tr)
				if seq%2 == 0 {
					_, err := h.svc.RegisterPayment(ctx, paymentRequest(tr))
					require.NoError(t, err)
				}
				values = append(values, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
			}
			h.deliverBatch(t, values, 100)
			for i, tr := range trades {
				reg, err := h.svc.GetPaymentRegistration(ctx, tr.TenantID, tr.Channel, tr.MerchantOrderNo)
				if i%2 == 1 {
					require.ErrorIs(t, err, settlement.ErrPaymentRegistrationNotFound, "settling creates no registration")
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, settlement.RegistrationSucceeded, reg.Status)
				require.NotNil(t, reg.TradeNo)
				assert.Equal(t, tr.TradeNo, *reg.TradeNo)
			}
		})

		t.Run("the same registration again changes nothing; another is a conflict", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.WeChat, 3)
			first, err := h.svc.RegisterPayment(ctx, paymentRequest(tr))
			require.NoError(t, err)
			again := paymentRequest(tr)
			again.CreatedAt = again.CreatedAt.Add(time.Second) // not compared
			same, err := h.svc.RegisterPayment(ctx, again)
			require.NoError(t, err)
			assert.True(t, same.Existing)
			assert.Equal(t, first.ID, same.ID)
			assert.Equal(t, first.UpdatedAt, same.UpdatedAt)

			for name, change := range map[string]func(*settlement.PaymentRequest){
				"amount":   func(r *settlement.PaymentRequest) { r.Amount++ },
				"merchant": func(r *settlement.PaymentRequest) { r.MerchantID = "1900000101" },
				"expiry":   func(r *settlement.PaymentRequest) { r.ExpiresAt = r.ExpiresAt.Add(time.Minute) },
			} {
				r := paymentRequest(tr)
				change(&r)
				got, err := h.svc.RegisterPayment(ctx, r)
				require.ErrorIs(t, err, settlement.ErrRegistrationConflict, name)
				assert.Contains(t, err.Error(), name[:5])
				assert.True(t, got.Existing)
				assert.Equal(t, paymentRequest(tr).Amount, got.Amount, "the first registration stands")
			}
			assert.Equal(t, first.Amount, paymentRegistration(t, h, tr).Amount)
		})

		t.Run("merchant order numbers compare byte for byte", func(t *testing.T) {
			lower := channelstest.NewTrade(channels.WeChat, 4)
			lower.MerchantOrderNo = "order-a"
			upper := lower
			upper.MerchantOrderNo = "ORDER-A"
			_, err := h.svc.RegisterPayment(ctx, paymentRequest(lower))
			require.NoError(t, err)
			r := paymentRequest(upper)
			r.Amount++
			reg, err := h.svc.RegisterPayment(ctx, r)
			require.NoError(t, err, "another order number, not a conflict")
			assert.False(t, reg.Existing)
		})

		t.Run("bad requests are refused before the database", func(t *testing.T) {
			tr := channelstest.NewTrade(channels.WeChat, 5)
			for name, change := range map[string]func(*settlement.PaymentRequest){
				"zero amount":   func(r *settlement.PaymentRequest) { r.Amount = 0 },
				"no merchant":   func(r *settlement.PaymentRequest) { r.MerchantID = "" },
				"expired first": func(r *settlement.PaymentRequest) { r.ExpiresAt = r.CreatedAt },
				"absurd expiry": func(r *settlement.PaymentRequest) { r.ExpiresAt = r.CreatedAt.Add(365 * 24 * time.Hour) },
				"bad channel":   func(r *settlement.PaymentRequest) { r.Channel = "PAYPAL" },
				"currency":      func(r *settlement.PaymentRequest) { r.Currency = "USD" },
			} {
				r := paymentRequest(tr)
				change(&r)
				_, err := h.svc.RegisterPayment(ctx, r)
				require.ErrorIs(t, err, settlement.ErrInvalidRequest, name)
			}
			_, err := h.svc.GetPaymentRegistration(ctx, tr.TenantID, tr.Channel, tr.MerchantOrderNo)
			require.ErrorIs(t, err, settlement.ErrPaymentRegistrationNotFound)
		})
	})
}

// TestPaymentRegistrationRacesItsPayment registers and pays many orders at
// once, each registration and its payment on goroutines of their own (as
// two partitions would consume them), and checks that every registration
// ends SUCCEEDED: on one InnoDB server (MariaDB, MySQL) without the
// backstop, since whichever commits second sees the other; on TiDB and a
// Galera cluster, whose locking reads may miss a concurrent insert, after
// SettleFromOrders.
func TestPaymentRegistrationRacesItsPayment(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	h := newHarness(t, db)
	waits := sqldbtest.ExpectedEngine() != dbengine.TiDB && len(sqldbtest.Nodes()) <= 1
	const n = 60
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	trades := make([]channelstest.Trade, n)
	start := make(chan struct{})
	for i := range n {
		tr := channelstest.NewTrade([]channels.Channel{channels.WeChat, channels.Alipay, channels.SQB}[i%3], 1000+i)
		trades[i] = tr
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			err := retry(func() error { _, err := h.svc.RegisterPayment(ctx, paymentRequest(tr)); return err })
			if err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if _, err := h.tryDeliver(ctx, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), int64(i)); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	moved, err := h.svc.SettleFromOrders(ctx, 0)
	require.NoError(t, err)
	t.Logf("registrations left for the backstop: %d of %d", moved, n)
	if waits {
		assert.Zero(t, moved, "nothing was left for the backstop")
	}
	for _, tr := range trades {
		reg := paymentRegistration(t, h, tr)
		assert.Equal(t, settlement.RegistrationSucceeded, reg.Status, "%s/%s", tr.Channel, tr.MerchantOrderNo)
		if assert.NotNil(t, reg.TradeNo) {
			assert.Equal(t, tr.TradeNo, *reg.TradeNo)
		}
	}
	mustCheck(t, db)
}

func TestSettleFromOrdersSettlesARegistrationThatMissedItsPayment(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		paidTr := channelstest.NewTrade(channels.WeChat, 1)
		openTr := channelstest.NewTrade(channels.WeChat, 2)
		for _, tr := range []channelstest.Trade{paidTr, openTr} {
			_, err := h.svc.RegisterPayment(ctx, paymentRequest(tr))
			require.NoError(t, err)
		}
		h.deliver(t, channelstest.PaymentEnvelope(paidTr, channelstest.Delivery{}), 1)
		// What a registration and a settlement that committed at once on
		// an engine without waiting locking reads leave: the order paid,
		// its registration open.
		_, err := db.NewUpdate().Table("ss_payment_registration").
			Set("status = 'REGISTERED'").Set("channel_trade_no = NULL").
			Where("merchant_order_no = ?", paidTr.MerchantOrderNo).Exec(ctx)
		require.NoError(t, err)

		moved, err := h.svc.SettleFromOrders(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, 1, moved)
		reg := paymentRegistration(t, h, paidTr)
		assert.Equal(t, settlement.RegistrationSucceeded, reg.Status)
		require.NotNil(t, reg.TradeNo)
		assert.Equal(t, paidTr.TradeNo, *reg.TradeNo)
		assert.Equal(t, settlement.RegistrationRegistered, paymentRegistration(t, h, openTr).Status, "no payment, still open")

		moved, err = h.svc.SettleFromOrders(ctx, 0)
		require.NoError(t, err)
		assert.Zero(t, moved, "again: nothing")
	})
}
