package alipay

import (
	"archive/zip"
	"bytes"
	"cmp"
	"crypto/sha1" //nolint:gosec // the parser identifies the detail entry by SHA-1; tests compare it.
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// sampleHeader is the 25-column header of the 业务明细 entry.
const sampleHeader = "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户," +
	"订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称," +
	"商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注"

// sampleSummaryHeader is the header of the 业务明细(汇总) entry.
const sampleSummaryHeader = "门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,商家实收（元）,支付宝优惠（元）," +
	"商家优惠（元）,卡消费金额（元）,服务费（元）,分润（元）,实收净额（元）"

const (
	alipayBuyer       = "测*户(tes***@example.com)"
	alipayProduct     = "门店消费"
	alipayTimeForm    = "2006-01-02 15:04:05"
	alipayWindowForm  = "2006年01月02日 15:04:05"
	alipayCommentRows = 4 // the # lines before the header
	tab               = "\t"
)

// SampleBill writes lines as the Alipay trade bill (bill_type=trade) of
// account for the Beijing-time day (YYYY-MM-DD), the .csv.zip that
// bill_download_url serves: two entries, <account>_<yyyymmdd>_业务明细.csv
// and …_业务明细(汇总).csv, both named and written in GBK without the zip's
// UTF-8 flag, CRLF line endings. The detail entry has the four # lines
// (account, the day's window), the 25-column header, one row per line in
// the order given with TABs after the long numbers as Alipay writes them,
// the end marker and the footer (#交易合计, #退款合计, #导出时间).
//
// A KindPayment line becomes a row of 业务类型 交易 with 订单金额 Amount
// and 商家实收 SettledAmount (the difference as 商家优惠); a KindRefund
// line a row of 业务类型 退款 with both written negative and
// 退款批次号/请求号 RefundNo. 完成时间 is Time in Beijing time; 服务费
// is FeeMicroYuan, signed as given. Status must be SUCCESS (Alipay rows
// are final) and Currency CNY. A bill holds its day's rows, but SampleBill
// does not check the days: a line outside the day is written as given
// (a stray row), and importing refuses such a bill
// (statements.Statement.BillDay).
//
// The error wraps ErrUnwritable, naming the line, for a line of another
// channel or kind, another status or currency, an
// amount outside [0, channels.MaxAmount] (SettledAmount above Amount
// included), an empty trade number or refund number of a refund, or a cell
// holding a comma, quote, backtick, TAB or line break; an account or day
// that is not one is an error too.
func SampleBill(account, day string, lines []statements.Line) (statementsample.File, error) {
	from, err := time.ParseInLocation(time.DateOnly, day, statements.Beijing)
	if err != nil {
		return statementsample.File{}, fmt.Errorf("alipay bill: day %q: %w", day, err)
	}
	if account == "" || strings.Trim(account, "0123456789") != "" {
		return statementsample.File{}, fmt.Errorf("alipay bill: account %q is not digits", account)
	}
	to := from.AddDate(0, 0, 1)
	window := fmt.Sprintf("#起始日期：[%s]   终止日期：[%s]", from.Format(alipayWindowForm), to.Format(alipayWindowForm))
	exported := fmt.Sprintf("#导出时间：[%s]", to.Add(5*time.Hour+12*time.Minute+34*time.Second).Format(alipayWindowForm))
	detail := []string{
		"#支付宝业务明细查询",
		"#账号：[" + account + "]",
		window,
		"#-----------------------------------------业务明细列表----------------------------------------",
		sampleHeader,
	}
	want := statements.Statement{Channel: Code, Format: StatementFormat, From: from.UTC(), To: to.UTC(), Account: account}
	var paidOrder, paidSettled, refundOrder, refundSettled, fees int64
	for i, l := range lines {
		row, err := sampleRow(i, l)
		if err != nil {
			return statementsample.File{}, fmt.Errorf("alipay bill: %w", err)
		}
		detail = append(detail, row)
		l.LineNo = alipayCommentRows + 2 + i
		l.MerchantID = account
		if l.Kind == statements.KindPayment {
			l.RefundNo = ""
		}
		l.Time = l.Time.Truncate(time.Second).UTC()
		if l.Kind == statements.KindPayment {
			want.Totals.Payments++
			paidOrder += l.Amount
			paidSettled += l.SettledAmount
		} else {
			want.Totals.Refunds++
			refundOrder += l.Amount
			refundSettled += l.SettledAmount
		}
		fees += l.FeeMicroYuan
		want.Lines = append(want.Lines, l)
	}
	t := &want.Totals
	t.Lines = t.Payments + t.Refunds
	t.SettledPayments, t.SettledRefunds = paidSettled, refundSettled
	detail = append(detail,
		"#-----------------------------------------业务明细列表结束------------------------------------",
		fmt.Sprintf("#交易合计：%d笔，商家实收共%s元，商家优惠共%s元", t.Payments, statementsample.Yuan(paidSettled), statementsample.Yuan(paidOrder-paidSettled)),
		fmt.Sprintf("#退款合计：%d笔，商家实收退款共%s元，商家优惠退款共%s元", t.Refunds, statementsample.Yuan(-refundSettled), statementsample.Yuan(refundSettled-refundOrder)),
		exported,
	)
	summary := []string{
		"#支付宝业务汇总查询",
		"#账号：[" + account + "]",
		window,
		"#-----------------------------------------业务汇总列表----------------------------------------",
		sampleSummaryHeader,
		strings.Join([]string{
			"合计", "", fmt.Sprint(t.Payments), fmt.Sprint(t.Refunds), statementsample.Yuan(paidOrder - refundOrder),
			statementsample.Yuan(paidSettled - refundSettled), statementsample.Yuan(0), statementsample.Yuan(paidOrder - paidSettled - (refundOrder - refundSettled)), statementsample.Yuan(0),
			statementsample.MicroYuan(fees), statementsample.Yuan(0), statementsample.Yuan(paidSettled - refundSettled),
		}, ","),
		"#----------------------------------------业务汇总列表结束-------------------------------------",
		exported,
	}
	detailGBK, err := gbk(strings.Join(detail, "\r\n") + "\r\n")
	if err != nil {
		return statementsample.File{}, fmt.Errorf("alipay bill: detail entry: %w", err)
	}
	summaryGBK, err := gbk(strings.Join(summary, "\r\n") + "\r\n")
	if err != nil {
		return statementsample.File{}, fmt.Errorf("alipay bill: summary entry: %w", err)
	}
	sum := sha1.Sum(detailGBK) //nolint:gosec // see the import.
	want.SHA1 = hex.EncodeToString(sum[:])

	stem := account + "_" + from.Format("20060102") + "_"
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for _, e := range []struct {
		name string
		data []byte
	}{{stem + "业务明细.csv", detailGBK}, {stem + "业务明细(汇总).csv", summaryGBK}} {
		name, err := gbk(e.name)
		if err != nil {
			return statementsample.File{}, fmt.Errorf("alipay bill: entry name: %w", err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{
			Name: string(name), NonUTF8: true, Method: zip.Deflate, Modified: to.Add(5 * time.Hour),
		})
		if err != nil {
			return statementsample.File{}, fmt.Errorf("alipay bill: zip entry: %w", err)
		}
		if _, err := w.Write(e.data); err != nil {
			return statementsample.File{}, fmt.Errorf("alipay bill: zip entry: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return statementsample.File{}, fmt.Errorf("alipay bill: zip: %w", err)
	}
	return statementsample.File{Data: zbuf.Bytes(), Want: want}, nil
}

// sampleRow checks one line and returns its row.
func sampleRow(i int, l statements.Line) (string, error) {
	if l.Channel != Code {
		return "", statementsample.Unwritable(i, "channel %q, not ALIPAY", l.Channel)
	}
	if l.Status != "SUCCESS" || l.Currency != channels.CurrencyCNY {
		return "", statementsample.Unwritable(i, "status %q and currency %q: an Alipay bill holds SUCCESS rows in CNY", l.Status, l.Currency)
	}
	if err := statementsample.CheckAmounts(i, l); err != nil {
		return "", err
	}
	if err := statementsample.CheckCell(i, "trade number", l.TradeNo, true); err != nil {
		return "", err
	}
	if err := statementsample.CheckCell(i, "merchant order number", l.MerchantOrderNo, false); err != nil {
		return "", err
	}
	biz, sign, refundNo := "交易", int64(1), ""
	switch l.Kind {
	case statements.KindPayment:
	case statements.KindRefund:
		if err := statementsample.CheckCell(i, "refund number", l.RefundNo, true); err != nil {
			return "", err
		}
		biz, sign, refundNo = "退款", -1, l.RefundNo
	default:
		return "", statementsample.Unwritable(i, "kind %q: an Alipay bill holds payments and refunds", l.Kind)
	}
	finished := l.Time.In(statements.Beijing)
	return strings.Join([]string{
		l.TradeNo + tab, l.MerchantOrderNo + tab, biz + tab, alipayProduct,
		finished.Add(-7 * time.Second).Format(alipayTimeForm), finished.Format(alipayTimeForm),
		tab, tab, tab, tab, alipayBuyer + tab,
		statementsample.Yuan(sign * l.Amount), statementsample.Yuan(sign * l.SettledAmount), statementsample.Yuan(0), statementsample.Yuan(0), statementsample.Yuan(0), statementsample.Yuan(sign * (l.Amount - l.SettledAmount)),
		statementsample.Yuan(0), "", statementsample.Yuan(0) + tab, statementsample.Yuan(0), refundNo + tab, sampleFee(l.FeeMicroYuan), statementsample.Yuan(0), "",
	}, ","), nil
}

// sampleFee writes a fee with two decimals when it is whole fen, else
// five.
func sampleFee(v int64) string {
	if v%1000 == 0 {
		return statementsample.Yuan(v / 1000)
	}
	return statementsample.MicroYuan(v)
}

// gbk encodes UTF-8 text as GBK, as Alipay writes its bills.
func gbk(s string) ([]byte, error) {
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("encode as GBK: %w", err)
	}
	return b, nil
}

// SampleStatementLines are the lines an Alipay bill reports for evs: a
// payment line per payment and a refund line per refund whose amount is
// its own, worked out from the cumulative amounts the callbacks report.
func SampleStatementLines(evs []channels.Event) ([]statements.Line, error) {
	var lines []statements.Line
	refunds := map[string][]channels.Event{}
	for _, e := range evs {
		if e.Type == eventkey.PaymentReceived {
			lines = append(lines, statementsample.EventLine(e, statements.KindPayment, e.OrderTotal))
			continue
		}
		refunds[e.TradeNo] = append(refunds[e.TradeNo], e)
	}
	for trade, rs := range refunds {
		slices.SortFunc(rs, func(a, b channels.Event) int { return cmp.Compare(a.CumulativeRefunded, b.CumulativeRefunded) })
		var before int64
		for _, e := range rs {
			own := e.CumulativeRefunded - before
			if own <= 0 {
				return nil, fmt.Errorf("statement lines from events: alipay trade %s: refund %s reports %d refunded so far, not more than the %d before it",
					trade, e.RefundNo, e.CumulativeRefunded, before)
			}
			lines = append(lines, statementsample.EventLine(e, statements.KindRefund, own))
			before = e.CumulativeRefunded
		}
	}
	return lines, nil
}
