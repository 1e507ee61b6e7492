package sqb

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // the parser identifies the file by SHA-1; tests compare it.
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// sampleResponse is one /upay/v2/query response, its fields in the order
// Shouqianba writes them.
type sampleResponse struct {
	ResultCode  string `json:"result_code"`
	BizResponse struct {
		ResultCode string     `json:"result_code"`
		Data       sampleData `json:"data"`
	} `json:"biz_response"`
}

// sampleData is the order of a query response; every value a string.
type sampleData struct {
	SN                string `json:"sn"`
	ClientSN          string `json:"client_sn"`
	TradeNo           string `json:"trade_no"`
	TerminalSN        string `json:"terminal_sn"`
	Status            string `json:"status"`
	OrderStatus       string `json:"order_status"`
	Payway            string `json:"payway"`
	SubPayway         string `json:"sub_payway"`
	TotalAmount       string `json:"total_amount"`
	NetAmount         string `json:"net_amount"`
	FinishTime        string `json:"finish_time,omitempty"`
	ChannelFinishTime string `json:"channel_finish_time,omitempty"`
	Subject           string `json:"subject"`
	Operator          string `json:"operator"`
}

// sampleTerminalSN is the terminal_sn of a line that names no merchant.
const sampleTerminalSN = "100000000000000001"

// SampleQueryResponses writes lines as a file of Shouqianba /upay/v2/query
// responses, one whole response a line (UTF-8, LF), in the order given:
// result_code "200", biz_response.result_code "SUCCESS", and the order with
// sn TradeNo, client_sn MerchantOrderNo, order_status Status, total_amount
// Amount and net_amount SettledAmount (fen as strings), finish_time Time in
// epoch milliseconds (left out when Time is zero, which only an order not
// final may be), and the fields the parser does not read (trade_no,
// payway…) filled with fixed or derived values; terminal_sn is MerchantID,
// or 100000000000000001 when that is empty (the lines returned name it).
//
// The error wraps ErrUnwritable, naming the line, for a line of another
// channel or of a kind other than KindOrder, an order_status that is not
// documented, a final one without a time, a currency other than CNY, an
// amount outside [0, channels.MaxAmount] (SettledAmount above Amount
// included), the same sn twice, or an empty sn or client_sn.
func SampleQueryResponses(lines []statements.Line) (statementsample.File, error) {
	var b bytes.Buffer
	want := statements.Statement{Channel: Code, Format: FormatQuery}
	seen := map[string]bool{}
	for i, l := range lines {
		if err := sampleCheck(i, l, seen); err != nil {
			return statementsample.File{}, fmt.Errorf("sqb query responses: %w", err)
		}
		if l.MerchantID == "" {
			l.MerchantID = sampleTerminalSN
		}
		var r sampleResponse
		r.ResultCode = "200"
		r.BizResponse.ResultCode = "SUCCESS"
		r.BizResponse.Data = sampleData{
			SN: l.TradeNo, ClientSN: l.MerchantOrderNo, TradeNo: "4200000000" + statementsample.DigitsOf(l.TradeNo, 18),
			TerminalSN: l.MerchantID, Status: "SUCCESS", OrderStatus: l.Status, Payway: "3", SubPayway: "1",
			TotalAmount: strconv.FormatInt(l.Amount, 10), NetAmount: strconv.FormatInt(l.SettledAmount, 10),
			Subject: "门店消费", Operator: "cashier01",
		}
		if !l.Time.IsZero() {
			l.Time = time.UnixMilli(l.Time.UnixMilli()).UTC()
			r.BizResponse.Data.FinishTime = strconv.FormatInt(l.Time.UnixMilli(), 10)
			r.BizResponse.Data.ChannelFinishTime = strconv.FormatInt(l.Time.UnixMilli()-200, 10)
		}
		data, err := json.Marshal(r)
		if err != nil {
			return statementsample.File{}, fmt.Errorf("sqb query responses: line %d: %w", i+1, err)
		}
		b.Write(data)
		b.WriteByte('\n')
		l.LineNo = i + 1
		l.RefundNo, l.FeeMicroYuan = "", 0
		want.Lines = append(want.Lines, l)
		t := &want.Totals
		t.Lines++
		if !Settled(l.Status) {
			continue // a cancelled, failed or unfinished order is neither a payment nor a refund
		}
		t.Payments++
		t.PaymentAmount += l.Amount
		t.SettledPayments += l.SettledAmount
		t.RefundAmount += l.Amount - l.SettledAmount
	}
	sum := sha1.Sum(b.Bytes()) //nolint:gosec // see the import.
	want.SHA1 = hex.EncodeToString(sum[:])
	return statementsample.File{Data: b.Bytes(), Want: want}, nil
}

// sampleCheck checks one line of a query-responses file.
func sampleCheck(i int, l statements.Line, seen map[string]bool) error {
	if l.Channel != Code || l.Kind != statements.KindOrder {
		return statementsample.Unwritable(i, "channel %q kind %q: the file holds SQB orders", l.Channel, l.Kind)
	}
	if l.Currency != channels.CurrencyCNY {
		return statementsample.Unwritable(i, "currency %q, not CNY", l.Currency)
	}
	final := false
	switch l.Status {
	case Paid, PayCanceled, Refunded, PartialRefunded, Canceled:
		final = true
	case Created, PayError, RefundError, CancelError,
		CancelInProgress, "INVALID_STATUS_CODE":
	default:
		return statementsample.Unwritable(i, "order_status %q is not documented", l.Status)
	}
	if final && l.Time.IsZero() {
		return statementsample.Unwritable(i, "final order_status %s without a finish_time", l.Status)
	}
	if err := statementsample.CheckAmounts(i, l); err != nil {
		return err
	}
	if l.TradeNo == "" || l.MerchantOrderNo == "" {
		return statementsample.Unwritable(i, "sn %q and client_sn %q must not be empty", l.TradeNo, l.MerchantOrderNo)
	}
	if seen[l.TradeNo] {
		return statementsample.Unwritable(i, "sn %q twice", l.TradeNo)
	}
	seen[l.TradeNo] = true
	return nil
}

// SampleStatementLines are the lines Shouqianba's query responses report
// for evs: one order line per trade once every event has happened.
func SampleStatementLines(evs []channels.Event) []statements.Line {
	type order struct {
		first    channels.Event
		refunded int64
		last     time.Time
	}
	orders := map[string]*order{}
	var trades []string
	for _, e := range evs {
		o, ok := orders[e.TradeNo]
		if !ok {
			o = &order{first: e}
			orders[e.TradeNo] = o
			trades = append(trades, e.TradeNo)
		}
		o.refunded = max(o.refunded, e.CumulativeRefunded)
		if e.OccurredAt.After(o.last) {
			o.last = e.OccurredAt
		}
	}
	lines := make([]statements.Line, 0, len(trades))
	for _, trade := range trades {
		o := orders[trade]
		status := Paid
		switch {
		case o.refunded >= o.first.OrderTotal:
			status = Refunded
		case o.refunded > 0:
			status = PartialRefunded
		}
		lines = append(lines, statements.Line{
			Channel: Code, Kind: statements.KindOrder, TradeNo: trade, MerchantOrderNo: o.first.MerchantOrderNo,
			Amount: o.first.OrderTotal, SettledAmount: max(o.first.OrderTotal-o.refunded, 0), Status: status, Time: o.last,
			Currency: o.first.Currency,
		})
	}
	return lines
}
