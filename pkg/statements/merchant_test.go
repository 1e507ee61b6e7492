package statements_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
)

// TestBindingMerchantIDs: each file names its merchants in the binding's
// terms: a WeChat bill its 商户号, or a row's 特约商户号 when it is not 0 (a
// service provider's bill holds every sub-merchant); an Alipay bill its
// account less 0156, and an account without the suffix in a form no
// binding names; Shouqianba responses their terminal_sn, "" for one that
// names none.
func TestBindingMerchantIDs(t *testing.T) {
	parse := func(t *testing.T, ch channels.Channel, data []byte) statements.Statement {
		t.Helper()
		st, err := statements.Parse(ch, data, "")
		require.NoError(t, err)
		return st
	}
	read := func(t *testing.T, name string) []byte {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("..", "channels", strings.Split(name, "_")[0], "testdata", name))
		require.NoError(t, err)
		return data
	}
	t.Run("wechat merchant", func(t *testing.T) {
		st := parse(t, channels.WeChat, read(t, "wechat_tradebill_ALL_2024-03-15.csv.gz"))
		assert.Equal(t, []string{"1900000000"}, st.BindingMerchantIDs(), "特约商户号 0 means the 商户号")
	})
	t.Run("wechat service provider's bill", func(t *testing.T) {
		st := parse(t, channels.WeChat, read(t, "wechat_tradebill_ALL_2024-03-15.csv"))
		f, err := wechat.SampleBill(st.Lines, wechat.SampleBillOptions{MchID: "1900000100", SubMchID: "1900000109"})
		require.NoError(t, err)
		// Downloaded without sub_mchid: the first row is another
		// sub-merchant's, the second the service provider's own.
		text := strings.Replace(string(f.Data), "`1900000109,", "`1900000110,", 1)
		text = strings.Replace(text, "`1900000109,", "`0,", 1)
		got := parse(t, channels.WeChat, []byte(text))
		assert.Equal(t, []string{"1900000110", "1900000100", "1900000109"}, got.BindingMerchantIDs())
	})
	t.Run("alipay account", func(t *testing.T) {
		st := parse(t, channels.Alipay, read(t, "alipay_20880000000000000156_20240315.csv.zip"))
		assert.Equal(t, []string{"20880000000000000156"}, st.MerchantIDs(), "the file's terms")
		assert.Equal(t, []string{"2088000000000000"}, st.BindingMerchantIDs(), "the PID: the account less 0156")

		f, err := alipay.SampleBill("2088000000000000", "2024-03-15", st.Lines)
		require.NoError(t, err)
		assert.Equal(t, []string{"[2088000000000000]"}, parse(t, channels.Alipay, f.Data).BindingMerchantIDs(),
			"an account without 0156 is not a PID's")
		empty, err := alipay.SampleBill("20880000000000000156", "2024-03-15", nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"2088000000000000"}, parse(t, channels.Alipay, empty.Data).BindingMerchantIDs(), "a bill without rows names its account")
	})
	t.Run("sqb terminals", func(t *testing.T) {
		data := read(t, "sqb_query_responses_SYNTHETIC.jsonl")
		st := parse(t, channels.SQB, data)
		assert.Equal(t, []string{"100000000000000001"}, st.BindingMerchantIDs())

		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		lines[1] = strings.Replace(lines[1], `"terminal_sn":"100000000000000001"`, `"terminal_sn":"100000000000000002"`, 1)
		lines[2] = strings.Replace(lines[2], `"terminal_sn":"100000000000000001",`, ``, 1)
		got := parse(t, channels.SQB, []byte(strings.Join(lines, "\n")))
		assert.Equal(t, []string{"100000000000000001", "100000000000000002", ""}, got.BindingMerchantIDs(), "a response without one names none")
	})
	t.Run("a statement not read from a file names none", func(t *testing.T) {
		assert.Empty(t, statements.Statement{Channel: channels.Alipay}.BindingMerchantIDs())
	})
}
