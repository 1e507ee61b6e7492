package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestConflictNamesTheFieldAndBothValues: a conflict's x-error names each
// fingerprinted field that differs, the first claim's value against this
// message's: from the claim this batch made, from an ACQUIRED or SETTLED
// claim's stored event, and, once purge has cleared that, from the
// trade's order row (a refund's own amount, which the row does not keep,
// is named as what differs when the order's fields match).
func TestConflictNamesTheFieldAndBothValues(t *testing.T) {
	type env struct {
		*pipelineEnv
		reasons *reasonDeadLetterer
	}
	newEnv := func(t *testing.T) env {
		t.Helper()
		e := newPipelineEnv(t)
		r := &reasonDeadLetterer{}
		e.p.DeadLetterer = r
		e.p.Orders = func(ctx context.Context, tenantID int64, ch channels.Channel, tradeNo string) (settlement.Order, error) {
			return settlement.GetOrder(ctx, e.db, tenantID, ch, tradeNo)
		}
		return env{e, r}
	}
	purge := func(t *testing.T, e env) {
		t.Helper()
		res, err := e.db.ExecContext(context.Background(), "UPDATE ss_channel_idempotent SET event_json = NULL WHERE status = 'SETTLED'")
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.Positive(t, n)
	}
	only := func(t *testing.T, e env) string {
		t.Helper()
		got := e.reasons.letters()
		require.Len(t, got, 1, "one dead letter")
		return got[0]
	}

	t.Run("claimed by the same batch", func(t *testing.T) {
		e := newEnv(t)
		tr := channelstest.NewTrade(channels.Alipay, 601)
		other := tr
		other.Total = 9999
		e.handle(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), channelstest.PaymentEnvelope(other, channelstest.Delivery{Attempt: 1}))
		reason := only(t, e)
		assert.Regexp(t, `^conflict: key ALIPAY:\S+:PAYMENT_RECEIVED already claimed \(by channel-events/1@0\) with another payload: amount \(order_total\) differs: first 2580, this message 9999; fingerprint [0-9a-f]{64}, this message's [0-9a-f]{64}$`, reason)
	})

	t.Run("ACQUIRED claim's stored event", func(t *testing.T) {
		e := newEnv(t)
		tr := channelstest.NewTrade(channels.SQB, 602)
		e.claimLeftAcquired(t, e.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})))
		other := tr
		other.MerchantOrderNo = "POS-OTHER-602"
		e.handle(t, channelstest.PaymentEnvelope(other, channelstest.Delivery{}))
		assert.Contains(t, only(t, e), `with another payload: merchant_order_no differs: first "`+tr.MerchantOrderNo+`", this message "POS-OTHER-602"; fingerprint`)
	})

	t.Run("SETTLED claim's stored event", func(t *testing.T) {
		e := newEnv(t)
		tr := channelstest.NewTrade(channels.WeChat, 603)
		e.handle(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		other := tr
		other.Total, other.MerchantOrderNo = 100, "POS-OTHER-603"
		e.handle(t, channelstest.PaymentEnvelope(other, channelstest.Delivery{}))
		assert.Contains(t, only(t, e), `with another payload: amount (order_total) differs: first 2580, this message 100; merchant_order_no differs: first "`+
			tr.MerchantOrderNo+`", this message "POS-OTHER-603"; fingerprint`)
	})

	t.Run("purged: from the order row", func(t *testing.T) {
		e := newEnv(t)
		tr := channelstest.NewTrade(channels.Alipay, 604)
		e.handle(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		purge(t, e)
		other := tr
		other.MerchantOrderNo = "POS-OTHER-604"
		e.handle(t, channelstest.PaymentEnvelope(other, channelstest.Delivery{}))
		assert.Contains(t, only(t, e), `with another payload: the first claim's stored event was purged, compared with the order row: merchant_order_no differs: order row "`+
			tr.MerchantOrderNo+`", this message "POS-OTHER-604"; fingerprint`)
	})

	t.Run("purged refund: its own amount", func(t *testing.T) {
		e := newEnv(t)
		tr := channelstest.NewTrade(channels.WeChat, 605)
		e.handle(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		e.handle(t, channelstest.RefundEnvelope(tr, channelstest.Refund{No: "RF605", Amount: 500}, channelstest.Delivery{}))
		purge(t, e)
		e.handle(t, channelstest.RefundEnvelope(tr, channelstest.Refund{No: "RF605", Amount: 700}, channelstest.Delivery{}))
		assert.Contains(t, only(t, e), `the first claim's stored event was purged, compared with the order row: order total, currency and merchant_order_no match, so the refund's amount (refund_amount) differs: this message 700`)
	})
}
