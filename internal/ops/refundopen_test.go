package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestRefundOpenSaysWhatTheQuerierDoes: each refund_open item says whether
// the querier asks about it, and its last answer, or why it cannot ask: a
// trade whose order names no bound merchant cannot be asked about; with
// one, the registration is asked after its first wait; once asked, the
// item carries the last answer of ss_query_log; stopped, it says so.
func TestRefundOpenSaysWhatTheQuerierDoes(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *ledgertest.World) { //nolint:thelper // a test body run once per dialect
		wx, _ := baseline(w)
		w.Register(wx, "rf-open", 100)
		w.Exec(`UPDATE ss_refund_request SET created_at = ? WHERE refund_no = 'rf-open'`, ledgertest.Ago(48*time.Hour))
		detail := func() string {
			t.Helper()
			rep, err := settlement.Reconcile(context.Background(), w.DB, settlement.ReconcileOptions{Checks: []string{settlement.CheckRefundOpen}})
			require.NoError(t, err)
			require.Len(t, rep.Discrepancies, 1, "%+v", rep.Discrepancies)
			d := rep.Discrepancies[0]
			require.Equal(t, settlement.CheckRefundOpen, d.Check)
			require.Equal(t, "rf-open", d.RefundNo)
			return d.Detail
		}

		assert.Contains(t, detail(), "the querier cannot ask: no order of the trade names a bound merchant")

		w.Exec(`UPDATE ss_channel_order SET bound_merchant_id = '1230000109' WHERE channel_trade_no = ?`, wx.TradeNo)
		assert.Contains(t, detail(), "the querier asks after its first wait; not asked yet")

		asked := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		w.Exec(`INSERT INTO ss_query_log (tenant_id, channel_code, kind, merchant_id, merchant_order_no, channel_trade_no, refund_no,
  asked_at, answer, raw_state, detail, published, querier) VALUES (?, 'WECHAT', 'REFUND', '1230000109', ?, ?, 'rf-open', ?, 'refund_pending', 'PROCESSING', 'wechat refund rf-open: PROCESSING', 0, 'q1')`,
			wx.TenantID, wx.MerchantOrderNo, wx.TradeNo, asked)
		w.Exec(`UPDATE ss_refund_request SET query_count = 1, query_next_at = ? WHERE refund_no = 'rf-open'`, asked.Add(time.Minute))
		got := detail()
		assert.Contains(t, got, "with no callback; the querier is asking (1 query so far, next at 2026-03-01T08:01:00Z)")
		assert.Contains(t, got, "last answer refund_pending (PROCESSING) at 2026-03-01T08:00:00Z: wechat refund rf-open: PROCESSING")

		w.Exec(`UPDATE ss_refund_request SET query_stopped = 1, query_next_at = NULL, status = 'ABNORMAL' WHERE refund_no = 'rf-open'`)
		got = detail()
		assert.Contains(t, got, "the querier stopped asking after 1 query; the registration is ABNORMAL")
		assert.Contains(t, got, "last answer refund_pending (PROCESSING)")
	})
}
