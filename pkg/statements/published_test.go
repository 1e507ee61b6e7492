package statements

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
)

// TestParsePublishedWeChatBill parses a trade bill (交易账单, bill_type ALL)
// that others published, byte for byte (testdata/published/README.md names
// the source): three NATIVE payments of 0.01 yuan, one of which is the
// transaction of the published notifications that pkg/channels decodes.
func TestParsePublishedWeChatBill(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "published", "wechat", "gunsluo_tradebill_ALL_2021-01-28.csv"))
	require.NoError(t, err)
	st, err := ParseWeChat(bytes.NewReader(raw), "")
	require.NoError(t, err)

	assert.Equal(t, channels.WeChat, st.Channel)
	assert.Equal(t, "wechat-tradebill-all", st.Format)
	assert.Equal(t, "b18b51eb64422040e5ad738d47b358a40b1a7997", st.SHA1)
	assert.Equal(t, Totals{
		Lines: 3, Payments: 3,
		PaymentAmount: 3, SettledPayments: 3,
	}, st.Totals)

	type row struct {
		LineNo                 int
		Kind                   Kind
		TradeNo, Order, Status string
		Amount, Settled, Fee   int64
		Time                   time.Time
		Currency, RefundNumber string
	}
	got := make([]row, len(st.Lines))
	for i, l := range st.Lines {
		got[i] = row{l.LineNo, l.Kind, l.TradeNo, l.MerchantOrderNo, l.Status, l.Amount, l.SettledAmount, l.FeeMicroYuan, l.Time, l.Currency, l.RefundNo}
	}
	assert.Equal(t, []row{
		{2, KindPayment, "4200000925202101284997714292", "S20210128170702357723", "SUCCESS", 1, 1, 0, beijing("2021-01-28 17:07:11"), "CNY", ""},
		{3, KindPayment, "4200000910202101282955148400", "S20210128153505214586", "SUCCESS", 1, 1, 0, beijing("2021-01-28 15:35:18"), "CNY", ""},
		{4, KindPayment, "4200000926202101281412639609", "S20210128165824499930", "SUCCESS", 1, 1, 0, beijing("2021-01-28 16:59:46"), "CNY", ""},
	}, got)

	// The hash the same test pairs with the download URL is not this
	// text's: the bill is checked against its own hash only when asked.
	_, err = ParseWeChat(bytes.NewReader(raw), "dcd7ceb3d382a1181798368bb15d8437de46c00f")
	require.ErrorIs(t, err, ErrHash)
}

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

	assert.Equal(t, channels.Alipay, st.Channel)
	assert.Equal(t, AlipayFormat, st.Format)
	assert.Equal(t, time.Date(2019, 9, 15, 16, 0, 0, 0, time.UTC), st.From)
	assert.Equal(t, time.Date(2019, 9, 16, 16, 0, 0, 0, time.UTC), st.To)
	assert.Equal(t, Totals{
		Lines: 10, Payments: 6, Refunds: 4,
		SettledPayments: 6, SettledRefunds: 4,
	}, st.Totals)

	type row struct {
		LineNo           int
		Kind             Kind
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
		{6, KindPayment, "2019091622001458860515315453", "service_1568601259302", "", "SUCCESS", 1, 1, beijing("2019-09-16 10:55:23")},
		{7, KindRefund, "2019091622001458860515315453", "service_1568601259302", "re_test_1568602607356", "SUCCESS", 1, 1, beijing("2019-09-16 10:56:48")},
		{8, KindPayment, "2019091622001458860513822558", "service_1568603173853", "", "SUCCESS", 1, 1, beijing("2019-09-16 11:07:09")},
		{9, KindRefund, "2019091622001458860513822558", "service_1568603173853", "re_test_1568604414433", "SUCCESS", 1, 1, beijing("2019-09-16 11:26:55")},
		{10, KindPayment, "2019091622001458860516395930", "service_1568613406000", "", "SUCCESS", 1, 1, beijing("2019-09-16 13:57:52")},
		{11, KindRefund, "2019091622001458860516395930", "service_1568613406000", "re_test_1568614511552", "SUCCESS", 1, 1, beijing("2019-09-16 14:15:12")},
		{12, KindPayment, "2019091622001458860516993488", "qd_201909161455139634Sjad2vy", "", "SUCCESS", 1, 1, beijing("2019-09-16 14:57:19")},
		{13, KindRefund, "2019091622001458860516993488", "qd_201909161455139634Sjad2vy", "re_20190916150216125q8Lmiodp", "SUCCESS", 1, 1, beijing("2019-09-16 15:00:38")},
		{14, KindPayment, "2019091622001465870515233238", "20190916165659224L3VUQRL9", "", "SUCCESS", 1, 1, beijing("2019-09-16 16:58:58")},
		{15, KindPayment, "2019091622001458860517860493", "qd_201909161844073417CB0wPzR", "", "SUCCESS", 1, 1, beijing("2019-09-16 18:43:34")},
	}, got)
}
