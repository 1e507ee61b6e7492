package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// baseline settles a consistent world: a WeChat trade paid, a registered
// refund that succeeded, and an Alipay trade paid.
func baseline(w *world) (wx, ali channelstest.Trade) {
	wx = channelstest.NewTrade(channels.WeChat, 1)
	ali = channelstest.NewTrade(channels.Alipay, 2)
	w.settle(channelstest.PaymentEnvelope(wx, channelstest.Delivery{}))
	w.settle(channelstest.PaymentEnvelope(ali, channelstest.Delivery{}))
	w.register(wx, "rf-1", 500)
	w.settle(channelstest.RefundEnvelope(wx, channelstest.Refund{No: "rf-1", Amount: 500}, channelstest.Delivery{}))
	return wx, ali
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(w *world, wx, ali channelstest.Trade)
		opts   func() ops.ReconcileOptions
		want   map[string]int // check -> discrepancies; every other check 0
	}{
		{name: "consistent books", mutate: func(*world, channelstest.Trade, channelstest.Trade) {}},
		{
			name: "a posting row lost",
			mutate: func(w *world, wx, _ channelstest.Trade) {
				w.exec(`DELETE FROM ss_ledger_entry WHERE idempotent_key = ? AND direction = 'DEBIT'`, "WECHAT:"+wx.TradeNo+":PAYMENT_RECEIVED")
			},
			want: map[string]int{ops.CheckPostingUnbalanced: 1, ops.CheckOrderLedger: 1},
		},
		{
			name: "postings with no claim",
			mutate: func(w *world, _, ali channelstest.Trade) {
				for _, row := range []struct{ account, dir string }{{"channel_receivable:ALIPAY", "DEBIT"}, {"merchant_payable", "CREDIT"}} {
					w.exec(`INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, account, direction, amount, currency, created_at)
VALUES (?, ?, 'ALIPAY', ?, ?, ?, 100, 'CNY', ?)`, ali.TenantID, "ALIPAY:"+ali.TradeNo+":REFUND_SUCCEEDED:ghost", ali.TradeNo, row.account, row.dir, time.Now().UTC())
				}
			},
			want: map[string]int{ops.CheckPostingWithoutClaim: 1, ops.CheckOrderLedger: 1},
		},
		{
			name: "order paid amount drifted from the ledger",
			mutate: func(w *world, _, ali channelstest.Trade) {
				w.exec(`UPDATE ss_channel_order SET paid_amount = paid_amount + 1 WHERE channel_trade_no = ?`, ali.TradeNo)
			},
			want: map[string]int{ops.CheckOrderLedger: 1},
		},
		{
			name: "ledger rows for a trade with no order",
			mutate: func(w *world, _, ali channelstest.Trade) {
				w.exec(`DELETE FROM ss_channel_order WHERE channel_trade_no = ?`, ali.TradeNo)
			},
			want: map[string]int{ops.CheckLedgerWithoutOrder: 1},
		},
		{
			name: "refund without payment pending for two days",
			mutate: func(w *world, _, _ channelstest.Trade) {
				tr := channelstest.NewTrade(channels.WeChat, 3)
				w.settle(channelstest.RefundEnvelope(tr, channelstest.Refund{No: "rf-9", Amount: 100}, channelstest.Delivery{}))
				w.exec(`UPDATE ss_channel_order SET created_at = ? WHERE channel_trade_no = ?`, ago(48*time.Hour), tr.TradeNo)
			},
			want: map[string]int{ops.CheckPendingPayment: 1, ops.CheckRefundUnregistered: 1},
		},
		{
			name: "refund pending for an hour is not yet reported",
			mutate: func(w *world, _, _ channelstest.Trade) {
				tr := channelstest.NewTrade(channels.WeChat, 3)
				w.register(channelstest.NewTrade(channels.WeChat, 1), "rf-x", 1) // keep refunds registered
				w.settle(channelstest.RefundEnvelope(tr, channelstest.Refund{No: "rf-9", Amount: 100}, channelstest.Delivery{}))
				w.exec(`UPDATE ss_channel_order SET created_at = ? WHERE channel_trade_no = ?`, ago(time.Hour), tr.TradeNo)
			},
			want: map[string]int{ops.CheckRefundUnregistered: 1},
		},
		{
			name: "refund callback with a different amount than registered",
			mutate: func(w *world, wx, _ channelstest.Trade) {
				w.register(wx, "rf-2", 300)
				w.settle(channelstest.RefundEnvelope(wx, channelstest.Refund{No: "rf-2", Amount: 200}, channelstest.Delivery{}))
			},
			want: map[string]int{ops.CheckRefundMismatch: 1},
		},
		{
			name: "registration open for two days with no callback",
			mutate: func(w *world, wx, _ channelstest.Trade) {
				w.register(wx, "rf-3", 100)
				w.exec(`UPDATE ss_refund_request SET created_at = ? WHERE refund_no = 'rf-3'`, ago(48*time.Hour))
			},
			want: map[string]int{ops.CheckRefundOpen: 1},
		},
		{
			name: "over-refund never dead-lettered",
			mutate: func(w *world, _, ali channelstest.Trade) {
				_, res := w.settle(channelstest.RefundEnvelope(ali, channelstest.Refund{No: "big", Amount: ali.Total + 1}, channelstest.Delivery{}))
				require.Equal(w.t, idempotent.OutcomeOverRefund, res.Outcome)
			},
			want: map[string]int{ops.CheckOverRefundNotDeadLettered: 1},
		},
		{
			name: "over-refund dead-lettered is fine",
			mutate: func(w *world, _, ali channelstest.Trade) {
				ev, _ := w.settle(channelstest.RefundEnvelope(ali, channelstest.Refund{No: "big", Amount: ali.Total + 1}, channelstest.Delivery{}))
				require.NoError(w.t, w.claims.MarkDeadLettered(context.Background(), ev.TenantID, ev.Key))
			},
		},
		{
			name: "a window that excludes the damage",
			mutate: func(w *world, wx, _ channelstest.Trade) {
				w.exec(`DELETE FROM ss_ledger_entry WHERE idempotent_key = ? AND direction = 'DEBIT'`, "WECHAT:"+wx.TradeNo+":PAYMENT_RECEIVED")
			},
			opts: func() ops.ReconcileOptions { return ops.ReconcileOptions{From: time.Now().Add(time.Hour)} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			wx, ali := baseline(w)
			tt.mutate(w, wx, ali)
			var o ops.ReconcileOptions
			if tt.opts != nil {
				o = tt.opts()
			}
			rep, err := ops.Reconcile(context.Background(), w.db, o)
			require.NoError(t, err)
			want := map[string]int{}
			for _, c := range ops.Checks {
				want[c] = tt.want[c]
			}
			assert.Equal(t, want, rep.Counts(), "discrepancies: %+v", rep.Discrepancies)
			assert.Equal(t, len(tt.want) == 0, rep.OK())
		})
	}
}
