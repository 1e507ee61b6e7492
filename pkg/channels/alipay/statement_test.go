package alipay

import (
	"archive/zip"
	"bytes"
	"crypto/sha1" //nolint:gosec // the file's identity, as the parser computes it
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/simplifiedchinese"
)

const (
	alipayFixtureZip  = "testdata/alipay_20880000000000000156_20240315.csv.zip"
	alipayFixtureText = "testdata/alipay_20880000000000000156_20240315_detail.utf8.csv"
	alipayDetailName  = "20880000000000000156_20240315_业务明细.csv"
	alipaySummaryName = "20880000000000000156_20240315_业务明细(汇总).csv"
	// alipayFixtureSHA1 is the SHA-1 of the fixture's GBK 业务明细 entry,
	// computed outside Go (Python hashlib over zipfile.read).
	alipayFixtureSHA1 = "e575a74ce848317dd3c71b45e3746f8be6879fca"
)

// alipayEntry is one entry of a zip built by a test.
type alipayEntry struct {
	name string
	// gbkName writes the name as GBK bytes without the UTF-8 flag, as
	// Alipay does; otherwise the name is UTF-8 with the flag.
	gbkName bool
	content []byte
}

// mustAlipayZip builds a zip of the entries.
func mustAlipayZip(tb testing.TB, entries ...alipayEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		fh := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.gbkName {
			name, err := simplifiedchinese.GBK.NewEncoder().String(e.name)
			require.NoError(tb, err)
			fh.Name, fh.NonUTF8 = name, true
		}
		w, err := zw.CreateHeader(fh)
		require.NoError(tb, err)
		_, err = w.Write(e.content)
		require.NoError(tb, err)
	}
	require.NoError(tb, zw.Close())
	return buf.Bytes()
}

// mustGBK encodes UTF-8 text as GBK.
func mustGBK(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	require.NoError(tb, err)
	return b
}

// alipayFixtureDetail is the readable UTF-8 copy of the fixture's 业务明细
// entry (CRLF).
func alipayFixtureDetail(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(alipayFixtureText)
	require.NoError(tb, err)
	return string(b)
}

// alipayVariantZip is the fixture's detail text after edit, GBK, in a zip
// with GBK names beside the summary entry.
func alipayVariantZip(tb testing.TB, edit func(string) string) []byte {
	tb.Helper()
	text := edit(alipayFixtureDetail(tb))
	return mustAlipayZip(tb,
		alipayEntry{name: alipaySummaryName, gbkName: true, content: mustGBK(tb, "#支付宝业务汇总查询\r\n")},
		alipayEntry{name: alipayDetailName, gbkName: true, content: mustGBK(tb, text)},
	)
}

func parseAlipayBytes(b []byte) (statements.Statement, error) {
	return ParseStatement(bytes.NewReader(b), int64(len(b)))
}

func alipayBeijing(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, statements.Beijing)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// alipayFixtureLines are the fixture's five rows, exactly.
func alipayFixtureLines() []statements.Line {
	line := func(no int, kind statements.Kind, trade, order, refund string, amount int64, at string) statements.Line {
		return statements.Line{
			LineNo: no, Channel: Code, Kind: kind, TradeNo: trade, MerchantOrderNo: order,
			RefundNo: refund, Amount: amount, SettledAmount: amount, Status: "SUCCESS",
			Time: alipayBeijing(at), Currency: "CNY", MerchantID: "20880000000000000156",
		}
	}
	return []statements.Line{
		line(6, statements.KindPayment, "2024031522001400000000000001", "TEST-ORDER-0001", "", 10000, "2024-03-15 09:12:05"),
		line(7, statements.KindPayment, "2024031522001400000000000002", "TEST-ORDER-0002", "", 5880, "2024-03-15 10:30:41"),
		line(8, statements.KindPayment, "2024031522001400000000000003", "TEST-ORDER-0003", "", 2500, "2024-03-15 11:02:17"),
		line(9, statements.KindRefund, "2024031522001400000000000001", "TEST-ORDER-0001", "TEST-REFUND-0001", 3000, "2024-03-15 14:45:09"),
		line(10, statements.KindRefund, "2024031522001400000000000003", "TEST-ORDER-0003", "TEST-REFUND-0002", 2500, "2024-03-15 16:20:33"),
	}
}

func TestParseAlipayFixture(t *testing.T) {
	b, err := os.ReadFile(alipayFixtureZip)
	require.NoError(t, err)

	st, err := parseAlipayBytes(b)
	require.NoError(t, err)

	assert.Equal(t, Code, st.Channel)
	assert.Equal(t, StatementFormat, st.Format)
	assert.Equal(t, time.Date(2024, 3, 14, 16, 0, 0, 0, time.UTC), st.From)
	assert.Equal(t, time.Date(2024, 3, 15, 16, 0, 0, 0, time.UTC), st.To)
	assert.Equal(t, alipayFixtureSHA1, st.SHA1)
	assert.Equal(t, "20880000000000000156", st.Account)
	assert.Equal(t, []string{"20880000000000000156"}, st.MerchantIDs())
	assert.Equal(t, alipayFixtureLines(), st.Lines)
	assert.Equal(t, statements.Totals{
		Lines: 5, Payments: 3, Refunds: 2,
		SettledPayments: 18380, SettledRefunds: 5500,
	}, st.Totals)

	// The payment and the refund of one trade, field by field.
	pay, refund := st.Lines[0], st.Lines[3]
	assert.Equal(t, statements.KindPayment, pay.Kind)
	assert.Equal(t, "2024031522001400000000000001", pay.TradeNo)
	assert.Empty(t, pay.RefundNo)
	assert.Equal(t, int64(10000), pay.Amount)
	assert.Equal(t, time.Date(2024, 3, 15, 1, 12, 5, 0, time.UTC), pay.Time)
	assert.Equal(t, statements.KindRefund, refund.Kind)
	assert.Equal(t, pay.TradeNo, refund.TradeNo)
	assert.Equal(t, "TEST-REFUND-0001", refund.RefundNo)
	assert.Equal(t, int64(3000), refund.Amount, "−订单金额")
	assert.Equal(t, int64(3000), refund.SettledAmount, "−商家实收")
	assert.Equal(t, time.Date(2024, 3, 15, 6, 45, 9, 0, time.UTC), refund.Time, "完成时间, not 创建时间")
}

// The readable copy is the fixture's entry, so variants built from it test
// the same file.
func TestAlipayFixtureTextIsTheEntry(t *testing.T) {
	require.Contains(t, alipayFixtureDetail(t), "\r\n"+alipayHeader25+"\r\n", "the 25-column header")
	raw := mustGBK(t, alipayFixtureDetail(t))
	sum := sha1.Sum(raw) //nolint:gosec // see the import
	assert.Equal(t, alipayFixtureSHA1, hex.EncodeToString(sum[:]))
}

func TestParseAlipayEntryNames(t *testing.T) {
	detail := mustGBK(t, alipayFixtureDetail(t))
	summary := mustGBK(t, "#支付宝业务汇总查询\r\n")
	tests := []struct {
		name    string
		entries []alipayEntry
		flag    bool // whether the detail entry carries the UTF-8 flag
	}{
		{
			name: "GBK names without the UTF-8 flag",
			entries: []alipayEntry{
				{name: alipayDetailName, gbkName: true, content: detail},
				{name: alipaySummaryName, gbkName: true, content: summary},
			},
		},
		{
			name: "UTF-8 names with the flag",
			entries: []alipayEntry{
				{name: alipayDetailName, content: detail},
				{name: alipaySummaryName, content: summary},
			},
			flag: true,
		},
		{
			name: "summary first, in a folder",
			entries: []alipayEntry{
				{name: "bill/" + alipaySummaryName, gbkName: true, content: summary},
				{name: "bill/" + alipayDetailName, gbkName: true, content: detail},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustAlipayZip(t, tt.entries...)
			zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
			require.NoError(t, err)
			for _, f := range zr.File {
				require.Equal(t, tt.flag, f.Flags&0x800 != 0, "precondition: the UTF-8 flag of %q", f.Name)
				require.Equal(t, !tt.flag, f.NonUTF8, "precondition: archive/zip's NonUTF8 of %q", f.Name)
			}

			st, err := parseAlipayBytes(b)
			require.NoError(t, err)
			assert.Equal(t, alipayFixtureLines(), st.Lines)
			assert.Equal(t, alipayFixtureSHA1, st.SHA1)
		})
	}
}

// alipayHeader25 is the fixture's header; the 22-column layout ends at
// 退款批次号/请求号.
const alipayHeader25 = "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注"

// alipayEditRows applies edit to the header and each detail row's cells.
func alipayEditRows(text string, edit func(cells []string) []string) string {
	lines := strings.Split(text, "\r\n")
	for i, l := range lines {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines[i] = strings.Join(edit(strings.Split(l, ",")), ",")
	}
	return strings.Join(lines, "\r\n")
}

func TestParseAlipayLayouts(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(string) string
		check func(t *testing.T, st statements.Statement)
	}{
		{
			name: "22-column header without 服务费, 分润, 备注",
			edit: func(s string) string {
				return alipayEditRows(s, func(c []string) []string { return c[:22] })
			},
			check: func(t *testing.T, st statements.Statement) {
				t.Helper()
				assert.Equal(t, alipayFixtureLines(), st.Lines)
			},
		},
		{
			name: "LF line endings",
			edit: func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") },
			check: func(t *testing.T, st statements.Statement) {
				t.Helper()
				assert.Equal(t, alipayFixtureLines(), st.Lines)
			},
		},
		{
			name: "columns reordered, half-width parentheses",
			edit: func(s string) string {
				s = alipayEditRows(s, func(c []string) []string {
					c[0], c[12] = c[12], c[0]
					return c
				})
				return strings.Replace(s, "订单金额（元）", "订单金额(元)", 1)
			},
			check: func(t *testing.T, st statements.Statement) {
				t.Helper()
				assert.Equal(t, alipayFixtureLines(), st.Lines)
			},
		},
		{
			name: "non-zero fees, signs as given",
			edit: func(s string) string {
				s = strings.Replace(s, "TEST-ORDER-0001\t,交易\t,测试商品A,2024-03-15 09:12:00,2024-03-15 09:12:05,\t,\t,\t,\t,测*户(tes***@example.com)\t,100.00,100.00,0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00,\t,0.00,",
					"TEST-ORDER-0001\t,交易\t,测试商品A,2024-03-15 09:12:00,2024-03-15 09:12:05,\t,\t,\t,\t,测*户(tes***@example.com)\t,100.00,100.00,0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00,\t,-0.60,", 1)
				return strings.Replace(s, "TEST-REFUND-0001\t,0.00,", "TEST-REFUND-0001\t,0.18,", 1)
			},
			check: func(t *testing.T, st statements.Statement) {
				t.Helper()
				require.Len(t, st.Lines, 5)
				assert.Equal(t, int64(-60000), st.Lines[0].FeeMicroYuan)
				assert.Equal(t, int64(18000), st.Lines[3].FeeMicroYuan)
				assert.Zero(t, st.Lines[1].FeeMicroYuan)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := parseAlipayBytes(alipayVariantZip(t, tt.edit))
			require.NoError(t, err)
			assert.Equal(t, statements.Totals{Lines: 5, Payments: 3, Refunds: 2, SettledPayments: 18380, SettledRefunds: 5500}, st.Totals)
			tt.check(t, st)
		})
	}
}

func TestParseAlipayRefused(t *testing.T) {
	summaryOnly := mustAlipayZip(t, alipayEntry{name: alipaySummaryName, gbkName: true, content: mustGBK(t, "#支付宝业务汇总查询\r\n")})
	detail := mustGBK(t, alipayFixtureDetail(t))
	twoDetails := mustAlipayZip(t,
		alipayEntry{name: alipayDetailName, gbkName: true, content: detail},
		alipayEntry{name: "copy_" + alipayDetailName, gbkName: true, content: detail},
	)
	replace := func(old, repl string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				panic("fixture lacks " + old)
			}
			return strings.Replace(s, old, repl, 1)
		}
	}
	tests := []struct {
		name string
		zip  []byte              // used when set
		edit func(string) string // else the fixture after edit
		want error
		says []string // substrings of the message
	}{
		{
			name: "footer payment count", edit: replace("交易合计：3笔", "交易合计：4笔"), want: statements.ErrMismatch,
			says: []string{"line 12", "交易合计 says 4 笔, rows have 3 (rows − footer = -1)"},
		},
		{
			name: "footer payment sum", edit: replace("商家实收共183.80元", "商家实收共183.90元"), want: statements.ErrMismatch,
			says: []string{"商家实收共 says 183.90, rows sum to 183.80 (rows − footer = -0.10)"},
		},
		{
			name: "footer refund count and sum", edit: replace("2笔，商家实收退款共-55.00元", "1笔，商家实收退款共-30.00元"), want: statements.ErrMismatch,
			says: []string{"line 13", "退款合计 says 1 笔, rows have 2 (rows − footer = 1)", "商家实收退款共 says -30.00, rows sum to -55.00 (rows − footer = -25.00)"},
		},
		{
			name: "a row more than the footer", edit: replace("#-----------------------------------------业务明细列表结束",
				"2024031522001400000000000004\t,TEST-ORDER-0004\t,交易\t,测试商品D,2024-03-15 12:00:00,2024-03-15 12:00:01,\t,\t,\t,\t,x\t,1.00,1.00,0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00,\t,0.00,0.00,\r\n#-----------------------------------------业务明细列表结束"),
			want: statements.ErrMismatch, says: []string{"rows have 4 (rows − footer = 1)", "(rows − footer = 1.00)"},
		},
		{
			name: "unknown header", edit: replace("支付宝交易号,商户订单号,业务类型", "交易号,商户订单号,类型"), want: statements.ErrFormat,
			says: []string{"line 5", "unknown header", "missing columns 支付宝交易号, 业务类型"},
		},
		{
			name: "bank-channel header without 退款批次号/请求号", edit: replace("退款批次号/请求号", "退款批次号"), want: statements.ErrFormat,
			says: []string{"missing columns 退款批次号/请求号"},
		},
		{
			name: "zip without the detail entry", zip: summaryOnly, want: statements.ErrFormat,
			says: []string{"no …_业务明细.csv entry", "业务明细(汇总).csv"},
		},
		{name: "two detail entries", zip: twoDetails, want: statements.ErrFormat, says: []string{"more than one"}},
		{name: "not a zip", zip: detail, want: statements.ErrFormat, says: []string{"open zip"}},
		{
			name: "trade number in scientific notation", edit: replace("2024031522001400000000000002\t", "2.02403E+27"), want: statements.ErrFormat,
			says: []string{"line 7, column 支付宝交易号", "scientific notation"},
		},
		{
			name: "order number in scientific notation", edit: replace("TEST-ORDER-0002\t", "1.23457E+15\t"), want: statements.ErrFormat,
			says: []string{"line 7, column 商户订单号", "scientific notation"},
		},
		{
			name: "time re-saved by a spreadsheet", edit: replace("2024-03-15 10:30:41", "2024/3/15 10:30"), want: statements.ErrFormat,
			says: []string{"line 7, column 完成时间"},
		},
		{
			name: "amount with three decimals", edit: replace("58.80,58.80", "58.800,58.80"), want: statements.ErrFormat,
			says: []string{"line 7, column 订单金额（元）"},
		},
		{
			name: "refund with a positive amount", edit: replace("-30.00,-30.00", "30.00,-30.00"), want: statements.ErrFormat,
			says: []string{"line 9, column 订单金额（元）", "wrong sign"},
		},
		{
			name: "unknown 业务类型", edit: replace("TEST-ORDER-0002\t,交易", "TEST-ORDER-0002\t,冻结"), want: statements.ErrFormat,
			says: []string{"line 7, column 业务类型", "冻结"},
		},
		{
			name: "a cell too many", edit: replace("测试商品B", "测试商品B,赠品"), want: statements.ErrFormat,
			says: []string{"line 7", "26 cells, the header has 25"},
		},
		{name: "truncated before the end marker", edit: func(s string) string {
			return s[:strings.Index(s, "#-----------------------------------------业务明细列表结束")]
		}, want: statements.ErrFormat, says: []string{"no 业务明细列表结束 marker"}},
		{name: "no footer", edit: replace("#交易合计", "#合计"), want: statements.ErrFormat, says: []string{"no #交易合计 footer"}},
		{name: "no window", edit: replace("#起始日期", "#日期"), want: statements.ErrFormat, says: []string{"no #起始日期 line"}},
		{
			name: "window backwards", edit: replace("终止日期：[2024年03月16日", "终止日期：[2024年03月14日"), want: statements.ErrFormat,
			says: []string{"line 3", "not after"},
		},
		{name: "no start marker", edit: replace("-业务明细列表-", "--"), want: statements.ErrFormat, says: []string{"line 5", "before the 业务明细列表 marker"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.zip
			if b == nil {
				b = alipayVariantZip(t, tt.edit)
			}
			st, err := parseAlipayBytes(b)
			require.ErrorIs(t, err, tt.want)
			for _, s := range tt.says {
				assert.Contains(t, err.Error(), s)
			}
			assert.Empty(t, st.Lines)
		})
	}
}

func FuzzParseAlipay(f *testing.F) {
	zipped, err := os.ReadFile(alipayFixtureZip)
	require.NoError(f, err)
	f.Add(zipped)
	text, err := os.ReadFile(alipayFixtureText)
	require.NoError(f, err)
	gbk := mustGBK(f, string(text))
	f.Add(gbk)
	f.Add(mustGBK(f, strings.ReplaceAll(string(text), "\r\n", "\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		// A zip is parsed as it is; anything else becomes the detail entry
		// of a zip, so the fuzzer reaches the text parser.
		if !bytes.HasPrefix(data, []byte("PK")) {
			data = mustAlipayZip(t, alipayEntry{name: alipayDetailName, gbkName: true, content: data})
		}
		st, err := parseAlipayBytes(data)
		if err != nil {
			if !errors.Is(err, statements.ErrFormat) && !errors.Is(err, statements.ErrMismatch) {
				t.Fatalf("error wraps neither ErrFormat nor ErrMismatch: %v", err)
			}
			return
		}
		require.Len(t, st.SHA1, 40)
		require.Len(t, st.Lines, st.Totals.Lines)
		var settledPaid, settledRefunded int64
		for _, l := range st.Lines {
			require.GreaterOrEqual(t, l.Amount, int64(0))
			require.GreaterOrEqual(t, l.SettledAmount, int64(0))
			require.NotEmpty(t, l.TradeNo)
			switch l.Kind {
			case statements.KindPayment:
				settledPaid += l.SettledAmount
			case statements.KindRefund:
				settledRefunded += l.SettledAmount
			default:
				t.Fatalf("line %d of kind %q", l.LineNo, l.Kind)
			}
		}
		require.Equal(t, st.Totals.SettledPayments, settledPaid)
		require.Equal(t, st.Totals.SettledRefunds, settledRefunded)
	})
}

// TestParseAlipayRefusesUnsafeZips: an entry named by an absolute path, a
// drive letter or a ".." element is refused naming the entry, and a zip
// of 100,000 entries is refused in one short line, not a list of names.
func TestParseAlipayRefusesUnsafeZips(t *testing.T) {
	detail := mustGBK(t, alipayFixtureDetail(t))
	for _, tc := range []struct{ name, entry, want string }{
		{"climbs out", "../" + alipayDetailName, `zip entry 1 "../` + alipayDetailName + `": its name has a ".." element`},
		{"climbs out with a backslash", `bill\..\..\` + alipayDetailName, `has a ".." element`},
		{"absolute", "/tmp/" + alipayDetailName, "is an absolute path"},
		{"drive letter", `C:\` + alipayDetailName, "starts with a drive letter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, gbkName := range []bool{false, true} {
				_, err := parseAlipayBytes(mustAlipayZip(t, alipayEntry{name: tc.entry, gbkName: gbkName, content: detail}))
				require.ErrorIs(t, err, statements.ErrFormat)
				require.ErrorContains(t, err, tc.want)
			}
		})
	}

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 100_000 {
		_, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("entry-%06d.csv", i), Method: zip.Store})
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	_, err := parseAlipayBytes(buf.Bytes())
	require.ErrorIs(t, err, statements.ErrFormat)
	assert.EqualError(t, err, fmt.Sprintf("alipay bill: 100000 entries in the zip, more than the %d a bill has: %s", AlipayMaxEntries, statements.ErrFormat))
}

// TestParseAlipayRefusesAnEntryThatGrowsTooMuch: a detail entry whose
// rows repeat, so that it inflates more than MaxCompressionRatio times, is
// refused naming the entry, the line and the ratio once RatioFromBytes
// have come out, not read to its end.
func TestParseAlipayRefusesAnEntryThatGrowsTooMuch(t *testing.T) {
	const copies = 60_000 // about 12 MiB of rows
	zipped := alipayVariantZip(t, func(text string) string {
		head, rest, ok := strings.Cut(text, "业务明细列表----------------------------------------\r\n")
		require.True(t, ok)
		header, rest, _ := strings.Cut(rest, "\r\n")
		row, _, _ := strings.Cut(rest, "\r\n")
		return head + "业务明细列表----------------------------------------\r\n" + header + "\r\n" +
			strings.Repeat(row+"\r\n", copies) + rest
	})
	require.Less(t, len(zipped), (12<<20)/statements.MaxCompressionRatio, "precondition: the zip is a bomb")
	_, err := parseAlipayBytes(zipped)
	require.ErrorIs(t, err, statements.ErrLimit)
	require.ErrorIs(t, err, statements.ErrFormat)
	require.ErrorContains(t, err, `alipay bill: detail entry "20880000000000000156_20240315_业务明细.csv": line `)
	require.ErrorContains(t, err, ": the entry: ")
	require.ErrorContains(t, err, "more than 100 times")
	require.NotContains(t, err.Error(), fmt.Sprintf("line %d:", copies+5), "refused before the end")
}
