package statements_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestEachLine: lines one at a time, numbered from 1, LF or CRLF removed;
// a line over MaxLineBytes refused by number before it is seen.
func TestEachLine(t *testing.T) {
	var got []string
	err := statements.EachLine("a\r\n\nb\nc", func(n int, l string) error {
		got = append(got, strings.Repeat("#", n)+l)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"#a", "##", "###b", "####c"}, got)

	long := "ok\n" + strings.Repeat(",", statements.MaxLineBytes+1) + "\nnever"
	seen := 0
	err = statements.EachLine(long, func(int, string) error { seen++; return nil })
	require.ErrorIs(t, err, statements.ErrFormat)
	require.EqualError(t, err, "line 2: longer than 65536 bytes: "+statements.ErrLimit.Error()+": "+statements.ErrFormat.Error())
	assert.Equal(t, 1, seen, "the long line is refused before it is seen")
}

// TestParsersRefuseALongLine: each parser refuses a line over
// MaxLineBytes naming it, rather than splitting it into cells.
func TestParsersRefuseALongLine(t *testing.T) {
	at := time.Date(2024, 3, 15, 9, 0, 0, 0, statements.Beijing)
	wx, err := wechat.SampleBill([]statements.Line{{
		Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: "4200000001", MerchantOrderNo: strings.Repeat("M", statements.MaxLineBytes),
		Amount: 100, SettledAmount: 100, Status: "SUCCESS", Time: at, Currency: "CNY",
	}}, wechat.SampleBillOptions{})
	require.NoError(t, err)
	_, err = statements.Parse(channels.WeChat, wx.Data, "")
	require.ErrorIs(t, err, statements.ErrFormat)
	require.ErrorContains(t, err, "line 2: longer than 65536 bytes")

	sq, err := sqb.SampleQueryResponses([]statements.Line{{
		Channel: channels.SQB, Kind: statements.KindOrder, TradeNo: "7894259244067350", MerchantOrderNo: strings.Repeat("C", statements.MaxLineBytes),
		Amount: 100, SettledAmount: 100, Status: sqb.Paid, Time: at, Currency: "CNY",
	}})
	require.NoError(t, err)
	_, err = statements.Parse(channels.SQB, sq.Data, "")
	require.ErrorIs(t, err, statements.ErrFormat)
	require.ErrorContains(t, err, "line 1: longer than 65536 bytes")
}

// TestCheckIdentifiers: a number that is not valid UTF-8, or that a
// decoder replaced by U+FFFD (Shouqianba's JSON does), is refused naming
// the line and the field; it is never stored.
func TestCheckIdentifiers(t *testing.T) {
	at := time.Date(2024, 3, 15, 9, 0, 0, 0, statements.Beijing)
	wx, err := wechat.SampleBill([]statements.Line{{
		Channel: channels.WeChat, Kind: statements.KindPayment, TradeNo: "4200\xff0001", MerchantOrderNo: "M-1",
		Amount: 100, SettledAmount: 100, Status: "SUCCESS", Time: at, Currency: "CNY",
	}}, wechat.SampleBillOptions{})
	require.NoError(t, err)
	st, err := statements.Parse(channels.WeChat, wx.Data, "")
	require.NoError(t, err, "the parser keeps the cell's bytes")
	err = st.CheckIdentifiers()
	require.ErrorIs(t, err, statements.ErrFormat)
	require.EqualError(t, err, "WECHAT statement: line 2: the trade number is not valid UTF-8 (bytes the file's encoding does not have): "+statements.ErrFormat.Error())

	sq, err := sqb.SampleQueryResponses([]statements.Line{{
		Channel: channels.SQB, Kind: statements.KindOrder, TradeNo: "7894259244067350", MerchantOrderNo: "C-\xff1",
		Amount: 100, SettledAmount: 100, Status: sqb.Paid, Time: at, Currency: "CNY",
	}})
	require.NoError(t, err)
	st, err = statements.Parse(channels.SQB, sq.Data, "")
	require.NoError(t, err)
	require.Equal(t, "C-\uFFFD1", st.Lines[0].MerchantOrderNo, "precondition: JSON decoded the byte as U+FFFD")
	err = st.CheckIdentifiers()
	require.ErrorIs(t, err, statements.ErrFormat)
	require.ErrorContains(t, err, "line 1: the merchant order number is not valid UTF-8")

	st.Lines[0].MerchantOrderNo = "C-1"
	require.NoError(t, st.CheckIdentifiers())
}
