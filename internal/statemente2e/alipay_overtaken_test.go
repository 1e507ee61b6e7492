package statemente2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// TestAlipayRefundLostThenOvertakenAcrossDays: an Alipay trade refunded on
// two days whose first refund's callback is held back until after the
// second's. The second callback reports the cumulative amount, so its
// posting, dated to the second day, carries both refunds, and the first
// callback, arriving at last, moves no money. The statements show each
// refund on its own day. Reconciled with only the first day imported, the
// first refund is missing from the ledger; once the second day is
// imported, the running totals of the trade's refunds agree at the end of
// it, and both days reconcile clean, before and after the late callback.
// Beside it, a refund that the ledger dates 23:59:59.9 and the statement to
// the next day, and a refund whose callback stays away until the end, which
// must show as missing all along.
func TestAlipayRefundLostThenOvertakenAcrossDays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel) // after the worker's clean-up, which stops it
	w := newWorld(ctx, t)
	_, code := w.consumer("migrate")
	require.Zero(t, code, "consumer migrate")

	day1, day2 := "2024-06-01", "2024-06-02"
	at := func(day string, clock string) time.Time {
		ts, err := time.ParseInLocation(time.DateTime, day+" "+clock, statements.Beijing)
		require.NoError(t, err)
		return ts
	}
	newTrade := func(seq int, paid time.Time) channelstest.Trade {
		tr := channelstest.NewTrade(channels.Alipay, 30000+seq)
		tr.TenantID, tr.Total, tr.PaidAt = tenant, 10000, paid
		return tr
	}
	// overtaken: 7.94 refunded on day 1, 20.79 on day 2 (28.73 so far).
	overtaken := newTrade(1, at(day1, "11:02:03"))
	first := channelstest.Refund{No: "RF-OVT-1", Cumulative: 794, At: at(day1, "15:20:00")}
	second := channelstest.Refund{No: "RF-OVT-2", Cumulative: 2873, At: at(day2, "10:05:00")}
	// midnight: refunded at 23:59:59.9 by the callback, on day 2 by the
	// statement.
	midnight := newTrade(2, at(day1, "12:00:00"))
	lateRefund := channelstest.Refund{No: "RF-MID-1", Cumulative: 1500, At: time.Date(2024, 6, 1, 23, 59, 59, 900_000_000, statements.Beijing)}
	// missing: a refund on day 2 whose callback stays away until the end.
	missing := newTrade(3, at(day1, "13:00:00"))
	lost := channelstest.Refund{No: "RF-MIS-1", Cumulative: 600, At: at(day2, "11:00:00")}

	dec := channels.NewDecoder(channelstest.Keys())
	var events []channels.Event
	msg := func(tr channelstest.Trade, value []byte) demo.Message {
		res, err := dec.Decode(value)
		require.NoError(t, err)
		events = append(events, res.Event)
		return demo.Message{Key: []byte(string(tr.Channel) + ":" + tr.TradeNo), Value: value}
	}
	none := channelstest.Delivery{}
	delivered := []demo.Message{
		msg(overtaken, channelstest.PaymentEnvelope(overtaken, none)),
		msg(midnight, channelstest.PaymentEnvelope(midnight, none)),
		msg(missing, channelstest.PaymentEnvelope(missing, none)),
		msg(midnight, channelstest.RefundEnvelope(midnight, lateRefund, none)),
		msg(overtaken, channelstest.RefundEnvelope(overtaken, second, none)), // the first's is not here yet
	}
	late := []demo.Message{
		msg(overtaken, channelstest.RefundEnvelope(overtaken, first, none)),
		msg(missing, channelstest.RefundEnvelope(missing, lost, none)),
	}
	lines, err := statementsample.FromEvents(channels.Alipay, events)
	require.NoError(t, err)
	for i, l := range lines {
		if l.TradeNo == midnight.TradeNo && l.Kind == statements.KindRefund {
			lines[i].Time = at(day2, "00:00:00") // the channel's clock
		}
	}

	importDay := func(day string) {
		t.Helper()
		f, err := alipay.SampleBill(alipayAccount, day, statementsample.OnDay(lines, day))
		require.NoError(t, err)
		path := filepath.Join(w.dir, alipayAccount+"_"+strings.ReplaceAll(day, "-", "")+".csv.zip")
		require.NoError(t, os.WriteFile(path, f.Data, 0o600))
		out, code := w.consumer("statement", "import", "--channel", "ALIPAY", "--tenant", strconv.Itoa(tenant), "--file", path, "--json")
		require.Zero(t, code, "import %s: %s", day, out)
	}
	reconcile := func(day string) (found []string, code int) {
		t.Helper()
		out, code := w.consumer("statement", "reconcile", "--channel", "ALIPAY", "--tenant", strconv.Itoa(tenant), "--date", day, "--json")
		var rep statementbook.StatementReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep), "%s: %s", day, out)
		for _, it := range rep.Items {
			s := it.Category + " " + it.TradeNo
			if it.StatementAmount != nil {
				s += " statement=" + strconv.FormatInt(*it.StatementAmount, 10)
			}
			if it.LedgerAmount != nil {
				s += " ledger=" + strconv.FormatInt(*it.LedgerAmount, 10)
			}
			found = append(found, s)
		}
		return found, code
	}
	recorded := func(day string) int {
		t.Helper()
		var n int
		w.query(&n, "SELECT missing_in_ledger + missing_in_statement + amount_mismatch + status_mismatch FROM ss_statement_reconcile "+
			"WHERE tenant_id = ? AND channel_code = 'ALIPAY' AND statement_day = ?", tenant, day)
		return n
	}

	wk := w.startWorker()
	w.produce(delivered)
	assert.Equal(t, map[string]int{"acquired": len(delivered)}, wk.outcomes(t))

	// Only the first day imported: its refund of 7.94 is missing from the
	// ledger at the end of it, and the refund the ledger dates 23:59:59.9
	// is in no statement imported.
	importDay(day1)
	found, code := reconcile(day1)
	assert.Equal(t, 3, code)
	assert.ElementsMatch(t, []string{
		"missing_in_ledger " + overtaken.TradeNo + " statement=794",
		"missing_in_statement " + midnight.TradeNo + " ledger=1500",
	}, found, day1)

	// The second day imported: the cumulative callback's 28.73 dated to
	// day 2 holds the first day's refund, the statement of day 2 the
	// refund dated 23:59:59.9; only the refund whose callback is still away
	// shows, on its day.
	importDay(day2)
	found, code = reconcile(day1)
	assert.Zero(t, code)
	assert.Empty(t, found, day1)
	found, code = reconcile(day2)
	assert.Equal(t, 3, code)
	assert.Equal(t, []string{"missing_in_ledger " + missing.TradeNo + " statement=600"}, found, day2)
	assert.Zero(t, recorded(day1), "the result recorded for %s", day1)
	assert.Equal(t, 1, recorded(day2), "the result recorded for %s", day2)

	// The late callbacks: the first refund's moves no money, the lost one
	// is posted; both days reconcile clean.
	w.produce(late)
	assert.Equal(t, map[string]int{"acquired": len(delivered) + len(late)}, wk.outcomes(t))
	wk.stop(t)
	var noMoney string
	w.query(&noMoney, "SELECT GROUP_CONCAT(idempotent_key) FROM ss_channel_idempotent WHERE settle_outcome = 'NO_MONEY'")
	assert.Equal(t, "ALIPAY:"+overtaken.TradeNo+":REFUND_SUCCEEDED:"+first.No, noMoney,
		"the first refund's money was carried by the second's claim")
	for _, day := range []string{day1, day2} {
		found, code = reconcile(day)
		assert.Zero(t, code, day)
		assert.Empty(t, found, day)
		assert.Zero(t, recorded(day), "the result recorded for %s", day)
	}
	out, code := w.consumer("reconcile")
	assert.Zero(t, code, "consumer reconcile finds nothing: %s", out)
}
