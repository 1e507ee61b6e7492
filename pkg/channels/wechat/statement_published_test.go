package wechat

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePublishedWeChatBill parses a trade bill (交易账单, bill_type ALL)
// that others published, byte for byte (testdata/published/README.md names
// the source): three NATIVE payments of 0.01 yuan, one of which is the
// transaction of the published notifications that this package decodes.
func TestParsePublishedWeChatBill(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "published", "wechat", "gunsluo_tradebill_ALL_2021-01-28.csv"))
	require.NoError(t, err)
	st, err := ParseStatement(bytes.NewReader(raw), "")
	require.NoError(t, err)

	assert.Equal(t, Code, st.Channel)
	assert.Equal(t, "wechat-tradebill-all", st.Format)
	assert.Equal(t, "b18b51eb64422040e5ad738d47b358a40b1a7997", st.SHA1)
	assert.Equal(t, statements.Totals{
		Lines: 3, Payments: 3,
		PaymentAmount: 3, SettledPayments: 3,
	}, st.Totals)

	type row struct {
		LineNo                 int
		Kind                   statements.Kind
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
		{2, statements.KindPayment, "4200000925202101284997714292", "S20210128170702357723", "SUCCESS", 1, 1, 0, beijing("2021-01-28 17:07:11"), "CNY", ""},
		{3, statements.KindPayment, "4200000910202101282955148400", "S20210128153505214586", "SUCCESS", 1, 1, 0, beijing("2021-01-28 15:35:18"), "CNY", ""},
		{4, statements.KindPayment, "4200000926202101281412639609", "S20210128165824499930", "SUCCESS", 1, 1, 0, beijing("2021-01-28 16:59:46"), "CNY", ""},
	}, got)

	// The hash the same test pairs with the download URL is not this
	// text's: the bill is checked against its own hash only when asked.
	_, err = ParseStatement(bytes.NewReader(raw), "dcd7ceb3d382a1181798368bb15d8437de46c00f")
	require.ErrorIs(t, err, statements.ErrHash)
}
