package ops_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// baseline settles a consistent world: a WeChat trade paid, a registered
// refund that succeeded, and an Alipay trade paid.
func baseline(w *ledgertest.World) (wx, ali channelstest.Trade) {
	wx = channelstest.NewTrade(channels.WeChat, 1)
	ali = channelstest.NewTrade(channels.Alipay, 2)
	w.Settle(channelstest.PaymentEnvelope(wx, channelstest.Delivery{}))
	w.Settle(channelstest.PaymentEnvelope(ali, channelstest.Delivery{}))
	w.Register(wx, "rf-1", 500)
	w.Settle(channelstest.RefundEnvelope(wx, channelstest.Refund{No: "rf-1", Amount: 500}, channelstest.Delivery{}))
	return wx, ali
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(w *ledgertest.World, wx, ali channelstest.Trade)
		opts   func() settlement.ReconcileOptions
		want   map[string]int // check -> discrepancies; every other check 0
	}{
		{name: "consistent books", mutate: func(*ledgertest.World, channelstest.Trade, channelstest.Trade) {}},
		{
			name: "a posting row lost",
			mutate: func(w *ledgertest.World, wx, _ channelstest.Trade) {
				w.Exec(`DELETE FROM ss_ledger_entry WHERE idempotent_key = ? AND direction = 'DEBIT'`, "WECHAT:"+wx.TradeNo+":PAYMENT_RECEIVED")
			},
			want: map[string]int{settlement.CheckPostingUnbalanced: 1, settlement.CheckOrderLedger: 1},
		},
		{
			name: "postings with no claim",
			mutate: func(w *ledgertest.World, _, ali channelstest.Trade) {
				for _, row := range []struct{ account, dir string }{{"channel_receivable:ALIPAY", "DEBIT"}, {"merchant_payable", "CREDIT"}} {
					w.Exec(`INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code, channel_trade_no, account, direction, amount, currency, created_at)
VALUES (?, ?, 'ALIPAY', ?, ?, ?, 100, 'CNY', ?)`, ali.TenantID, "ALIPAY:"+ali.TradeNo+":REFUND_SUCCEEDED:ghost", ali.TradeNo, row.account, row.dir, time.Now().UTC())
				}
			},
			want: map[string]int{settlement.CheckPostingWithoutClaim: 1, settlement.CheckOrderLedger: 1},
		},
		{
			name: "order paid amount drifted from the ledger",
			mutate: func(w *ledgertest.World, _, ali channelstest.Trade) {
				w.Exec(`UPDATE ss_channel_order SET paid_amount = paid_amount + 1 WHERE channel_trade_no = ?`, ali.TradeNo)
			},
			want: map[string]int{settlement.CheckOrderLedger: 1},
		},
		{
			name: "ledger rows for a trade with no order",
			mutate: func(w *ledgertest.World, _, ali channelstest.Trade) {
				w.Exec(`DELETE FROM ss_channel_order WHERE channel_trade_no = ?`, ali.TradeNo)
			},
			want: map[string]int{settlement.CheckLedgerWithoutOrder: 1},
		},
		{
			name: "refund without payment pending for two days",
			mutate: func(w *ledgertest.World, _, _ channelstest.Trade) {
				tr := channelstest.NewTrade(channels.WeChat, 3)
				w.Settle(channelstest.RefundEnvelope(tr, channelstest.Refund{No: "rf-9", Amount: 100}, channelstest.Delivery{}))
				w.Exec(`UPDATE ss_channel_order SET created_at = ? WHERE channel_trade_no = ?`, ledgertest.Ago(48*time.Hour), tr.TradeNo)
			},
			want: map[string]int{settlement.CheckPendingPayment: 1, settlement.CheckRefundUnregistered: 1},
		},
		{
			name: "unregistered refunds are not discrepancies where refunds are not pre-registered",
			mutate: func(w *ledgertest.World, _, _ channelstest.Trade) {
				tr := channelstest.NewTrade(channels.WeChat, 3)
				w.Settle(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
				w.Settle(channelstest.RefundEnvelope(tr, channelstest.Refund{No: "rf-9", Amount: 100}, channelstest.Delivery{}))
			},
			opts: func() settlement.ReconcileOptions { return settlement.ReconcileOptions{} },
		},
		{
			name: "a ledger row with a negative amount and a foreign account",
			mutate: func(w *ledgertest.World, wx, _ channelstest.Trade) {
				w.Exec(`UPDATE ss_ledger_entry SET amount = -amount, account = 'channel_receivable:ALIPAY' WHERE idempotent_key = ? AND direction = 'DEBIT'`,
					"WECHAT:"+wx.TradeNo+":PAYMENT_RECEIVED")
			},
			want: map[string]int{settlement.CheckLedgerRow: 1, settlement.CheckPostingUnbalanced: 1, settlement.CheckOrderLedger: 1},
		},
		{
			name: "an order whose status disagrees with its amounts",
			mutate: func(w *ledgertest.World, _, ali channelstest.Trade) {
				w.Exec(`UPDATE ss_channel_order SET status = 'REFUNDED' WHERE channel_trade_no = ?`, ali.TradeNo)
			},
			want: map[string]int{settlement.CheckOrderState: 1},
		},
		{
			name: "refund pending for an hour is not yet reported",
			mutate: func(w *ledgertest.World, _, _ channelstest.Trade) {
				tr := channelstest.NewTrade(channels.WeChat, 3)
				w.Register(channelstest.NewTrade(channels.WeChat, 1), "rf-x", 1) // keep refunds registered
				w.Settle(channelstest.RefundEnvelope(tr, channelstest.Refund{No: "rf-9", Amount: 100}, channelstest.Delivery{}))
				w.Exec(`UPDATE ss_channel_order SET created_at = ? WHERE channel_trade_no = ?`, ledgertest.Ago(time.Hour), tr.TradeNo)
			},
			want: map[string]int{settlement.CheckRefundUnregistered: 1},
		},
		{
			name: "refund callback with a different amount than registered",
			mutate: func(w *ledgertest.World, wx, _ channelstest.Trade) {
				w.Register(wx, "rf-2", 300)
				w.Settle(channelstest.RefundEnvelope(wx, channelstest.Refund{No: "rf-2", Amount: 200}, channelstest.Delivery{}))
			},
			want: map[string]int{settlement.CheckRefundMismatch: 1},
		},
		{
			name: "registration open for two days with no callback",
			mutate: func(w *ledgertest.World, wx, _ channelstest.Trade) {
				w.Register(wx, "rf-3", 100)
				w.Exec(`UPDATE ss_refund_request SET created_at = ? WHERE refund_no = 'rf-3'`, ledgertest.Ago(48*time.Hour))
			},
			want: map[string]int{settlement.CheckRefundOpen: 1},
		},
		{
			name: "over-refund never dead-lettered",
			mutate: func(w *ledgertest.World, _, ali channelstest.Trade) {
				_, res := w.Settle(channelstest.RefundEnvelope(ali, channelstest.Refund{No: "big", Amount: ali.Total + 1}, channelstest.Delivery{}))
				require.Equal(w.TB, idempotent.OutcomeOverRefund, res.Outcome)
			},
			want: map[string]int{settlement.CheckOverRefundNotDeadLettered: 1},
		},
		{
			name: "over-refund dead-lettered is fine",
			mutate: func(w *ledgertest.World, _, ali channelstest.Trade) {
				ev, _ := w.Settle(channelstest.RefundEnvelope(ali, channelstest.Refund{No: "big", Amount: ali.Total + 1}, channelstest.Delivery{}))
				require.NoError(w.TB, w.Claims.MarkDeadLettered(context.Background(), ev.TenantID, ev.Key))
			},
		},
		{
			name: "a window that excludes the damage",
			mutate: func(w *ledgertest.World, wx, _ channelstest.Trade) {
				w.Exec(`DELETE FROM ss_ledger_entry WHERE idempotent_key = ? AND direction = 'DEBIT'`, "WECHAT:"+wx.TradeNo+":PAYMENT_RECEIVED")
			},
			opts: func() settlement.ReconcileOptions {
				return settlement.ReconcileOptions{From: time.Now().Add(time.Hour)}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, w *ledgertest.World) { //nolint:thelper // a test body run once per dialect
				wx, ali := baseline(w)
				tt.mutate(w, wx, ali)
				o := settlement.ReconcileOptions{RefundsPreregistered: true}
				if tt.opts != nil {
					o = tt.opts()
				}
				rep, err := settlement.Reconcile(context.Background(), w.DB, o)
				require.NoError(t, err)
				want := map[string]int{}
				for _, c := range rep.Checks {
					want[c] = tt.want[c]
				}
				assert.Equal(t, want, rep.Counts(), "discrepancies: %+v", rep.Discrepancies)
				assert.Equal(t, len(tt.want) == 0, rep.OK())
				assert.Equal(t, len(tt.want) == 0, rep.Err() == nil)
			})
		})
	}
}

// eachDialect runs fn on a fresh world on MariaDB and on the embedded
// SQLite database: the checks are one implementation for both.
func eachDialect(t *testing.T, fn func(t *testing.T, w *ledgertest.World)) {
	t.Helper()
	for name, open := range map[string]func(testing.TB) *bun.DB{"mysql": sqldbtest.MustMySQL, "sqlite": sqldbtest.MustSQLite} {
		t.Run(name, func(t *testing.T) {
			fn(t, ledgertest.On(t, open(t)))
		})
	}
}

func TestSelectChecks(t *testing.T) {
	tests := []struct {
		name        string
		o           settlement.ReconcileOptions
		wantRun     []string
		wantSkipped map[string]string
		wantErr     bool
	}{
		{
			name:        "default: every check but refund_unregistered",
			wantRun:     slices.DeleteFunc(slices.Clone(settlement.Checks), func(c string) bool { return c == settlement.CheckRefundUnregistered }),
			wantSkipped: map[string]string{settlement.CheckRefundUnregistered: settlement.SkippedNotPreregistered},
		},
		{
			name:        "refunds pre-registered: every check",
			o:           settlement.ReconcileOptions{RefundsPreregistered: true},
			wantRun:     settlement.Checks,
			wantSkipped: map[string]string{},
		},
		{
			name:    "only the named checks, in their order, refund_unregistered when asked for",
			o:       settlement.ReconcileOptions{Checks: []string{settlement.CheckRefundUnregistered, settlement.CheckPostingUnbalanced}},
			wantRun: []string{settlement.CheckPostingUnbalanced, settlement.CheckRefundUnregistered},
		},
		{
			name:    "skip wins over checks",
			o:       settlement.ReconcileOptions{RefundsPreregistered: true, Checks: []string{settlement.CheckOrderLedger, settlement.CheckOrderState}, Skip: []string{settlement.CheckOrderState}},
			wantRun: []string{settlement.CheckOrderLedger},
		},
		{name: "an unknown check", o: settlement.ReconcileOptions{Checks: []string{"posting_balance"}}, wantErr: true},
		{name: "an unknown skip", o: settlement.ReconcileOptions{Skip: []string{"nope"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, skipped, err := settlement.SelectChecks(tt.o)
			if tt.wantErr {
				require.ErrorIs(t, err, settlement.ErrUnknownCheck)
				_, err = settlement.Reconcile(context.Background(), nil, tt.o)
				require.ErrorIs(t, err, settlement.ErrUnknownCheck, "refused before touching the database")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantRun, run)
			assert.Len(t, skipped, len(settlement.Checks)-len(run))
			for c, reason := range tt.wantSkipped {
				assert.Equal(t, reason, skipped[c])
			}
		})
	}
	for _, c := range settlement.Checks {
		assert.NotEmpty(t, settlement.CheckSummaries[c], "summary of %s", c)
	}
	assert.Len(t, settlement.CheckSummaries, len(settlement.Checks))
}

// TestReconcileNamesTheAlteredRow: on a correct ledger whose refunds were
// never registered, the default reconciliation finds nothing; one altered
// ledger amount is found and named by row id, key and account.
func TestReconcileNamesTheAlteredRow(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *ledgertest.World) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		tr := channelstest.NewTrade(channels.Alipay, 7)
		w.Settle(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		w.Settle(channelstest.RefundEnvelope(tr, channelstest.Refund{No: "rf-1", Amount: 0, Cumulative: 300}, channelstest.Delivery{}))
		rep, err := settlement.Reconcile(ctx, w.DB, settlement.ReconcileOptions{})
		require.NoError(t, err)
		require.True(t, rep.OK(), "discrepancies: %+v", rep.Discrepancies)
		assert.Equal(t, settlement.SkippedNotPreregistered, rep.Skipped[settlement.CheckRefundUnregistered])

		key := "ALIPAY:" + tr.TradeNo + ":PAYMENT_RECEIVED"
		var id int64
		require.NoError(t, w.DB.NewRaw(`SELECT id FROM ss_ledger_entry WHERE idempotent_key = ? AND account = 'merchant_payable'`, key).Scan(ctx, &id))
		w.Exec(`UPDATE ss_ledger_entry SET amount = amount - 1 WHERE id = ?`, id)

		rep, err = settlement.Reconcile(ctx, w.DB, settlement.ReconcileOptions{})
		require.NoError(t, err)
		require.False(t, rep.OK())
		var named *settlement.Discrepancy
		for i, d := range rep.Discrepancies {
			if d.Check == settlement.CheckPostingUnbalanced {
				named = &rep.Discrepancies[i]
			}
		}
		require.NotNil(t, named, "discrepancies: %+v", rep.Discrepancies)
		assert.Equal(t, key, named.Key)
		assert.Contains(t, named.LedgerIDs, id)
		assert.Contains(t, named.Detail, fmt.Sprintf("#%d CREDIT merchant_payable %d", id, tr.Total-1))
		assert.Equal(t, map[string]int{settlement.CheckPostingUnbalanced: 1, settlement.CheckOrderLedger: 1}, nonZero(rep.Counts()))

		only, err := settlement.Reconcile(ctx, w.DB, settlement.ReconcileOptions{Skip: []string{settlement.CheckPostingUnbalanced, settlement.CheckOrderLedger}})
		require.NoError(t, err)
		assert.True(t, only.OK(), "skipping the checks that see it: %+v", only.Discrepancies)
	})
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
