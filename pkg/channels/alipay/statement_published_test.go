package alipay

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePublishedAlipayBill parses a 业务明细 that others published as
// UTF-8 text (testdata/published/README.md names the source): six
// payments of 0.01 yuan and four full refunds. Alipay delivers the file
// GBK-encoded inside a zip, so the test wraps it so.
func TestParsePublishedAlipayBill(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "published", "alipay", "qdingnet_20880211096256330156_20190916_detail.utf8.csv"))
	require.NoError(t, err)
	b := mustAlipayZip(t, alipayEntry{name: "20880211096256330156_20190916_业务明细.csv", gbkName: true, content: mustGBK(t, string(text))})
	st, err := parseAlipayBytes(b)
	require.NoError(t, err)

	assert.Equal(t, Code, st.Channel)
	assert.Equal(t, StatementFormat, st.Format)
	assert.Equal(t, time.Date(2019, 9, 15, 16, 0, 0, 0, time.UTC), st.From)
	assert.Equal(t, time.Date(2019, 9, 16, 16, 0, 0, 0, time.UTC), st.To)
	assert.Equal(t, statements.Totals{
		Lines: 10, Payments: 6, Refunds: 4,
		SettledPayments: 6, SettledRefunds: 4,
	}, st.Totals)

	type row struct {
		LineNo           int
		Kind             statements.Kind
		TradeNo, Order   string
		RefundNo, Status string
		Amount, Settled  int64
		Time             time.Time
	}
	got := make([]row, len(st.Lines))
	for i, l := range st.Lines {
		require.Equal(t, "CNY", l.Currency)
		require.Zero(t, l.FeeMicroYuan)
		got[i] = row{l.LineNo, l.Kind, l.TradeNo, l.MerchantOrderNo, l.RefundNo, l.Status, l.Amount, l.SettledAmount, l.Time}
	}
	assert.Equal(t, []row{
		{6, statements.KindPayment, "2019091622001458860515315453", "service_1568601259302", "", "SUCCESS", 1, 1, beijing("2019-09-16 10:55:23")},
		{7, statements.KindRefund, "2019091622001458860515315453", "service_1568601259302", "re_test_1568602607356", "SUCCESS", 1, 1, beijing("2019-09-16 10:56:48")},
		{8, statements.KindPayment, "2019091622001458860513822558", "service_1568603173853", "", "SUCCESS", 1, 1, beijing("2019-09-16 11:07:09")},
		{9, statements.KindRefund, "2019091622001458860513822558", "service_1568603173853", "re_test_1568604414433", "SUCCESS", 1, 1, beijing("2019-09-16 11:26:55")},
		{10, statements.KindPayment, "2019091622001458860516395930", "service_1568613406000", "", "SUCCESS", 1, 1, beijing("2019-09-16 13:57:52")},
		{11, statements.KindRefund, "2019091622001458860516395930", "service_1568613406000", "re_test_1568614511552", "SUCCESS", 1, 1, beijing("2019-09-16 14:15:12")},
		{12, statements.KindPayment, "2019091622001458860516993488", "qd_201909161455139634Sjad2vy", "", "SUCCESS", 1, 1, beijing("2019-09-16 14:57:19")},
		{13, statements.KindRefund, "2019091622001458860516993488", "qd_201909161455139634Sjad2vy", "re_20190916150216125q8Lmiodp", "SUCCESS", 1, 1, beijing("2019-09-16 15:00:38")},
		{14, statements.KindPayment, "2019091622001465870515233238", "20190916165659224L3VUQRL9", "", "SUCCESS", 1, 1, beijing("2019-09-16 16:58:58")},
		{15, statements.KindPayment, "2019091622001458860517860493", "qd_201909161844073417CB0wPzR", "", "SUCCESS", 1, 1, beijing("2019-09-16 18:43:34")},
	}, got)
}

// beijing is the instant of a statement's Beijing time s, in UTC.
func beijing(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, statements.Beijing)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
