package statementstest

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // WeChat states the bill's hash as SHA-1; tests compare it, nothing is protected by it.
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/statements"
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

// WeChatOptions shape WeChatBill's file beyond its lines.
type WeChatOptions struct {
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
func (o WeChatOptions) merchants() (mch, sub, id string) {
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

// WeChatBill writes lines as a WeChat Pay trade bill of bill_type=ALL, as
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
// 手续费 FeeMicroYuan with five decimals, 费率 WeChatFeeRate. A bill holds
// one day, but WeChatBill does not check the days: importing a bill stores
// its lines by their own days.
//
// The error wraps ErrUnwritable, naming the line, for a line of another
// channel or kind, a status the layout cannot state, an amount outside
// [0, channels.MaxAmount] (SettledAmount above Amount included), an empty
// trade, merchant order or refund number, or any cell holding a comma,
// quote, backtick, TAB or line break.
func WeChatBill(lines []statements.Line, o WeChatOptions) (File, error) {
	var b bytes.Buffer
	b.WriteString(wechatHeader + "\n")
	want := statements.Statement{Channel: channels.WeChat, Format: wechat.FormatAll}
	t := &want.Totals
	for i, l := range lines {
		cells, err := wechatRow(i, l, o)
		if err != nil {
			return File{}, fmt.Errorf("wechat bill: %w", err)
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
	b.WriteString(backticked(fmt.Sprint(t.Lines), yuan(t.SettledPayments), yuan(t.SettledRefunds), yuan(0),
		microYuan(t.FeeMicroYuan), yuan(t.PaymentAmount), yuan(t.RefundAmount)) + "\n")
	sum := sha1.Sum(b.Bytes()) //nolint:gosec // see the import.
	want.SHA1 = hex.EncodeToString(sum[:])
	return File{Data: b.Bytes(), Want: want}, nil
}

// wechatRow checks one line and returns its 27 cells.
func wechatRow(i int, l statements.Line, o WeChatOptions) ([]string, error) {
	if l.Channel != channels.WeChat {
		return nil, unwritable(i, "channel %q, not WECHAT", l.Channel)
	}
	if err := cmpCheck(i, l); err != nil {
		return nil, err
	}
	for _, c := range []struct{ what, v string }{{"trade number", l.TradeNo}, {"merchant order number", l.MerchantOrderNo}, {"currency", l.Currency}} {
		if err := checkCell(i, c.what, c.v, true); err != nil {
			return nil, err
		}
	}
	if l.FeeMicroYuan > channels.MaxAmount*1000 || l.FeeMicroYuan < -channels.MaxAmount*1000 {
		return nil, unwritable(i, "fee %d out of range", l.FeeMicroYuan)
	}
	tradeType := "JSAPI"
	if o.MicroPay[l.TradeNo] {
		tradeType = "MICROPAY"
	}
	zero := yuan(0)
	mch, sub, _ := o.merchants()
	// Payment-row defaults; a refund row overrides its columns below.
	status, settled, coupon, refundID, refundNo, refundSettled, refundType, refundStatus, amount, refundAmount :=
		l.Status, yuan(l.SettledAmount), yuan(l.Amount-l.SettledAmount), "0", "0", zero, "", "", yuan(l.Amount), zero
	switch l.Kind {
	case statements.KindPayment:
		if l.Status != "SUCCESS" && l.Status != "REVOKED" {
			return nil, unwritable(i, "payment status %q is neither SUCCESS nor REVOKED", l.Status)
		}
	case statements.KindRefund:
		switch l.Status {
		case "SUCCESS", "PROCESSING", "FAIL", "CHANGE":
		default:
			return nil, unwritable(i, "refund status %q is not SUCCESS, PROCESSING, FAIL or CHANGE", l.Status)
		}
		if err := checkCell(i, "refund number", l.RefundNo, true); err != nil {
			return nil, err
		}
		if l.RefundNo == "0" {
			return nil, unwritable(i, "refund number 0 is what payment rows write")
		}
		status, settled, coupon, amount = "REFUND", zero, zero, zero
		refundID, refundNo, refundSettled, refundType, refundStatus, refundAmount =
			"503"+digitsOf(l.TradeNo+"/"+l.RefundNo, 26), l.RefundNo, yuan(l.SettledAmount), "ORIGINAL", l.Status, yuan(l.Amount)
	default:
		return nil, unwritable(i, "kind %q: a WeChat bill holds payments and refunds", l.Kind)
	}
	return []string{
		"`" + l.Time.In(statements.Beijing).Format(wechatTimeForm), "`" + wechatAppID, "`" + mch, "`" + sub, "`",
		"`" + l.TradeNo, "`" + l.MerchantOrderNo, "`" + wechatOpenID, "`" + tradeType, "`" + status, "`" + wechatBank,
		"`" + l.Currency, "`" + settled, "`" + coupon, "`" + refundID, "`" + refundNo, "`" + refundSettled, "`" + zero,
		"`" + refundType, "`" + refundStatus, "`" + wechatProduct, "`", "`" + microYuan(l.FeeMicroYuan),
		"`" + WeChatFeeRate, "`" + amount, "`" + refundAmount, "`",
	}, nil
}

// cmpCheck checks a line's amounts: both in range, the settled one not
// above the other.
func cmpCheck(i int, l statements.Line) error {
	if err := checkAmount(i, "amount", l.Amount); err != nil {
		return err
	}
	if err := checkAmount(i, "settled amount", l.SettledAmount); err != nil {
		return err
	}
	if l.SettledAmount > l.Amount {
		return unwritable(i, "settled amount %d above the amount %d", l.SettledAmount, l.Amount)
	}
	return nil
}

// backticked joins values as a summary values row: each prefixed with a
// backtick.
func backticked(values ...string) string {
	for i, v := range values {
		values[i] = "`" + v
	}
	return strings.Join(values, ",")
}

// digitsOf is a deterministic string of n decimal digits derived from seed.
func digitsOf(seed string, n int) string {
	sum := sha1.Sum([]byte(seed)) //nolint:gosec // a source of fake digits, not a hash of anything secret.
	out := make([]byte, n)
	for i := range out {
		out[i] = '0' + sum[i%len(sum)]%10
	}
	return string(out)
}
