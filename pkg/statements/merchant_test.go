package statements_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementstest"
)

// TestMerchantIDs: each file names its merchants in the binding's terms: a
// WeChat bill its 商户号, or a row's 特约商户号 when it is not 0 (a service
// provider's bill holds every sub-merchant); an Alipay bill its account
// less 0156, and an account without the suffix in a form no binding
// names; Shouqianba responses their terminal_sn.
func TestMerchantIDs(t *testing.T) {
	parse := func(t *testing.T, ch channels.Channel, data []byte) statements.Statement {
		t.Helper()
		st, err := statements.Parse(ch, data, "")
		require.NoError(t, err)
		return st
	}
	read := func(t *testing.T, name string) []byte {
		t.Helper()
		data, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		return data
	}
	t.Run("wechat merchant", func(t *testing.T) {
		st := parse(t, channels.WeChat, read(t, "wechat_tradebill_ALL_2024-03-15.csv.gz"))
		assert.Equal(t, []string{"1900000000"}, st.MerchantIDs(), "特约商户号 0 means the 商户号")
	})
	t.Run("wechat service provider's bill", func(t *testing.T) {
		st := parse(t, channels.WeChat, read(t, "wechat_tradebill_ALL_2024-03-15.csv"))
		sub := map[string]string{}
		for i, l := range st.Lines {
			if i%2 == 1 {
				sub[l.TradeNo] = "1900000109"
			}
		}
		f, err := statementstest.WeChatBill(st.Lines, statementstest.WeChatOptions{MchID: "1900000100", SubMchID: sub})
		require.NoError(t, err)
		got := parse(t, channels.WeChat, f.Data)
		assert.ElementsMatch(t, []string{"1900000100", "1900000109"}, got.MerchantIDs())
		assert.Equal(t, f.Want.Merchants, got.Merchants)
	})
	t.Run("alipay account", func(t *testing.T) {
		st := parse(t, channels.Alipay, read(t, "alipay_20880000000000000156_20240315.csv.zip"))
		assert.Equal(t, []string{"20880000000000000156"}, st.Merchants)
		assert.Equal(t, []string{"2088000000000000"}, st.MerchantIDs(), "the PID: the account less 0156")

		f, err := statementstest.AlipayBill("2088000000000000", "2024-03-15", st.Lines)
		require.NoError(t, err)
		assert.Equal(t, []string{"[2088000000000000]"}, parse(t, channels.Alipay, f.Data).MerchantIDs(),
			"an account without 0156 is not a PID's")
	})
	t.Run("sqb terminals", func(t *testing.T) {
		data := read(t, "sqb_query_responses_SYNTHETIC.jsonl")
		st := parse(t, channels.SQB, data)
		assert.Equal(t, []string{"100000000000000001"}, st.MerchantIDs())

		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		lines[1] = strings.Replace(lines[1], `"terminal_sn":"100000000000000001"`, `"terminal_sn":"100000000000000002"`, 1)
		lines[2] = strings.Replace(lines[2], `"terminal_sn":"100000000000000001",`, ``, 1)
		got := parse(t, channels.SQB, []byte(strings.Join(lines, "\n")))
		assert.Equal(t, []string{"100000000000000001", "100000000000000002", ""}, got.MerchantIDs(), "a response without one names none")
	})
	t.Run("a statement not read from a file names none", func(t *testing.T) {
		assert.Empty(t, statements.Statement{Channel: channels.Alipay}.MerchantIDs())
	})
}
