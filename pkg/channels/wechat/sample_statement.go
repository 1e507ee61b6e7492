package wechat

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // WeChat states the bill's hash as SHA-1; tests compare it, nothing is protected by it.
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// wechatHeader is the current 27-column header of bill_type=ALL.
const wechatHeader = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类," +
	"应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率," +
	"订单金额,申请退款金额,费率备注"

// wechatSummaryHeader is the summary header of the current layout.
const wechatSummaryHeader = "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"

// The cells of a bill that pkg/statements does not read, fixed here.
const (
	wechatAppID    = "wx00000000000000f0"
	wechatMchID    = "1900000000"
	wechatOpenID   = "oTEST0000000000000000000001"
	wechatBank     = "OTHERS"
	wechatProduct  = "门店消费"
	wechatTimeForm = "2006-01-02 15:04:05"
)

// SampleBillOptions shape SampleBill's file beyond its lines.
type SampleBillOptions struct {
	// MicroPay holds the trade numbers paid by barcode (付款码): their rows
	// say 交易类型 MICROPAY, the everyday POS payment, which WeChat never
	// notifies. Every other row says JSAPI.
	MicroPay map[string]bool
	// MchID is every row's 商户号 (default 1900000000) and SubMchID its
	// 特约商户号 (default 0: a normal merchant); the lines parsed back name
	// SubMchID as their MerchantID, or MchID when SubMchID is 0.
	MchID, SubMchID string
}

// merchants returns the 商户号 and 特约商户号 of o's rows and the
// MerchantID they parse to.
func (o SampleBillOptions) merchants() (mch, sub, id string) {
	mch, sub = o.MchID, o.SubMchID
	if mch == "" {
		mch = wechatMchID
	}
	if sub == "" {
		sub = "0"
	}
	id = sub
	if sub == "0" {
		id = mch
	}
	return mch, sub, id
}

// SampleBill writes lines as a WeChat Pay trade bill of bill_type=ALL, as
// the download URL serves it uncompressed: UTF-8 without a BOM, LF line
// endings, the current 27-column header, one row per line in the order
// given with every cell prefixed by a backtick, then the two summary lines
// (the number of rows, 应结订单金额 and 订单金额 summed over the payments,
// 退款金额 and 申请退款金额 over the refunds, the signed 手续费 sum).
//
// A KindPayment line becomes a row of 交易状态 Status (SUCCESS or REVOKED)
// with 订单金额 Amount, 应结订单金额 SettledAmount and the difference as
// 代金券金额; a KindRefund line a row of 交易状态 REFUND and 退款状态
// Status (SUCCESS, PROCESSING, FAIL or CHANGE) with 申请退款金额 Amount,
// 退款金额 SettledAmount, the refunded payment's trade and merchant order
// numbers and 商户退款单号 RefundNo. 交易时间 is Time in Beijing time,
// 手续费 FeeMicroYuan with five decimals, 费率 SampleFeeRate. A bill holds
// one day, but SampleBill does not check the days: a line of another day
// is written as given (a stray row), and importing refuses such a bill
// (statements.Statement.BillDay).
//
// The error wraps ErrUnwritable, naming the line, for a line of another
// channel or kind, a status the layout cannot state, an amount outside
// [0, channels.MaxAmount] (SettledAmount above Amount included), an empty
// trade, merchant order or refund number, or any cell holding a comma,
// quote, backtick, TAB or line break.
func SampleBill(lines []statements.Line, o SampleBillOptions) (statementsample.File, error) {
	var b bytes.Buffer
	b.WriteString(wechatHeader + "\n")
	want := statements.Statement{Channel: Code, Format: FormatAll}
	t := &want.Totals
	for i, l := range lines {
		cells, err := sampleRow(i, l, o)
		if err != nil {
			return statementsample.File{}, fmt.Errorf("wechat bill: %w", err)
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
		l.LineNo = i + 2
		_, _, l.MerchantID = o.merchants()
		if l.Kind == statements.KindPayment {
			l.RefundNo = ""
		}
		l.Time = l.Time.Truncate(time.Second).UTC()
		want.Lines = append(want.Lines, l)
		t.Lines++
		if l.Kind == statements.KindPayment {
			t.Payments++
			t.PaymentAmount += l.Amount
			t.SettledPayments += l.SettledAmount
		} else {
			t.Refunds++
			t.RefundAmount += l.Amount
			t.SettledRefunds += l.SettledAmount
		}
		t.FeeMicroYuan += l.FeeMicroYuan
	}
	b.WriteString(wechatSummaryHeader + "\n")
	b.WriteString(backticked(fmt.Sprint(t.Lines), statementsample.Yuan(t.SettledPayments), statementsample.Yuan(t.SettledRefunds), statementsample.Yuan(0),
		statementsample.MicroYuan(t.FeeMicroYuan), statementsample.Yuan(t.PaymentAmount), statementsample.Yuan(t.RefundAmount)) + "\n")
	sum := sha1.Sum(b.Bytes()) //nolint:gosec // see the import.
	want.SHA1 = hex.EncodeToString(sum[:])
	return statementsample.File{Data: b.Bytes(), Want: want}, nil
}

// sampleRow checks one line and returns its 27 cells.
func sampleRow(i int, l statements.Line, o SampleBillOptions) ([]string, error) {
	if l.Channel != Code {
		return nil, statementsample.Unwritable(i, "channel %q, not WECHAT", l.Channel)
	}
	if err := statementsample.CheckAmounts(i, l); err != nil {
		return nil, err
	}
	for _, c := range []struct{ what, v string }{{"trade number", l.TradeNo}, {"merchant order number", l.MerchantOrderNo}, {"currency", l.Currency}} {
		if err := statementsample.CheckCell(i, c.what, c.v, true); err != nil {
			return nil, err
		}
	}
	if l.FeeMicroYuan > channels.MaxAmount*1000 || l.FeeMicroYuan < -channels.MaxAmount*1000 {
		return nil, statementsample.Unwritable(i, "fee %d out of range", l.FeeMicroYuan)
	}
	tradeType := "JSAPI"
	if o.MicroPay[l.TradeNo] {
		tradeType = "MICROPAY"
	}
	zero := statementsample.Yuan(0)
	mch, sub, _ := o.merchants()
	// Payment-row defaults; a refund row overrides its columns below.
	status, settled, coupon, refundID, refundNo, refundSettled, refundType, refundStatus, amount, refundAmount :=
		l.Status, statementsample.Yuan(l.SettledAmount), statementsample.Yuan(l.Amount-l.SettledAmount), "0", "0", zero, "", "", statementsample.Yuan(l.Amount), zero
	switch l.Kind {
	case statements.KindPayment:
		if l.Status != "SUCCESS" && l.Status != "REVOKED" {
			return nil, statementsample.Unwritable(i, "payment status %q is neither SUCCESS nor REVOKED", l.Status)
		}
	case statements.KindRefund:
		switch l.Status {
		case "SUCCESS", "PROCESSING", "FAIL", "CHANGE":
		default:
			return nil, statementsample.Unwritable(i, "refund status %q is not SUCCESS, PROCESSING, FAIL or CHANGE", l.Status)
		}
		if err := statementsample.CheckCell(i, "refund number", l.RefundNo, true); err != nil {
			return nil, err
		}
		if l.RefundNo == "0" {
			return nil, statementsample.Unwritable(i, "refund number 0 is what payment rows write")
		}
		status, settled, coupon, amount = "REFUND", zero, zero, zero
		refundID, refundNo, refundSettled, refundType, refundStatus, refundAmount =
			"503"+statementsample.DigitsOf(l.TradeNo+"/"+l.RefundNo, 26), l.RefundNo, statementsample.Yuan(l.SettledAmount), "ORIGINAL", l.Status, statementsample.Yuan(l.Amount)
	default:
		return nil, statementsample.Unwritable(i, "kind %q: a WeChat bill holds payments and refunds", l.Kind)
	}
	return []string{
		"`" + l.Time.In(statements.Beijing).Format(wechatTimeForm), "`" + wechatAppID, "`" + mch, "`" + sub, "`",
		"`" + l.TradeNo, "`" + l.MerchantOrderNo, "`" + wechatOpenID, "`" + tradeType, "`" + status, "`" + wechatBank,
		"`" + l.Currency, "`" + settled, "`" + coupon, "`" + refundID, "`" + refundNo, "`" + refundSettled, "`" + zero,
		"`" + refundType, "`" + refundStatus, "`" + wechatProduct, "`", "`" + statementsample.MicroYuan(l.FeeMicroYuan),
		"`" + SampleFeeRate, "`" + amount, "`" + refundAmount, "`",
	}, nil
}

// backticked joins values as a summary values row: each prefixed with a
// backtick.
func backticked(values ...string) string {
	for i, v := range values {
		values[i] = "`" + v
	}
	return strings.Join(values, ",")
}

// SampleStatementLines are the lines a WeChat trade bill reports for evs:
// a SUCCESS payment line per payment and a SUCCESS refund line per refund
// (its own amount), each with SampleFeeRate's fee.
func SampleStatementLines(evs []channels.Event) []statements.Line {
	lines := make([]statements.Line, 0, len(evs))
	for _, e := range evs {
		if e.Type == eventkey.PaymentReceived {
			l := statementsample.EventLine(e, statements.KindPayment, e.OrderTotal)
			l.FeeMicroYuan = sampleFee(e.OrderTotal)
			lines = append(lines, l)
			continue
		}
		l := statementsample.EventLine(e, statements.KindRefund, e.RefundAmount)
		l.FeeMicroYuan = -sampleFee(e.RefundAmount)
		lines = append(lines, l)
	}
	return lines
}

// SampleFeeRate is the fee FromEvents gives WeChat lines: 0.60% of the
// amount, rounded half up to the fen, positive on payments and negative on
// refunds (the fee returned), as the trade bill writes 手续费.
const SampleFeeRate = "0.60%"

// sampleFee is SampleFeeRate of fen, rounded half up to the fen, in units
// of 0.00001 yuan.
func sampleFee(fen int64) int64 { return (fen*6 + 500) / 1000 * 1000 }
