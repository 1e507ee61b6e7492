package sqb_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/statements"
)

const sqbFixture = "testdata/sqb_query_responses_SYNTHETIC.jsonl"

// sqbFixtureLines returns the fixture's three lines, without their LF.
func sqbFixtureLines(tb testing.TB) []string {
	tb.Helper()
	data, err := os.ReadFile(sqbFixture)
	require.NoError(tb, err)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(tb, lines, 3)
	return lines
}

// sqbPaid is the fixture's PAID order (TEST-ORDER-0002) with the
// replacements old → new applied; each old must occur in it.
func sqbPaid(tb testing.TB, oldNew ...string) string {
	tb.Helper()
	s := sqbFixtureLines(tb)[1]
	for i := 0; i+1 < len(oldNew); i += 2 {
		require.Contains(tb, s, oldNew[i], "test edit")
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	return s
}

func beijingOn15(h, m, s int) time.Time {
	return time.Date(2024, 3, 15, h, m, s, 0, statements.Beijing).UTC()
}

func TestParseSQBFixture(t *testing.T) {
	f, err := os.Open(sqbFixture)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })

	st, err := sqb.ParseStatement(f)
	require.NoError(t, err)

	order := func(lineNo int, sn, clientSN, status string, total, net int64, at time.Time) statements.Line {
		return statements.Line{
			LineNo: lineNo, Channel: channels.SQB, Kind: statements.KindOrder,
			TradeNo: sn, MerchantOrderNo: clientSN, Amount: total, SettledAmount: net,
			Status: status, Time: at, Currency: "CNY", MerchantID: "100000000000000001",
		}
	}
	assert.Equal(t, []statements.Line{
		order(1, "7890000000000001", "TEST-ORDER-0001", "PARTIAL_REFUNDED", 10000, 7000, beijingOn15(14, 45, 9)),
		order(2, "7890000000000002", "TEST-ORDER-0002", "PAID", 5880, 5880, beijingOn15(10, 30, 41)),
		order(3, "7890000000000003", "TEST-ORDER-0003", "REFUNDED", 2500, 0, beijingOn15(16, 20, 33)),
	}, st.Lines)
	assert.Equal(t, statements.Totals{
		Lines: 3, Payments: 3,
		PaymentAmount: 18380, SettledPayments: 12880, RefundAmount: 5500,
	}, st.Totals)
	assert.Equal(t, channels.SQB, st.Channel)
	assert.Equal(t, sqb.FormatQuery, st.Format)
	assert.Equal(t, "c782f9edf171f3cb269cc1d3d39da1a9d9828118", st.SHA1, "sha1sum of the fixture")
	assert.True(t, st.From.IsZero())
	assert.True(t, st.To.IsZero())
	for _, l := range st.Lines {
		assert.Equal(t, time.UTC, l.Time.Location(), "line %d", l.LineNo)
	}
}

func TestParseSQBAccepted(t *testing.T) {
	fx := sqbFixtureLines(t)
	tests := []struct {
		name     string
		in       string
		lineNos  []int
		statuses []string
		totals   statements.Totals
	}{
		{
			name: "empty file", in: "",
		},
		{
			name:     "CRLF, BOM, blank lines and no final newline",
			in:       "\ufeff" + fx[0] + "\r\n\r\n  \t\r\n" + fx[2],
			lineNos:  []int{1, 4},
			statuses: []string{"PARTIAL_REFUNDED", "REFUNDED"},
			totals:   statements.Totals{Lines: 2, Payments: 2, PaymentAmount: 12500, SettledPayments: 7000, RefundAmount: 5500},
		},
		{
			name:     "byte-identical duplicate: the later line is ignored",
			in:       fx[1] + "\n" + fx[0] + "\n" + fx[1] + "\n",
			lineNos:  []int{1, 2},
			statuses: []string{"PAID", "PARTIAL_REFUNDED"},
			totals:   statements.Totals{Lines: 2, Payments: 2, PaymentAmount: 15880, SettledPayments: 12880, RefundAmount: 3000},
		},
		{
			name:     "identical but for CRLF counts as identical",
			in:       fx[1] + "\r\n" + fx[1] + "\n",
			lineNos:  []int{1},
			statuses: []string{"PAID"},
			totals:   statements.Totals{Lines: 1, Payments: 1, PaymentAmount: 5880, SettledPayments: 5880},
		},
		{
			name:     "non-final CREATED without finish_time is kept with a zero time, not a payment",
			in:       sqbPaid(t, `"PAID"`, `"CREATED"`, `"finish_time":"1710469841000",`, ""),
			lineNos:  []int{1},
			statuses: []string{"CREATED"},
			totals:   statements.Totals{Lines: 1},
		},
		{
			name:     "non-final REFUND_ERROR is kept, not counted until queried again",
			in:       sqbPaid(t, `"PAID"`, `"REFUND_ERROR"`),
			lineNos:  []int{1},
			statuses: []string{"REFUND_ERROR"},
			totals:   statements.Totals{Lines: 1},
		},
		{
			name:     "CANCELED with nothing left: neither a payment nor a refund",
			in:       sqbPaid(t, `"PAID"`, `"CANCELED"`, `"net_amount":"5880"`, `"net_amount":"0"`),
			lineNos:  []int{1},
			statuses: []string{"CANCELED"},
			totals:   statements.Totals{Lines: 1},
		},
		{
			name:     "PAY_CANCELED (the payment failed): not a payment",
			in:       sqbPaid(t, `"PAID"`, `"PAY_CANCELED"`),
			lineNos:  []int{1},
			statuses: []string{"PAY_CANCELED"},
			totals:   statements.Totals{Lines: 1},
		},
		{
			name:     "a CANCELED order beside a paid one counts only the paid one",
			in:       fx[1] + "\n" + strings.Replace(sqbPaid(t, `"PAID"`, `"CANCELED"`, `"net_amount":"5880"`, `"net_amount":"0"`), "7890000000000002", "7890000000000009", 1),
			lineNos:  []int{1, 2},
			statuses: []string{"PAID", "CANCELED"},
			totals:   statements.Totals{Lines: 2, Payments: 1, PaymentAmount: 5880, SettledPayments: 5880},
		},
		{
			name:     "amount at channels.MaxAmount",
			in:       sqbPaid(t, `"total_amount":"5880"`, `"total_amount":"1000000000000"`),
			lineNos:  []int{1},
			statuses: []string{"PAID"},
			totals: statements.Totals{
				Lines: 1, Payments: 1, PaymentAmount: channels.MaxAmount,
				SettledPayments: 5880, RefundAmount: channels.MaxAmount - 5880,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := sqb.ParseStatement(strings.NewReader(tt.in))
			require.NoError(t, err)
			var lineNos []int
			var statuses []string
			for _, l := range st.Lines {
				lineNos = append(lineNos, l.LineNo)
				statuses = append(statuses, l.Status)
			}
			assert.Equal(t, tt.lineNos, lineNos)
			assert.Equal(t, tt.statuses, statuses)
			assert.Equal(t, tt.totals, st.Totals)
			assert.Len(t, st.SHA1, 40)
		})
	}

	t.Run("zero time only where finish_time is absent", func(t *testing.T) {
		st, err := sqb.ParseStatement(strings.NewReader(
			sqbPaid(t, `"PAID"`, `"CREATED"`, `"finish_time":"1710469841000",`, "")))
		require.NoError(t, err)
		require.Len(t, st.Lines, 1)
		assert.True(t, st.Lines[0].Time.IsZero())
	})
}

func TestParseSQBRefused(t *testing.T) {
	fx := sqbFixtureLines(t)
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error message
	}{
		{
			name: "HTTP-level result_code not 200",
			in:   fx[0] + "\n" + `{"result_code":"400","error_code":"ILLEGAL_SIGN","error_message":"签名错误"}` + "\n",
			want: []string{"line 2", "result_code", `"400"`, "ILLEGAL_SIGN"},
		},
		{
			name: "HTTP-level result_code missing",
			in:   `{"biz_response":{"result_code":"SUCCESS","data":{}}}`,
			want: []string{"line 1", "result_code: missing"},
		},
		{
			name: "biz_response result_code FAIL",
			in: fx[0] + "\n\n" +
				`{"result_code":"200","biz_response":{"result_code":"FAIL","error_code":"UPAY_ORDER_NOT_EXISTS","error_message":"订单不存在"}}`,
			want: []string{"line 3", "biz_response.result_code", `"FAIL"`, "UPAY_ORDER_NOT_EXISTS"},
		},
		{
			name: "total_amount repeated in another case",
			in:   fx[0] + "\n" + sqbPaid(t, `"total_amount":"5880"`, `"total_amount":"5880","TOTAL_AMOUNT":"999900"`),
			want: []string{"line 2", `"TOTAL_AMOUNT"`, `"total_amount"`, `"biz_response.data"`},
		},
		{
			name: "terminal_sn twice",
			in:   sqbPaid(t, `"terminal_sn":"100000000000000001"`, `"terminal_sn":"100000000000000001","terminal_sn":"999900"`),
			want: []string{"line 1", `"terminal_sn"`},
		},
		{
			name: "no biz_response (a callback body, not a query response)",
			in:   `{"result_code":"200","sn":"7890000000000002"}`,
			want: []string{"line 1", "biz_response: missing"},
		},
		{
			name: "no data",
			in:   `{"result_code":"200","biz_response":{"result_code":"SUCCESS"}}`,
			want: []string{"line 1", "biz_response.data: missing"},
		},
		{
			name: "non-numeric total_amount",
			in:   sqbPaid(t, `"total_amount":"5880"`, `"total_amount":"58.80"`),
			want: []string{"line 1", "biz_response.data.total_amount", `"58.80"`},
		},
		{
			name: "negative net_amount",
			in:   sqbPaid(t, `"net_amount":"5880"`, `"net_amount":"-1"`),
			want: []string{"line 1", "biz_response.data.net_amount", `"-1"`},
		},
		{
			name: "total_amount above channels.MaxAmount",
			in:   sqbPaid(t, `"total_amount":"5880"`, `"total_amount":"1000000000001"`),
			want: []string{"line 1", "biz_response.data.total_amount", "exceeds"},
		},
		{
			name: "total_amount with a leading zero",
			in:   sqbPaid(t, `"total_amount":"5880"`, `"total_amount":"05880"`),
			want: []string{"line 1", "biz_response.data.total_amount"},
		},
		{
			name: "total_amount as a JSON number",
			in:   sqbPaid(t, `"total_amount":"5880"`, `"total_amount":5880`),
			want: []string{"line 1", "column", "biz_response.data.total_amount", "number"},
		},
		{
			name: "net_amount missing",
			in:   sqbPaid(t, `"net_amount":"5880",`, ""),
			want: []string{"line 1", "biz_response.data.net_amount: missing"},
		},
		{
			name: "net_amount above total_amount",
			in:   fx[0] + "\n" + sqbPaid(t, `"net_amount":"5880"`, `"net_amount":"5881"`),
			want: []string{"line 2", "biz_response.data.net_amount", "5881 exceeds total_amount 5880"},
		},
		{
			name: "same sn, different response",
			in:   fx[1] + "\n" + fx[0] + "\n" + sqbPaid(t, `"PAID"`, `"REFUNDED"`, `"net_amount":"5880"`, `"net_amount":"0"`),
			want: []string{"line 3", `sn "7890000000000002" already on line 1`},
		},
		{
			name: "malformed JSON",
			in:   fx[0] + "\n" + fx[1][:40] + "\n" + fx[2],
			want: []string{"line 2", "column", "malformed JSON"},
		},
		{
			name: "trailing garbage after the response",
			in:   fx[1] + " x",
			want: []string{"line 1", "malformed JSON"},
		},
		{
			name: "JSON array instead of a response",
			in:   `[1,2]`,
			want: []string{"line 1", "the response", "array"},
		},
		{
			name: "not UTF-8",
			in:   sqbPaid(t, "测试商品B", "\xb2\xe2\xca\xd4"),
			want: []string{"line 1", "UTF-8"},
		},
		{
			name: "undocumented order_status",
			in:   sqbPaid(t, `"PAID"`, `"SETTLED"`),
			want: []string{"line 1", "biz_response.data.order_status", `"SETTLED"`},
		},
		{
			name: "empty order_status",
			in:   sqbPaid(t, `"PAID"`, `""`),
			want: []string{"line 1", "biz_response.data.order_status: missing"},
		},
		{
			name: "sn missing",
			in:   sqbPaid(t, `"sn":"7890000000000002",`, ""),
			want: []string{"line 1", "biz_response.data.sn: missing"},
		},
		{
			name: "client_sn with a control character",
			in:   sqbPaid(t, `"TEST-ORDER-0002"`, `"TEST\tORDER"`),
			want: []string{"line 1", "biz_response.data.client_sn", "control character"},
		},
		{
			name: "client_sn longer than channels.MaxIDLen",
			in:   sqbPaid(t, `"TEST-ORDER-0002"`, `"`+strings.Repeat("9", channels.MaxIDLen+1)+`"`),
			want: []string{"line 1", "biz_response.data.client_sn", "65 bytes"},
		},
		{
			name: "final order without finish_time",
			in:   sqbPaid(t, `"finish_time":"1710469841000",`, ""),
			want: []string{"line 1", "biz_response.data.finish_time", "missing for final order_status PAID"},
		},
		{
			name: "finish_time in seconds",
			in:   sqbPaid(t, `"finish_time":"1710469841000"`, `"finish_time":"1710469841"`),
			want: []string{"line 1", "biz_response.data.finish_time", `"1710469841"`},
		},
		{
			name: "finish_time not digits",
			in:   sqbPaid(t, `"finish_time":"1710469841000"`, `"finish_time":"171046984100x"`),
			want: []string{"line 1", "biz_response.data.finish_time"},
		},
		{
			name: "finish_time with a leading zero",
			in:   sqbPaid(t, `"finish_time":"1710469841000"`, `"finish_time":"0710469841000"`),
			want: []string{"line 1", "biz_response.data.finish_time"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := sqb.ParseStatement(strings.NewReader(tt.in))
			require.ErrorIs(t, err, statements.ErrFormat)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Empty(t, st.Lines)
		})
	}
}

func TestParseSQBReadError(t *testing.T) {
	boom := errors.New("disk gone")
	_, err := sqb.ParseStatement(iotest.ErrReader(boom))
	require.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, statements.ErrFormat)
}

func FuzzParseSQB(f *testing.F) {
	data, err := os.ReadFile(sqbFixture)
	require.NoError(f, err)
	f.Add(data)
	for _, l := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		f.Add(l)
		f.Add(append(append(append([]byte{}, l...), '\n'), l...))
	}
	f.Add([]byte(`{"result_code":"200","biz_response":{"result_code":"SUCCESS","data":{"sn":"1","client_sn":"a",` +
		`"order_status":"CREATED","total_amount":"0","net_amount":"0"}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		st, err := sqb.ParseStatement(bytes.NewReader(in))
		if err != nil {
			require.ErrorIs(t, err, statements.ErrFormat)
			return
		}
		var tot statements.Totals
		seen := map[string]bool{}
		for _, l := range st.Lines {
			require.False(t, seen[l.TradeNo], "sn %q twice", l.TradeNo)
			seen[l.TradeNo] = true
			require.Equal(t, statements.KindOrder, l.Kind)
			require.NotEmpty(t, l.TradeNo)
			require.NotEmpty(t, l.MerchantOrderNo)
			require.GreaterOrEqual(t, l.SettledAmount, int64(0))
			require.LessOrEqual(t, l.SettledAmount, l.Amount)
			require.LessOrEqual(t, l.Amount, channels.MaxAmount)
			tot.Lines++
			if !sqb.Settled(l.Status) {
				continue // a cancelled, failed or unfinished order is neither a payment nor a refund
			}
			tot.Payments++
			tot.PaymentAmount += l.Amount
			tot.SettledPayments += l.SettledAmount
			tot.RefundAmount += l.Amount - l.SettledAmount
		}
		require.Equal(t, tot, st.Totals)
	})
}

// TestParseSQBPublishedCanceledIsNoPayment: Shouqianba's own published query
// answer for a CANCELED order (total_amount 1, net_amount 0), saved as one
// line, is a line of the statement but neither a payment received nor a
// refund: a cancel says nothing about whether the payment had gone through
// (reconciliation only asks that the trade nets to zero), so the totals a
// merchant reads count no money for it.
func TestParseSQBPublishedCanceledIsNoPayment(t *testing.T) {
	raw, err := os.ReadFile("testdata/published/sqb/core_query_canceled_response.json")
	require.NoError(t, err)
	var line bytes.Buffer
	require.NoError(t, json.Compact(&line, raw))
	st, err := sqb.ParseStatement(bytes.NewReader(line.Bytes()))
	require.NoError(t, err)
	require.Len(t, st.Lines, 1)
	l := st.Lines[0]
	assert.Equal(t, sqb.Canceled, l.Status)
	assert.Equal(t, "7894259244096963", l.TradeNo)
	assert.Equal(t, int64(1), l.Amount)
	assert.Zero(t, l.SettledAmount)
	assert.Equal(t, statements.Totals{Lines: 1}, st.Totals)
	assert.False(t, sqb.Settled(l.Status))
}
