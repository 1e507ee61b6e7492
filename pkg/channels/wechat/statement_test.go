package wechat

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	wechatFixture       = "wechat_tradebill_ALL_2024-03-15.csv"
	wechatFixtureGz     = "wechat_tradebill_ALL_2024-03-15.csv.gz"
	wechatApplyResponse = "wechat_tradebill_apply_response.json"

	wechatLegacyHeader = "交易时间,公众账号ID,商户号,子商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,总金额,代金券或立减优惠金额,微信退款单号,商户退款单号,退款金额,代金券或立减优惠退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率"
)

func mustReadWeChatFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(tb, err)
	return b
}

func wechatFixtureSHA1(tb testing.TB) string {
	tb.Helper()
	var resp struct {
		HashType  string `json:"hash_type"`
		HashValue string `json:"hash_value"`
	}
	require.NoError(tb, json.Unmarshal(mustReadWeChatFixture(tb, wechatApplyResponse), &resp))
	require.Equal(tb, "SHA1", resp.HashType)
	return resp.HashValue
}

func gzipBytes(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(tb, err)
	require.NoError(tb, zw.Close())
	return buf.Bytes()
}

// backticked joins cells into a data line, each cell with its backtick.
func backtickedCells(cells ...string) string {
	return "`" + strings.Join(cells, ",`")
}

func beijing(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, statements.Beijing)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// replaceOnce replaces exactly one occurrence, failing the test otherwise.
func replaceOnce(tb testing.TB, s, old, repl string) string {
	tb.Helper()
	require.Equal(tb, 1, strings.Count(s, old), "fixture text %q", old)
	return strings.Replace(s, old, repl, 1)
}

func TestParseWeChatFixture(t *testing.T) {
	raw := mustReadWeChatFixture(t, wechatFixture)
	st, err := ParseStatement(bytes.NewReader(raw), wechatFixtureSHA1(t))
	require.NoError(t, err)

	assert.Equal(t, Code, st.Channel)
	assert.Equal(t, "wechat-tradebill-all", st.Format)
	assert.Equal(t, "c2baf4b6b2671093d900aa83c375339a410ccae3", st.SHA1)
	assert.True(t, st.From.IsZero())
	assert.True(t, st.To.IsZero())
	assert.Equal(t, statements.Totals{
		Lines: 5, Payments: 3, Refunds: 2,
		PaymentAmount: 18380, RefundAmount: 5500,
		SettledPayments: 18380, SettledRefunds: 5500,
		FeeMicroYuan: 77000,
	}, st.Totals)

	require.Len(t, st.Lines, 5)
	assert.Equal(t, statements.Line{
		LineNo:          2,
		Channel:         Code,
		Kind:            statements.KindPayment,
		TradeNo:         "4200000000202403150000000001",
		MerchantOrderNo: "TEST-ORDER-0001",
		Amount:          10000,
		SettledAmount:   10000,
		FeeMicroYuan:    60000,
		Status:          "SUCCESS",
		Time:            time.Date(2024, 3, 15, 1, 12, 5, 0, time.UTC),
		Currency:        "CNY",
		MerchantID:      "1900000000",
	}, st.Lines[0])
	assert.Equal(t, statements.Line{
		LineNo:          5,
		Channel:         Code,
		Kind:            statements.KindRefund,
		TradeNo:         "4200000000202403150000000001",
		MerchantOrderNo: "TEST-ORDER-0001",
		RefundNo:        "TEST-REFUND-0001",
		Amount:          3000,
		SettledAmount:   3000,
		FeeMicroYuan:    -18000,
		Status:          "SUCCESS",
		Time:            time.Date(2024, 3, 15, 6, 45, 9, 0, time.UTC),
		Currency:        "CNY",
		MerchantID:      "1900000000",
	}, st.Lines[3])

	type row struct {
		LineNo                   int
		Kind                     statements.Kind
		Order, RefundNo          string
		Amount, Settled, FeeUnit int64
		Time                     time.Time
	}
	got := make([]row, len(st.Lines))
	for i, l := range st.Lines {
		got[i] = row{l.LineNo, l.Kind, l.MerchantOrderNo, l.RefundNo, l.Amount, l.SettledAmount, l.FeeMicroYuan, l.Time}
	}
	assert.Equal(t, []row{
		{2, statements.KindPayment, "TEST-ORDER-0001", "", 10000, 10000, 60000, beijing("2024-03-15 09:12:05")},
		{3, statements.KindPayment, "TEST-ORDER-0002", "", 5880, 5880, 35000, beijing("2024-03-15 10:30:41")},
		{4, statements.KindPayment, "TEST-ORDER-0003", "", 2500, 2500, 15000, beijing("2024-03-15 11:02:17")},
		{5, statements.KindRefund, "TEST-ORDER-0001", "TEST-REFUND-0001", 3000, 3000, -18000, beijing("2024-03-15 14:45:09")},
		{6, statements.KindRefund, "TEST-ORDER-0003", "TEST-REFUND-0002", 2500, 2500, -15000, beijing("2024-03-15 16:20:33")},
	}, got)
}

// TestParseWeChatCoupon: with a non-top-up coupon (免充值券) 订单金额 and
// 应结订单金额 differ, and so do 申请退款金额 and 退款金额; each goes to
// its own field and each summary figure is checked against its own sum.
func TestParseWeChatCoupon(t *testing.T) {
	raw := string(mustReadWeChatFixture(t, wechatFixture))
	raw = replaceOnce(t, raw, "`CNY,`100.00,`0.00,`0,`0,", "`CNY,`95.00,`5.00,`0,`0,")
	raw = replaceOnce(t, raw, "`TEST-REFUND-0001,`30.00,", "`TEST-REFUND-0001,`28.50,")
	raw = replaceOnce(t, raw, "`5,`183.80,`55.00,", "`5,`178.80,`53.50,")

	st, err := ParseStatement(strings.NewReader(raw), "")
	require.NoError(t, err)
	assert.Equal(t, statements.Totals{
		Lines: 5, Payments: 3, Refunds: 2,
		PaymentAmount: 18380, RefundAmount: 5500,
		SettledPayments: 17880, SettledRefunds: 5350,
		FeeMicroYuan: 77000,
	}, st.Totals)
	require.Len(t, st.Lines, 5)
	assert.Equal(t, int64(10000), st.Lines[0].Amount)
	assert.Equal(t, int64(9500), st.Lines[0].SettledAmount)
	assert.Equal(t, int64(3000), st.Lines[3].Amount)
	assert.Equal(t, int64(2850), st.Lines[3].SettledAmount)

	// The same file with the settled figures of a file without coupons.
	stale := replaceOnce(t, raw, "`5,`178.80,`53.50,", "`5,`183.80,`55.00,")
	_, err = ParseStatement(strings.NewReader(stale), "")
	require.ErrorIs(t, err, statements.ErrMismatch)
	assert.Contains(t, err.Error(), "应结订单总金额 states 183.80, the rows sum to 178.80 (difference -5.00)")
	assert.Contains(t, err.Error(), "退款总金额 states 55.00, the rows sum to 53.50 (difference -1.50)")
	assert.NotContains(t, err.Error(), "订单总金额 states 183.80, the rows sum to 183.80")
}

func TestParseWeChatVariants(t *testing.T) {
	raw := mustReadWeChatFixture(t, wechatFixture)
	want, err := ParseStatement(bytes.NewReader(raw), "")
	require.NoError(t, err)
	fixtureSHA1 := wechatFixtureSHA1(t)

	bom := append([]byte("\uFEFF"), raw...)
	crlf := bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
	noFinalNewline := bytes.TrimSuffix(raw, []byte("\n"))

	tests := []struct {
		name     string
		input    []byte
		wantSHA1 string
	}{
		{"plain without a hash", raw, ""},
		{"plain with the hash", raw, fixtureSHA1},
		{"plain with the hash in upper case", raw, strings.ToUpper(fixtureSHA1)},
		{"the fixture's gzip with the apply response's hash", mustReadWeChatFixture(t, wechatFixtureGz), fixtureSHA1},
		{"gzip without a hash", mustReadWeChatFixture(t, wechatFixtureGz), ""},
		{"BOM", bom, sha1Of(bom)},
		{"CRLF", crlf, sha1Of(crlf)},
		{"BOM, CRLF and gzip", gzipBytes(t, append([]byte("\uFEFF"), crlf...)), sha1Of(append([]byte("\uFEFF"), crlf...))},
		{"no final newline", noFinalNewline, ""},
		{"trailing blank lines", append(append([]byte{}, raw...), "\n\r\n"...), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseStatement(bytes.NewReader(tc.input), tc.wantSHA1)
			require.NoError(t, err)
			assert.Equal(t, want.Lines, st.Lines)
			assert.Equal(t, want.Totals, st.Totals)
			assert.Equal(t, "wechat-tradebill-all", st.Format)
			if tc.wantSHA1 != "" {
				assert.Equal(t, strings.ToLower(tc.wantSHA1), st.SHA1)
			}
		})
	}
}

// wechatLegacyBill builds a legacy 24-column bill: two payments (one
// revoked) and a refund, with the summary the rows add up to unless the
// caller changes it.
func wechatLegacyBill(header, summaryHeader, summary string) string {
	return strings.Join([]string{
		header,
		backtickedCells("2018-09-17 10:19:25", "wx00000000000000f0", "1900000000", "0", "WEB", "4200000000201809170000000001", "TEST-LEGACY-1", "oTEST", "APP", "SUCCESS", "CFT", "CNY", "0.01", "0.00", "0", "0", "0.00", "0.00", "", "", "商品", "", "0.00000", "0.60%"),
		backtickedCells("2018-09-17 11:53:15", "wx00000000000000f0", "1900000000", "0", "WEB", "4200000000201809170000000002", "TEST-LEGACY-2", "oTEST", "MICROPAY", "REVOKED", "CFT", "CNY", "12.5", "0.0", "0", "0", "0", "0", "", "", "商品", "", "0.08000", "0.60%"),
		backtickedCells("2018-09-17 18:13:12", "wx00000000000000f0", "1900000000", "0", "", "4200000000201809170000000001", "TEST-LEGACY-1", "oTEST", "APP", "REFUND", "CFT", "CNY", "0.00", "0.00", "50000000000000000000000000001", "TEST-LEGACY-R1", "0.01", "0.00", "ORIGINAL", "PROCESSING", "商品", "", "0", "0.60%"),
		summaryHeader,
		summary,
		"",
	}, "\n")
}

func TestParseWeChatLegacy(t *testing.T) {
	redPacketHeader := strings.NewReplacer("代金券或立减优惠金额", "企业红包金额", "代金券或立减优惠退款金额", "企业红包退款金额", "子商户号", "特约商户号").Replace(wechatLegacyHeader)
	tests := []struct {
		name, header, summaryHeader string
	}{
		{"代金券或立减优惠 and 子商户号", wechatLegacyHeader, "总交易单数,总交易额,总退款金额,总代金券或立减优惠退款金额,手续费总金额"},
		{"企业红包 and 特约商户号", redPacketHeader, "总交易单数,总交易额,总退款金额,总企业红包退款金额,手续费总金额"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bill := wechatLegacyBill(tc.header, tc.summaryHeader, backtickedCells("3", "12.51", "0.01", "0.00", "0.08000"))
			st, err := ParseStatement(strings.NewReader(bill), "")
			require.NoError(t, err)
			assert.Equal(t, "wechat-tradebill-all-legacy", st.Format)
			assert.Equal(t, statements.Totals{
				Lines: 3, Payments: 2, Refunds: 1,
				PaymentAmount: 1251, RefundAmount: 1,
				SettledPayments: 1251, SettledRefunds: 1,
				FeeMicroYuan: 8000,
			}, st.Totals)
			require.Len(t, st.Lines, 3)
			assert.Equal(t, statements.Line{
				LineNo: 3, Channel: Code, Kind: statements.KindPayment,
				TradeNo: "4200000000201809170000000002", MerchantOrderNo: "TEST-LEGACY-2",
				Amount: 1250, SettledAmount: 1250, FeeMicroYuan: 8000, Status: "REVOKED",
				Time: beijing("2018-09-17 11:53:15"), Currency: "CNY", MerchantID: "1900000000",
			}, st.Lines[1])
			assert.Equal(t, statements.Line{
				LineNo: 4, Channel: Code, Kind: statements.KindRefund,
				TradeNo: "4200000000201809170000000001", MerchantOrderNo: "TEST-LEGACY-1", RefundNo: "TEST-LEGACY-R1",
				Amount: 1, SettledAmount: 1, Status: "PROCESSING",
				Time: beijing("2018-09-17 18:13:12"), Currency: "CNY", MerchantID: "1900000000",
			}, st.Lines[2])
		})
	}
}

// TestParseWeChatMerchant: a line's merchant is its 特约商户号 (a service
// provider's sub-merchant), or its 商户号 when the 特约商户号 is 0.
func TestParseWeChatMerchant(t *testing.T) {
	raw := string(mustReadWeChatFixture(t, wechatFixture))
	require.Equal(t, 5, strings.Count(raw, "`1900000000,`0,"), "precondition: every row of the fixture names 商户号 1900000000, 特约商户号 0")
	bill := strings.Replace(raw, "`1900000000,`0,", "`1900000000,`1900000009,", 1)
	st, err := ParseStatement(strings.NewReader(bill), "")
	require.NoError(t, err)
	require.Len(t, st.Lines, 5)
	assert.Equal(t, "1900000009", st.Lines[0].MerchantID)
	for _, l := range st.Lines[1:] {
		assert.Equal(t, "1900000000", l.MerchantID, "line %d", l.LineNo)
	}
	assert.Equal(t, []string{"1900000000", "1900000009"}, st.MerchantIDs())
}

func TestParseWeChatRefused(t *testing.T) {
	raw := string(mustReadWeChatFixture(t, wechatFixture))
	gz := mustReadWeChatFixture(t, wechatFixtureGz)
	const summary = "`5,`183.80,`55.00,`0.00,`0.77000,`183.80,`55.00"
	const row3ID = "`4200000000202403150000000002,"
	legacySummaryHeader := "总交易单数,总交易额,总退款金额,总代金券或立减优惠退款金额,手续费总金额"
	lines := strings.Split(raw, "\n")

	tests := []struct {
		name     string
		input    []byte
		wantSHA1 string
		wantErr  error
		wantMsg  []string
	}{
		{
			name: "gzip with a wrong hash", input: gz, wantSHA1: "0000000000000000000000000000000000000000",
			wantErr: statements.ErrHash, wantMsg: []string{"c2baf4b6b2671093d900aa83c375339a410ccae3"},
		},
		{
			name: "gzip with the hash of the compressed bytes", input: gz, wantSHA1: sha1Of(gz),
			wantErr: statements.ErrHash,
		},
		{
			name: "BOM variant with the plain file's hash", input: append([]byte("\uFEFF"), raw...), wantSHA1: "c2baf4b6b2671093d900aa83c375339a410ccae3",
			wantErr: statements.ErrHash,
		},
		{
			name:    "summary counts one row too many",
			input:   []byte(replaceOnce(t, raw, summary, "`6,`183.80,`55.00,`0.00,`0.77000,`183.80,`55.00")),
			wantErr: statements.ErrMismatch, wantMsg: []string{"line 8", "总交易单数 states 6 rows, the file has 5 (difference -1)"},
		},
		{
			name:    "summary refund total differs",
			input:   []byte(replaceOnce(t, raw, summary, "`5,`183.80,`56.00,`0.00,`0.77000,`183.80,`56.00")),
			wantErr: statements.ErrMismatch, wantMsg: []string{"退款总金额 states 56.00, the rows sum to 55.00 (difference -1.00)", "申请退款总金额"},
		},
		{
			name:    "summary order total differs",
			input:   []byte(replaceOnce(t, raw, summary, "`5,`183.80,`55.00,`0.00,`0.77000,`183.79,`55.00")),
			wantErr: statements.ErrMismatch, wantMsg: []string{"订单总金额 states 183.79, the rows sum to 183.80 (difference 0.01)"},
		},
		{
			name:    "summary fee differs in the fifth decimal",
			input:   []byte(replaceOnce(t, raw, summary, "`5,`183.80,`55.00,`0.00,`0.77001,`183.80,`55.00")),
			wantErr: statements.ErrMismatch, wantMsg: []string{"手续费总金额 states 0.77001, the rows sum to 0.77000 (difference -0.00001)"},
		},
		{
			name:    "a row missing",
			input:   []byte(strings.Join(append(append([]string{}, lines[:2]...), lines[3:]...), "\n")),
			wantErr: statements.ErrMismatch, wantMsg: []string{"总交易单数 states 5 rows, the file has 4", "应结订单总金额 states 183.80, the rows sum to 125.00 (difference -58.80)"},
		},
		{
			name:    "unknown header: a column renamed",
			input:   []byte(replaceOnce(t, raw, ",费率备注\n", ",费率说明\n")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 1", "unknown wechat trade bill header", "missing [费率备注]", "unexpected [费率说明]"},
		},
		{
			name:    "unknown header: the REFUND bill type",
			input:   []byte(replaceOnce(t, raw, ",代金券金额,", ",代金券金额,退款申请时间,退款成功时间,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"unexpected [退款申请时间, 退款成功时间]"},
		},
		{
			name:    "unknown header: a legacy header missing two columns",
			input:   []byte(strings.Replace(wechatLegacyBill(wechatLegacyHeader, legacySummaryHeader, ""), ",退款类型,退款状态", "", 1)),
			wantErr: statements.ErrFormat, wantMsg: []string{"closest is wechat-tradebill-all-legacy", "missing [退款类型, 退款状态]"},
		},
		{
			name:    "duplicate header",
			input:   []byte(replaceOnce(t, raw, ",费率备注\n", ",费率\n")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 1", "appears twice"},
		},
		{
			name:    "trade number in scientific notation",
			input:   []byte(replaceOnce(t, raw, row3ID, "`4.20000E+27,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "微信订单号", "scientific notation"},
		},
		{
			name:    "refund number in scientific notation",
			input:   []byte(replaceOnce(t, raw, "`50300000002024031500000000002,", "`5.03E+28,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 6", "微信退款单号"},
		},
		{
			name:    "no summary",
			input:   []byte(strings.Join(lines[:6], "\n")),
			wantErr: statements.ErrFormat, wantMsg: []string{"no summary"},
		},
		{
			name:    "summary header without values",
			input:   []byte(strings.Join(lines[:7], "\n")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 7", "without its values"},
		},
		{
			name:    "text after the summary",
			input:   []byte(raw + lines[1] + "\n"),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 9", "after the summary"},
		},
		{
			name:    "summary of the legacy layout under the current header",
			input:   []byte(replaceOnce(t, raw, lines[6], legacySummaryHeader)),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 7", "missing [应结订单总金额"},
		},
		{
			name:    "cell without its backtick",
			input:   []byte(replaceOnce(t, raw, row3ID, "4200000000202403150000000002,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "column 微信订单号 (6)", "backtick"},
		},
		{
			name:    "a row with a cell too many",
			input:   []byte(replaceOnce(t, raw, "`测试商品B,", "`测试,商品B,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "28 cells, the header has 27"},
		},
		{
			name:    "time with full-width colons",
			input:   []byte(replaceOnce(t, raw, "`2024-03-15 10:30:41,", "`2024-03-15 10：30：41,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "交易时间 (1)"},
		},
		{
			name:    "time re-saved by a spreadsheet",
			input:   []byte(replaceOnce(t, raw, "`2024-03-15 10:30:41,", "`2024/3/15 10:30,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "交易时间 (1)"},
		},
		{
			name:    "amount with three decimals",
			input:   []byte(replaceOnce(t, raw, "`58.80,`0.00,`0,`0,", "`58.800,`0.00,`0,`0,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "应结订单金额 (13)"},
		},
		{
			name:    "fee with six decimals",
			input:   []byte(replaceOnce(t, raw, "`0.35000,", "`0.350000,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "手续费 (23)"},
		},
		{
			name:    "unknown trade status",
			input:   []byte(replaceOnce(t, raw, "`NATIVE,`SUCCESS,", "`NATIVE,`CLOSED,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 3", "交易状态 (10)", "CLOSED"},
		},
		{
			name:    "refund without a refund number",
			input:   []byte(replaceOnce(t, raw, "`TEST-REFUND-0002,", "`0,")),
			wantErr: statements.ErrFormat, wantMsg: []string{"line 6", "商户退款单号 (16)"},
		},
		{
			name:    "empty file",
			input:   nil,
			wantErr: statements.ErrFormat, wantMsg: []string{"empty"},
		},
		{
			name:    "truncated gzip",
			input:   gz[:len(gz)/2],
			wantErr: statements.ErrFormat, wantMsg: []string{"wechat trade bill"},
		},
		{
			name:    "gzip magic without a gzip stream",
			input:   []byte{0x1f, 0x8b, 'x'},
			wantErr: statements.ErrFormat, wantMsg: []string{"gunzip"},
		},
		{
			name:    "an XML error response instead of a bill",
			input:   []byte("<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[No Bill Exist]]></return_msg></xml>"),
			wantErr: statements.ErrFormat, wantMsg: []string{"unknown wechat trade bill header"},
		},
		{
			name:    "legacy summary that does not match",
			input:   []byte(wechatLegacyBill(wechatLegacyHeader, legacySummaryHeader, backtickedCells("3", "12.50", "0.01", "0.00", "0.08000"))),
			wantErr: statements.ErrMismatch, wantMsg: []string{"总交易额 states 12.50, the rows sum to 12.51 (difference 0.01)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseStatement(bytes.NewReader(tc.input), tc.wantSHA1)
			require.ErrorIs(t, err, tc.wantErr)
			for _, other := range []error{statements.ErrHash, statements.ErrFormat, statements.ErrMismatch} {
				if !errors.Is(tc.wantErr, other) {
					require.NotErrorIs(t, err, other)
				}
			}
			for _, m := range tc.wantMsg {
				assert.Contains(t, err.Error(), m)
			}
			assert.Equal(t, statements.Statement{}, st)
		})
	}
}

func sha1Of(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestParseWeChatReadError(t *testing.T) {
	readErr := errors.New("connection reset")
	gz := mustReadWeChatFixture(t, wechatFixtureGz)
	tests := []struct {
		name string
		r    func() *failAfter
	}{
		{"before the first byte", func() *failAfter { return &failAfter{err: readErr} }},
		{"inside the gzip stream", func() *failAfter { return &failAfter{data: gz[:100], err: readErr} }},
		{"inside the plain text", func() *failAfter {
			return &failAfter{data: mustReadWeChatFixture(t, wechatFixture)[:300], err: readErr}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStatement(tc.r(), "")
			require.ErrorIs(t, err, readErr)
			require.NotErrorIs(t, err, statements.ErrFormat)
			require.NotErrorIs(t, err, statements.ErrMismatch)
		})
	}
	_, err := ParseStatement(failingReader{readErr}, "")
	require.ErrorIs(t, err, readErr)
}

// failAfter returns data, then err.
type failAfter struct {
	data []byte
	err  error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestParseWeChatFee(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0.60000", 60000, false},
		{"-0.18000", -18000, false},
		{"-1.56000", -156000, false},
		{"0", 0, false},
		{"0.0", 0, false},
		{"0.01", 1000, false},
		{"12.34567", 1234567, false},
		{"-0.00000", 0, false},
		{"10000000000.00000", 1_000_000_000_000_000, false},
		{"10000000000.00001", 0, true},
		{"0.000001", 0, true},
		{"", 0, true},
		{"-", 0, true},
		{"+0.1", 0, true},
		{"01.0", 0, true},
		{"1.", 0, true},
		{".5", 0, true},
		{"1e3", 0, true},
		{"1.2.3", 0, true},
		{"--1", 0, true},
		{"1,00", 0, true},
		{"99999999999999999999", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseWeChatFee(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestWeChatScientific(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"4.00123E+27", true},
		{"4E27", true},
		{"4.2e-05", true},
		{"4200000000202403150000000001", false},
		{"TEST-ORDER-0001", false},
		{"E+27", false},
		{"4.2E", false},
		{"4.2E+", false},
		{"1E+5X", false},
		{"", false},
		{"0", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			assert.Equal(t, tc.want, wechatScientific(tc.in))
		})
	}
}

func TestParseWeChatCount(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"5", 5, false},
		{"0", 0, false},
		{"20.0", 20, false},
		{"20.00", 20, false},
		{"20.5", 0, true},
		{"20.", 0, true},
		{"-1", 0, true},
		{"+1", 0, true},
		{"05", 0, true},
		{"", 0, true},
		{"1234567890", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseWeChatCount(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseWeChat(f *testing.F) {
	raw := mustReadWeChatFixture(f, wechatFixture)
	f.Add(raw)
	f.Add(mustReadWeChatFixture(f, wechatFixtureGz))
	f.Add(append([]byte("\uFEFF"), raw...))
	f.Add(bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n")))
	f.Add([]byte(wechatLegacyBill(wechatLegacyHeader, "总交易单数,总交易额,总退款金额,总代金券或立减优惠退款金额,手续费总金额",
		backtickedCells("3", "12.51", "0.01", "0.00", "0.08000"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStatement(bytes.NewReader(data), "")
		if err != nil {
			if !errors.Is(err, statements.ErrFormat) && !errors.Is(err, statements.ErrMismatch) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		require.Len(t, st.SHA1, 40)
		require.Len(t, st.Lines, st.Totals.Lines)
		var pay, ref int
		var fee int64
		for _, l := range st.Lines {
			require.Equal(t, Code, l.Channel)
			require.GreaterOrEqual(t, l.Amount, int64(0))
			require.GreaterOrEqual(t, l.SettledAmount, int64(0))
			require.NotEmpty(t, l.TradeNo)
			switch l.Kind {
			case statements.KindPayment:
				pay++
			case statements.KindRefund:
				ref++
				require.NotEmpty(t, l.RefundNo)
			default:
				t.Fatalf("unexpected kind %q", l.Kind)
			}
			fee += l.FeeMicroYuan
		}
		require.Equal(t, st.Totals.Payments, pay)
		require.Equal(t, st.Totals.Refunds, ref)
		require.Equal(t, st.Totals.FeeMicroYuan, fee)
	})
}

// TestParseWeChatRefusesAGzipThatGrowsTooMuch: a gzip whose rows repeat,
// so that it inflates more than MaxCompressionRatio times, is refused
// naming the line and the ratio once RatioFromBytes have come out, not
// read to its end; a run of blank lines is refused at the one past
// MaxBlankRun, however many follow.
func TestParseWeChatRefusesAGzipThatGrowsTooMuch(t *testing.T) {
	const copies = 50_000 // about 12 MiB of rows
	header, rest, _ := strings.Cut(string(mustReadWeChatFixture(t, wechatFixture)), "\n")
	row, _, _ := strings.Cut(rest, "\n")
	gz := gzipBytes(t, []byte(header+"\n"+strings.Repeat(row+"\n", copies)))
	require.Less(t, len(gz), (12<<20)/statements.MaxCompressionRatio, "precondition: the gzip is a bomb")
	_, err := ParseStatement(bytes.NewReader(gz), "")
	require.ErrorIs(t, err, statements.ErrLimit)
	require.ErrorIs(t, err, statements.ErrFormat)
	require.ErrorContains(t, err, "wechat trade bill: line ")
	require.ErrorContains(t, err, ": gzip stream: ")
	require.ErrorContains(t, err, "more than 100 times")
	require.NotContains(t, err.Error(), fmt.Sprintf("line %d:", copies+1), "refused before the end")

	_, err = ParseStatement(bytes.NewReader(gzipBytes(t, []byte(header+"\n"+strings.Repeat("\r\n", 1<<20)))), "")
	require.ErrorIs(t, err, statements.ErrLimit)
	require.EqualError(t, err, "wechat trade bill: line 1002: more than 1000 blank lines in a row: "+
		statements.ErrLimit.Error()+": "+statements.ErrFormat.Error())
}
