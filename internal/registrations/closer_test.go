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

// TestCloserClosesOnAClosedAnswer: a closed answer to a payment query
// closes the payment registration of its merchant order number, to a
// refund query the refund registration; told again, nothing changes; a
// registration already SUCCEEDED stays SUCCEEDED; an answer naming no
// registration closes nothing.
func TestCloserClosesOnAClosedAnswer(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		claims := idempotent.NewStore(db)
		svc, err := settlement.New(db, claims, nil, nil)
		require.NoError(t, err)
		closer := registrations.Closer{Store: registrations.NewStore(db)}

		register := func(tr channelstest.Trade) {
			t.Helper()
			_, err := svc.RegisterPayment(ctx, settlement.PaymentRequest{
				TenantID: tr.TenantID, Channel: tr.Channel, MerchantID: "1230000109", MerchantOrderNo: tr.MerchantOrderNo,
				Amount: tr.Total, Currency: "CNY", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour),
			})
			require.NoError(t, err)
		}
		status := func(tr channelstest.Trade) settlement.RegistrationStatus {
			t.Helper()
			reg, err := svc.GetPaymentRegistration(ctx, tr.TenantID, tr.Channel, tr.MerchantOrderNo)
			require.NoError(t, err)
			return reg.Status
		}
		closed := func(tr channelstest.Trade, kind channels.QueryKind, tradeNo, refundNo string) channels.QueryAnswered {
			return channels.QueryAnswered{
				Target: channels.QueryTarget{
					TenantID: tr.TenantID, Channel: tr.Channel, Kind: kind, MerchantID: "1230000109",
					MerchantOrderNo: tr.MerchantOrderNo, TradeNo: tradeNo, RefundNo: refundNo,
				},
				AskedAt: now, Answer: channels.QueryAnswer{Outcome: channels.QueryClosed, RawState: "CLOSED"},
			}
		}

		unpaid := channelstest.NewTrade(channels.WeChat, 7001)
		register(unpaid)
		require.NoError(t, closer.QueryClosed(ctx, closed(unpaid, channels.QueryPayment, "", "")))
		assert.Equal(t, settlement.RegistrationClosed, status(unpaid))
		require.NoError(t, closer.QueryClosed(ctx, closed(unpaid, channels.QueryPayment, "", "")), "redelivered")
		assert.Equal(t, settlement.RegistrationClosed, status(unpaid))

		// Paid: the registration is SUCCEEDED, and a closed answer (a
		// stale or contradictory one) leaves it so.
		paid := channelstest.NewTrade(channels.WeChat, 7002)
		register(paid)
		res, err := channels.NewDecoder(channelstest.Keys()).Decode(channelstest.PaymentEnvelope(paid, channelstest.Delivery{}))
		require.NoError(t, err)
		acq, err := claims.Acquire(ctx, idempotent.Claim{
			TenantID: res.Event.TenantID, Key: res.Event.Key, EventType: res.Event.Type,
			Fingerprint: res.Event.Fingerprint, Event: []byte("{}"), Source: idempotent.Source{Topic: "t", Offset: 1},
		})
		require.NoError(t, err)
		require.Equal(t, idempotent.Acquired, acq.Kind)
		_, err = svc.Settle(ctx, res.Event)
		require.NoError(t, err)
		require.Equal(t, settlement.RegistrationSucceeded, status(paid))
		require.NoError(t, closer.QueryClosed(ctx, closed(paid, channels.QueryPayment, "", "")))
		assert.Equal(t, settlement.RegistrationSucceeded, status(paid), "money moved wins")

		// A failed refund closes its refund registration, once.
		_, err = svc.RegisterRefund(ctx, settlement.RefundRequest{TenantID: paid.TenantID, Channel: paid.Channel, TradeNo: paid.TradeNo, RefundNo: "RF-9", Amount: 10})
		require.NoError(t, err)
		refundStatus := func() string {
			t.Helper()
			var s string
			require.NoError(t, db.NewSelect().Table("ss_refund_request").Column("status").
				Where("channel_trade_no = ?", paid.TradeNo).Where("refund_no = ?", "RF-9").Scan(ctx, &s))
			return s
		}
		require.NoError(t, closer.QueryClosed(ctx, closed(paid, channels.QueryRefund, "", "RF-9")), "no trade number: nothing to find")
		assert.Equal(t, "REGISTERED", refundStatus())
		require.NoError(t, closer.QueryClosed(ctx, closed(paid, channels.QueryRefund, paid.TradeNo, "RF-9")))
		assert.Equal(t, "CLOSED", refundStatus())
		require.NoError(t, closer.QueryClosed(ctx, closed(paid, channels.QueryRefund, paid.TradeNo, "RF-9")), "redelivered")
		assert.Equal(t, "CLOSED", refundStatus())
		assert.Equal(t, settlement.RegistrationSucceeded, status(paid), "a refund's answer leaves the payment alone")
	})
}
