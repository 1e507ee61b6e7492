package registrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/registrations"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

func TestOpenMovesAndStats(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		now := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		claims := idempotent.NewStore(db, idempotent.WithClock(clock))
		svc, err := settlement.New(db, claims, nil, nil)
		require.NoError(t, err)
		store := &registrations.Store{DB: db, Now: clock}

		register := func(seq int, expiresIn time.Duration) channelstest.Trade {
			t.Helper()
			tr := channelstest.NewTrade(channels.WeChat, seq)
			_, err := svc.RegisterPayment(ctx, settlement.PaymentRequest{
				TenantID: tr.TenantID, Channel: tr.Channel, MerchantID: "1230000109", MerchantOrderNo: tr.MerchantOrderNo,
				Amount: tr.Total, Currency: "CNY", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(expiresIn),
			})
			require.NoError(t, err)
			return tr
		}
		early := register(1, -time.Minute) // past its expiry
		now = now.Add(time.Minute)
		late := register(2, time.Hour)

		open, err := store.Open(ctx, registrations.KindPayment, now.Add(-30*time.Second), 0)
		require.NoError(t, err)
		require.Len(t, open, 1, "only the one past its first wait")
		assert.Equal(t, early.MerchantOrderNo, open[0].MerchantOrderNo)
		assert.Equal(t, "1230000109", open[0].MerchantID)

		open, err = store.Open(ctx, registrations.KindPayment, now, 0)
		require.NoError(t, err)
		require.Len(t, open, 2)
		assert.Equal(t, []string{early.MerchantOrderNo, late.MerchantOrderNo}, []string{open[0].MerchantOrderNo, open[1].MerchantOrderNo}, "oldest first")

		stats, err := store.Stats(ctx)
		require.NoError(t, err)
		require.Len(t, stats, 3*2, "every channel and kind")
		assert.Equal(t, registrations.Stat{
			Channel: channels.WeChat, Kind: registrations.KindPayment, Open: 2,
			Oldest: time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC), PastExpiry: 1,
		}, stats[0])
		assert.Equal(t, registrations.Stat{Channel: channels.WeChat, Kind: registrations.KindRefund}, stats[1])

		now = now.Add(20 * time.Minute)
		ages, err := store.Ages(ctx)
		require.NoError(t, err)
		require.Len(t, ages, 1, "only WECHAT PAYMENT has open registrations")
		assert.Equal(t, registrations.ByAge{Channel: channels.WeChat, Kind: registrations.KindPayment, Counts: []int64{0, 0, 2, 0, 0}}, ages[0],
			"both 20 minutes old")
		now = now.Add(-20 * time.Minute)

		moved, err := store.SetPaymentStatus(ctx, early.TenantID, early.Channel, early.MerchantOrderNo, settlement.RegistrationAbnormal)
		require.NoError(t, err)
		assert.True(t, moved)
		moved, err = store.SetPaymentStatus(ctx, early.TenantID, early.Channel, early.MerchantOrderNo, settlement.RegistrationAbnormal)
		require.NoError(t, err)
		assert.False(t, moved, "ABNORMAL only from REGISTERED")
		moved, err = store.SetPaymentStatus(ctx, early.TenantID, early.Channel, early.MerchantOrderNo, settlement.RegistrationExpired)
		require.NoError(t, err)
		assert.True(t, moved)
		moved, err = store.SetPaymentStatus(ctx, early.TenantID, early.Channel, early.MerchantOrderNo, settlement.RegistrationClosed)
		require.NoError(t, err)
		assert.False(t, moved, "EXPIRED is final")
		_, err = store.SetPaymentStatus(ctx, early.TenantID, early.Channel, early.MerchantOrderNo, settlement.RegistrationSucceeded)
		require.ErrorIs(t, err, registrations.ErrTransition, "only a settlement makes one SUCCEEDED")
		reg, err := svc.GetPaymentRegistration(ctx, early.TenantID, early.Channel, early.MerchantOrderNo)
		require.NoError(t, err)
		assert.Equal(t, settlement.RegistrationExpired, reg.Status)

		// A payment posted after all makes even an EXPIRED registration
		// SUCCEEDED: the money moved.
		dec := channels.NewDecoder(channelstest.Keys())
		res, err := dec.Decode(channelstest.PaymentEnvelope(early, channelstest.Delivery{}))
		require.NoError(t, err)
		acq, err := claims.Acquire(ctx, idempotent.Claim{
			TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
			Fingerprint: res.Event.Fingerprint, Event: []byte("{}"), Source: idempotent.Source{Topic: "t", Offset: 1},
		})
		require.NoError(t, err)
		require.Equal(t, idempotent.Acquired, acq.Kind)
		_, err = svc.Settle(ctx, res.Event)
		require.NoError(t, err)
		reg, err = svc.GetPaymentRegistration(ctx, early.TenantID, early.Channel, early.MerchantOrderNo)
		require.NoError(t, err)
		assert.Equal(t, settlement.RegistrationSucceeded, reg.Status)

		stats, err = store.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), stats[0].Open)
		assert.Zero(t, stats[0].PastExpiry)

		// A refund registration is listed with its trade's merchant order.
		_, err = svc.RegisterRefund(ctx, settlement.RefundRequest{TenantID: early.TenantID, Channel: early.Channel, TradeNo: early.TradeNo, RefundNo: "RF-1", Amount: 10})
		require.NoError(t, err)
		open, err = store.Open(ctx, registrations.KindRefund, now, 0)
		require.NoError(t, err)
		require.Len(t, open, 1)
		assert.Equal(t, early.MerchantOrderNo, open[0].MerchantOrderNo)
		assert.Equal(t, "RF-1", open[0].RefundNo)
		_, err = store.SetRefundStatus(ctx, early.TenantID, early.Channel, early.TradeNo, "RF-1", settlement.RegistrationExpired)
		require.ErrorIs(t, err, registrations.ErrTransition, "a refund registration never expires")
		moved, err = store.SetRefundStatus(ctx, early.TenantID, early.Channel, early.TradeNo, "RF-1", settlement.RegistrationClosed)
		require.NoError(t, err)
		assert.True(t, moved)
	})
}
