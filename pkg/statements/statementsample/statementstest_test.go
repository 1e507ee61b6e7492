package statementsample_test

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

func fixture(t *testing.T, ch channels.Channel, name string) statements.Statement {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "channels", strings.Split(name, "_")[0], "testdata", name))
	require.NoError(t, err)
	st, err := statements.Parse(ch, data, "")
	require.NoError(t, err)
	return st
}

// TestFixturesRoundTrip writes the lines each channel's fixture parses to
// and parses the result: the same lines, numbered alike, the same totals
// and window; only the bytes (and so the hash) differ.
func TestFixturesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		ch    channels.Channel
		name  string
		write func([]statements.Line) (statementsample.File, error)
	}{
		{channels.WeChat, "wechat_tradebill_ALL_2024-03-15.csv", func(l []statements.Line) (statementsample.File, error) {
			return wechat.SampleBill(l, wechat.SampleBillOptions{})
		}},
		{channels.Alipay, "alipay_20880000000000000156_20240315.csv.zip", func(l []statements.Line) (statementsample.File, error) {
			return alipay.SampleBill("20880000000000000156", "2024-03-15", l)
		}},
		{channels.SQB, "sqb_query_responses_SYNTHETIC.jsonl", sqb.SampleQueryResponses},
	} {
		t.Run(string(tc.ch), func(t *testing.T) {
			st := fixture(t, tc.ch, tc.name)
			f, err := tc.write(st.Lines)
			require.NoError(t, err)
			got, err := statements.Parse(tc.ch, f.Data, f.Want.SHA1)
			require.NoError(t, err)
			assert.Equal(t, f.Want, got, "the written file parses to what the writer says")
			want := st
			want.SHA1 = got.SHA1
			assert.Equal(t, want, got, "the fixture's lines and totals survive the round trip")
		})
	}
}

// stream is a small two-day stream of every channel: payments, partial and
// full refunds, one refunded the next day.
func stream(t *testing.T) []channels.Event {
	t.Helper()
	day2 := channelstest.BaseTime.AddDate(0, 0, 1)
	dec := channels.NewDecoder(channelstest.Keys())
	var events []channels.Event
	add := func(env []byte) {
		res, err := dec.Decode(env)
		require.NoError(t, err)
		events = append(events, res.Event)
	}
	for i, ch := range channels.Codes() {
		a := channelstest.NewTrade(ch, 10*i+1)
		a.Total = 10000
		b := channelstest.NewTrade(ch, 10*i+2)
		b.Total = 2501
		c := channelstest.NewTrade(ch, 10*i+3)
		c.PaidAt = day2
		for _, tr := range []channelstest.Trade{a, b, c} {
			add(channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		}
		// a: 30.00 then 20.00 the next day; b: refunded in full; a retry of a's first refund.
		r1 := channelstest.Refund{No: "RF-A1", Amount: 3000, Cumulative: 3000}
		r2 := channelstest.Refund{No: "RF-A2", Amount: 2000, Cumulative: 5000, At: day2.Add(time.Hour)}
		add(channelstest.RefundEnvelope(a, r2, channelstest.Delivery{}))
		add(channelstest.RefundEnvelope(a, r1, channelstest.Delivery{}))
		add(channelstest.RefundEnvelope(a, r1, channelstest.Delivery{Attempt: 1}))
		add(channelstest.RefundEnvelope(b, channelstest.Refund{No: "RF-B1", Amount: 2501}, channelstest.Delivery{}))
	}
	return events
}

// TestStreamRoundTrip turns a two-day stream into each channel's files and
// parses them back: exactly the lines FromEvents made, numbered in file
// order, with the totals the summaries state.
func TestStreamRoundTrip(t *testing.T) {
	events := stream(t)
	day1, day2 := channelstest.BaseTime.Format(time.DateOnly), channelstest.BaseTime.AddDate(0, 0, 1).Format(time.DateOnly)

	// A refund stamped with its payment's very second comes after it.
	instant := channelstest.NewTrade(channels.WeChat, 4)
	dec := channels.NewDecoder(channelstest.Keys())
	for _, env := range [][]byte{
		channelstest.WeChatRefund(instant, channelstest.Refund{No: "RF-D1", Amount: 100, At: instant.PaidAt}, "SUCCESS", channelstest.Delivery{}),
		channelstest.WeChatPayment(instant, channelstest.Delivery{}),
	} {
		res, err := dec.Decode(env)
		require.NoError(t, err)
		events = append(events, res.Event)
	}

	wx, err := statementsample.FromEvents(channels.WeChat, events)
	require.NoError(t, err)
	require.Len(t, wx, 8, "four payments and four refunds, the retry counted once")
	var kinds []statements.Kind
	for _, l := range wx {
		if l.TradeNo == instant.TradeNo {
			kinds = append(kinds, l.Kind)
		}
	}
	assert.Equal(t, []statements.Kind{statements.KindPayment, statements.KindRefund}, kinds)
	assert.Equal(t, []string{day1, day2}, statementsample.Days(wx))
	micro := channelstest.NewTrade(channels.WeChat, 2).TradeNo
	var fees int64
	for _, day := range []string{day1, day2} {
		lines := statementsample.OnDay(wx, day)
		f, err := wechat.SampleBill(lines, wechat.SampleBillOptions{MicroPay: map[string]bool{micro: true}})
		require.NoError(t, err)
		got, err := statements.Parse(channels.WeChat, f.Data, f.Want.SHA1)
		require.NoError(t, err, "%s", f.Data)
		require.Equal(t, f.Want, got)
		require.Len(t, got.Lines, len(lines))
		for i, l := range got.Lines {
			assert.Equal(t, i+2, l.LineNo)
			assert.Equal(t, day, statementsample.Day(l.Time))
		}
		fees += got.Totals.FeeMicroYuan
		assert.Equal(t, day == day1, bytes.Contains(f.Data, []byte("`"+micro+",`POS20240601000002,`oTEST0000000000000000000001,`MICROPAY,`SUCCESS")))
	}
	// 0.6% of 100.00 + 25.01 + 25.80 + 25.80, less that of 30.00 + 20.00 +
	// 25.01 + 1.00.
	assert.Equal(t, int64(60000+15000+15000+15000-18000-12000-15000-1000), fees)

	ali, err := statementsample.FromEvents(channels.Alipay, events)
	require.NoError(t, err)
	var own []int64
	for _, l := range ali {
		if l.Kind == statements.KindRefund {
			own = append(own, l.Amount)
		}
	}
	assert.Equal(t, []int64{3000, 2501, 2000}, own, "each refund's own amount, from the cumulative ones")
	for _, day := range statementsample.Days(ali) {
		f, err := alipay.SampleBill("20880000000000000156", day, statementsample.OnDay(ali, day))
		require.NoError(t, err)
		got, err := statements.Parse(channels.Alipay, f.Data, f.Want.SHA1)
		require.NoError(t, err)
		require.Equal(t, f.Want, got)
		zr, err := zip.NewReader(bytes.NewReader(f.Data), int64(len(f.Data)))
		require.NoError(t, err)
		require.Len(t, zr.File, 2)
		for _, e := range zr.File {
			assert.Zero(t, e.Flags&0x800, "entry names are GBK without the UTF-8 flag")
			assert.NotContains(t, e.Name, "业务明细", "the name is not UTF-8")
		}
	}

	sq, err := statementsample.FromEvents(channels.SQB, events)
	require.NoError(t, err)
	require.Len(t, sq, 3)
	byTrade := map[string]statements.Line{}
	for _, l := range sq {
		byTrade[l.MerchantOrderNo] = l
	}
	a, b, c := byTrade["POS20240601000021"], byTrade["POS20240601000022"], byTrade["POS20240601000023"]
	assert.Equal(t, []any{sqb.PartialRefunded, int64(10000), int64(5000), day2},
		[]any{a.Status, a.Amount, a.SettledAmount, statementsample.Day(a.Time)}, "dated by its last refund")
	assert.Equal(t, []any{sqb.Refunded, int64(0)}, []any{b.Status, b.SettledAmount})
	assert.Equal(t, []any{sqb.Paid, int64(2580)}, []any{c.Status, c.SettledAmount})
	f, err := sqb.SampleQueryResponses(sq)
	require.NoError(t, err)
	got, err := statements.Parse(channels.SQB, f.Data, f.Want.SHA1)
	require.NoError(t, err)
	assert.Equal(t, f.Want, got)
	assert.Equal(t, int64(10000+2501+2580), got.Totals.PaymentAmount)
	assert.Equal(t, int64(5000+2501), got.Totals.RefundAmount)
}

// TestUnwritable refuses lines the layouts cannot carry, naming the line.
func TestUnwritable(t *testing.T) {
	day := channelstest.BaseTime.Format(time.DateOnly)
	good := func(ch channels.Channel, kind statements.Kind) statements.Line {
		l := statements.Line{
			Channel: ch, Kind: kind, TradeNo: "T1", MerchantOrderNo: "M1", RefundNo: "R1",
			Amount: 100, SettledAmount: 100, Status: "SUCCESS", Time: channelstest.BaseTime, Currency: "CNY",
		}
		if ch == channels.SQB {
			l.Status = sqb.Paid
		}
		return l
	}
	// second returns a good line and, after it, the same line changed by f
	// (on another trade, unless f says otherwise).
	second := func(ch channels.Channel, kind statements.Kind, f func(*statements.Line)) []statements.Line {
		l := good(ch, kind)
		l.TradeNo = "T2"
		f(&l)
		return []statements.Line{good(ch, kind), l}
	}
	wx := func(lines []statements.Line) error {
		_, err := wechat.SampleBill(lines, wechat.SampleBillOptions{})
		return err
	}
	ali := func(lines []statements.Line) error {
		_, err := alipay.SampleBill("2088", day, lines)
		return err
	}
	sq := func(lines []statements.Line) error {
		_, err := sqb.SampleQueryResponses(lines)
		return err
	}
	wp, wr := func(f func(*statements.Line)) []statements.Line {
		return second(channels.WeChat, statements.KindPayment, f)
	},
		func(f func(*statements.Line)) []statements.Line {
			return second(channels.WeChat, statements.KindRefund, f)
		}
	ap := func(f func(*statements.Line)) []statements.Line {
		return second(channels.Alipay, statements.KindPayment, f)
	}
	so := func(f func(*statements.Line)) []statements.Line { return second(channels.SQB, statements.KindOrder, f) }
	for _, tc := range []struct {
		name  string
		write func([]statements.Line) error
		lines []statements.Line
	}{
		{"wechat order kind", wx, wp(func(l *statements.Line) { l.Kind = statements.KindOrder })},
		{"wechat comma in an id", wx, wp(func(l *statements.Line) { l.MerchantOrderNo = "M,1" })},
		{"wechat mangled id", wx, wp(func(l *statements.Line) { l.TradeNo = "4.20000E+27" })},
		{"wechat refund without number", wx, wr(func(l *statements.Line) { l.RefundNo = "" })},
		{"wechat refund status", wx, wr(func(l *statements.Line) { l.Status = "REFUND" })},
		{"wechat settled above amount", wx, wp(func(l *statements.Line) { l.SettledAmount = 101 })},
		{"alipay other channel", ali, ap(func(l *statements.Line) { l.Channel = channels.SQB })},
		{"alipay negative amount", ali, ap(func(l *statements.Line) { l.Amount = -1 })},
		{"sqb payment kind", sq, so(func(l *statements.Line) { l.Kind = statements.KindPayment })},
		{"sqb undocumented status", sq, so(func(l *statements.Line) { l.Status = "DONE" })},
		{"sqb final without time", sq, so(func(l *statements.Line) { l.Time = time.Time{} })},
		{"sqb same sn twice", sq, so(func(l *statements.Line) { l.TradeNo = "T1" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.write(tc.lines[:1]), "the first line alone is fine")
			err := tc.write(tc.lines)
			require.ErrorIs(t, err, statementsample.ErrUnwritable)
			assert.Contains(t, err.Error(), "line 2:")
		})
	}
}
