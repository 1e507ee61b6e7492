package statements

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Kind is what one statement line records.
type Kind string

// The kinds of line.
const (
	// KindPayment is a payment the channel settled.
	KindPayment Kind = "PAYMENT"
	// KindRefund is a refund the channel accepted or completed.
	KindRefund Kind = "REFUND"
	// KindOrder is a Shouqianba order as its query response reports it:
	// the payment and the refunds so far, in one line.
	KindOrder Kind = "ORDER"
)

// Beijing is the time zone of every statement time without an offset.
var Beijing = time.FixedZone("CST", 8*3600)

// Line is one row of a statement, in the channel's own terms turned into
// the worker's: the trade number is the one the callback's idempotency key
// uses (WeChat transaction_id, Alipay trade_no, Shouqianba sn).
type Line struct {
	// LineNo is the 1-based line number in the (uncompressed) file.
	LineNo int
	// Channel is the statement's channel.
	Channel channels.Channel
	// Kind says whether the line is a payment, a refund or an order.
	Kind Kind
	// TradeNo is the channel's trade number (the refunded payment's for a
	// refund).
	TradeNo string
	// MerchantOrderNo is the merchant's order number (out_trade_no,
	// 商户订单号, client_sn).
	MerchantOrderNo string
	// RefundNo is the refund's number for refunds: WeChat out_refund_no,
	// Alipay 退款批次号/请求号 (out_request_no); empty otherwise.
	RefundNo string
	// Amount is, in fen: for a payment the order total (WeChat 订单金额,
	// Alipay 订单金额); for a refund the refund's own amount, positive
	// (WeChat 申请退款金额, Alipay −订单金额); for a Shouqianba order its
	// total_amount.
	Amount int64
	// SettledAmount is, in fen, what settles: WeChat 应结订单金额 or
	// 退款金额, Alipay 商家实收 (positive for refunds too), Shouqianba
	// net_amount (total less refunds).
	SettledAmount int64
	// FeeMicroYuan is the fee in units of 0.00001 yuan (WeChat writes fees
	// with five decimals), signed as the file has it (WeChat returns the fee
	// on refunds as a negative amount). Zero when the channel reports none.
	FeeMicroYuan int64
	// Status is the channel's status for the line: WeChat 交易状态 for
	// payments (SUCCESS, REVOKED) and 退款状态 for refunds (SUCCESS,
	// PROCESSING, FAIL, CHANGE: a snapshot, never updated); SUCCESS for
	// Alipay, whose rows are final; Shouqianba order_status.
	Status string
	// Time is the channel's time for the line, in UTC: WeChat 交易时间
	// (payment success, or refund accepted), Alipay 完成时间, Shouqianba
	// finish_time.
	Time time.Time
	// Currency is the ISO 4217 code (CNY).
	Currency string
	// MerchantID is the merchant the line belongs to, as the file names
	// it: WeChat 特约商户号 (a service provider's sub-merchant), or 商户号
	// when that is 0 or empty (a normal merchant); Alipay the #账号：[…] of
	// the file's head as written (the PID followed by 0156); Shouqianba the
	// response's terminal_sn. Empty when the file names none.
	MerchantID string
}

// Totals are a statement's own summary: counts and sums in fen, as its
// summary lines or footer state them.
type Totals struct {
	// Lines is the number of detail lines.
	Lines int
	// Payments and Refunds count the lines of each kind.
	Payments, Refunds int
	// PaymentAmount and RefundAmount sum Amount over each kind.
	PaymentAmount, RefundAmount int64
	// SettledPayments and SettledRefunds sum SettledAmount over each kind.
	SettledPayments, SettledRefunds int64
	// FeeMicroYuan sums the fees, signed.
	FeeMicroYuan int64
}

// Statement is one parsed statement file.
type Statement struct {
	// Channel is the statement's channel.
	Channel channels.Channel
	// Format names the layout found, e.g. "wechat-tradebill-all",
	// "wechat-tradebill-all-legacy", "alipay-trade", "sqb-query".
	Format string
	// From and To bound the statement's window [From, To) when the file
	// states it (Alipay); zero otherwise.
	From, To time.Time
	// Day is the Beijing-time day (YYYY-MM-DD) the caller says the file is
	// the bill of (consumer statement import --date: the bill_date a
	// WeChat bill, which states no day, was downloaded for); empty when
	// not said. Parsers leave it empty. See BillDay.
	Day string
	// Lines are the detail lines in file order.
	Lines []Line
	// Totals are what the file's summary states; for Shouqianba, whose
	// file has no summary, they are computed from the lines, and only an
	// order the channel settled counts as a payment (see ParseSQB).
	Totals Totals
	// SHA1 is the hex SHA-1 of the uncompressed bytes (WeChat's hash_value
	// is over those).
	SHA1 string
	// Account is the account an Alipay bill's head names (#账号：[…], the
	// PID followed by 0156), also for a bill without lines; empty for the
	// other channels and when the head names none.
	Account string
}

// MerchantIDs returns the merchants the statement names, sorted, each
// once: every line's MerchantID that is not empty, and Account when set
// (so an Alipay bill without lines names its account too). Empty when the
// file names no merchant.
func (s Statement) MerchantIDs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, l := range s.Lines {
		add(l.MerchantID)
	}
	add(s.Account)
	slices.Sort(out)
	return out
}

// ErrMismatch is wrapped by the error of a file whose rows disagree with
// its own summary or footer; the message says which figure and by how much.
var ErrMismatch = errors.New("statement rows disagree with its summary")

// ErrFormat is wrapped by the error of a file that is not a statement of
// the expected layout: an unknown header, a missing column, a malformed
// row (the message names the line and the column), IDs mangled into
// scientific notation by a spreadsheet.
var ErrFormat = errors.New("not a statement of a known layout")

// ErrHash is wrapped when the file's SHA-1 differs from the one given.
var ErrHash = errors.New("statement hash mismatch")

// Parse parses data as a statement of channel ch with the channel's
// parser (see Parser; a WeChat trade bill, plain or gzip, an Alipay trade
// bill zip, or Shouqianba query responses). wantSHA1, when not empty, must
// be the hex SHA-1 of the uncompressed file (WeChat's hash_value) or, for
// Alipay, of the detail entry, else the error wraps ErrHash. A channel
// without a parser (one not in this package's list) is an error naming
// it, never an empty statement.
func Parse(ch channels.Channel, data []byte, wantSHA1 string) (Statement, error) {
	return ParseReader(ch, bytes.NewReader(data), int64(len(data)), wantSHA1)
}

// ParseReader is Parse of the size bytes r reads (an *os.File and its
// size): the file is read as a stream, never whole, and a file beyond the
// limits (MaxLines, MaxTextBytes, MaxBlankRun, MaxCompressionRatio,
// MaxLineBytes) is refused as soon as the limit is passed, with an error
// wrapping ErrLimit and ErrFormat.
func ParseReader(ch channels.Channel, r io.ReaderAt, size int64, wantSHA1 string) (Statement, error) {
	p, ok := ParserOf(ch)
	if !ok {
		return Statement{}, fmt.Errorf("parse statement: unknown channel %q: %w", ch, ErrNoParser)
	}
	return p.Parse(r, size, wantSHA1)
}

// CheckSHA1 returns st, err, or when err is nil and wantSHA1 is not empty
// and not st.SHA1, ErrHash naming both: what a Parser.Parse whose
// statement's SHA-1 is the file's returns.
func CheckSHA1(st Statement, err error, wantSHA1 string) (Statement, error) {
	if err != nil {
		return st, err
	}
	if wantSHA1 != "" && !strings.EqualFold(wantSHA1, st.SHA1) {
		return st, fmt.Errorf("%s statement: sha1 is %s, want %s: %w", st.Channel, st.SHA1, strings.ToLower(wantSHA1), ErrHash)
	}
	return st, nil
}
