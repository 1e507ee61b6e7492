package conformance_test

import (
	"bufio"
	"bytes"
	"crypto/sha1" //nolint:gosec // a statement's integrity hash, as the real channels state it
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// fakePay is a fourth channel defined here alone: a trivial JSON callback,
// a statement of JSON lines, and their builders. No production code names
// it; it is added through channelstest.Register and RegisterParser.
const fakePay channels.Channel = "FAKEPAY"

// fakeBody is a FAKEPAY callback body.
type fakeBody struct {
	Type     string `json:"type"` // PAY or REFUND
	TradeNo  string `json:"trade_no"`
	OrderNo  string `json:"order_no"`
	Total    int64  `json:"total"`
	RefundNo string `json:"refund_no,omitempty"`
	Refund   int64  `json:"refund,omitempty"`
	At       string `json:"at"`
	Merchant string `json:"merchant"`
	Attempt  int    `json:"attempt"` // a delivery field: not in the fingerprint
}

func fakeDecode(env channels.Envelope, _ channels.KeyProvider) (channels.Result, error) {
	var b fakeBody
	if err := channels.Unmarshal([]byte(env.Body), &b, "fakepay body"); err != nil {
		return channels.Result{}, err
	}
	at, err := time.Parse(time.RFC3339, b.At)
	if err != nil {
		return channels.Result{}, channels.Errorf(channels.KindMalformed, "fakepay at %s", channels.Quote(b.At))
	}
	ev := channels.Event{TradeNo: b.TradeNo, MerchantOrderNo: b.OrderNo, OrderTotal: b.Total, OccurredAt: at, RawStatus: b.Type}
	res := channels.Result{MerchantID: b.Merchant}
	switch b.Type {
	case "PAY":
		ev.Type = eventkey.PaymentReceived
		ev.Key, err = channels.PaymentKey(fakePay, b.TradeNo)
	case "REFUND":
		ev.Type, ev.RefundNo, ev.RefundAmount = eventkey.RefundSucceeded, b.RefundNo, b.Refund
		ev.Key, err = channels.RefundKey(fakePay, b.TradeNo, b.RefundNo)
		res.RefundStatus = channels.RefundSuccess
	default:
		return channels.Ignored("fakepay "+b.Type+" moves no money", ev), nil
	}
	if err != nil {
		return channels.Result{}, err
	}
	res.Event = ev
	return res, nil
}

func fakeEnvelope(t sample.Trade, b fakeBody, at time.Time, d sample.Delivery) []byte {
	t = t.WithDefaults()
	b.TradeNo, b.OrderNo, b.Total, b.Merchant, b.Attempt = t.TradeNo, t.MerchantOrderNo, t.Total, "FAKE-M1", d.Attempt
	b.At = at.UTC().Format(time.RFC3339)
	return sample.Envelope(t.TenantID, fakePay, string(sample.MustJSON(b)), d.ReceivedAtFor(d.NotifyAt(at)))
}

// fakeLine is a line of a FAKEPAY statement.
type fakeLine struct {
	Kind     statements.Kind `json:"kind"`
	TradeNo  string          `json:"trade_no"`
	OrderNo  string          `json:"order_no"`
	RefundNo string          `json:"refund_no,omitempty"`
	Amount   int64           `json:"amount"`
	At       time.Time       `json:"at"`
	Merchant string          `json:"merchant"`
}

func fakeStatement(lines []statements.Line) ([]byte, error) {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(sample.MustJSON(fakeLine{l.Kind, l.TradeNo, l.MerchantOrderNo, l.RefundNo, l.Amount, l.Time, "FAKE-M1"}))
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

func fakeParse(r io.ReaderAt, size int64, wantSHA1 string) (statements.Statement, error) {
	data, err := io.ReadAll(io.NewSectionReader(r, 0, size))
	if err != nil {
		return statements.Statement{}, fmt.Errorf("fakepay: %w", err)
	}
	sum := sha1.Sum(data) //nolint:gosec // see the import
	st := statements.Statement{Channel: fakePay, Format: "fakepay-lines", SHA1: hex.EncodeToString(sum[:])}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		var l fakeLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return statements.Statement{}, fmt.Errorf("fakepay line %d: %w: %w", n, err, statements.ErrFormat)
		}
		st.Lines = append(st.Lines, statements.Line{
			LineNo: n, Channel: fakePay, Kind: l.Kind, TradeNo: l.TradeNo, MerchantOrderNo: l.OrderNo, RefundNo: l.RefundNo,
			Amount: l.Amount, SettledAmount: l.Amount, Status: "SUCCESS", Time: l.At, Currency: "CNY", MerchantID: l.Merchant,
		})
	}
	return statements.CheckSHA1(st, sc.Err(), wantSHA1)
}

// TestFakeFourthChannel adds FAKEPAY through the registry alone and runs
// the suite the built-in channels pass: nothing outside this file names it.
func TestFakeFourthChannel(t *testing.T) {
	channelstest.Register(t, channels.Spec{
		Code: fakePay, Name: "Fake Pay", ContentType: channels.ContentTypeJSON, Refunds: channels.PerRefund,
		MerchantField: "merchant", StatementMerchantField: "merchant",
		FingerprintFields: []string{"type", "total", "refund", "(CNY)", "order_no"},
		Decode:            fakeDecode,
	}, channelstest.Bodies{
		TradeNo: func(seq int) string { return fmt.Sprintf("FK%010d", seq) },
		Payment: func(t sample.Trade, d sample.Delivery) []byte {
			return fakeEnvelope(t, fakeBody{Type: "PAY"}, t.WithDefaults().PaidAt, d)
		},
		Refund: func(t sample.Trade, r sample.Refund, d sample.Delivery) []byte {
			r = r.WithDefaults(t.WithDefaults())
			return fakeEnvelope(t, fakeBody{Type: "REFUND", RefundNo: r.No, Refund: r.Amount}, r.At, d)
		},
		StatementLines: func(evs []channels.Event) ([]statements.Line, error) {
			lines := make([]statements.Line, 0, len(evs))
			for _, e := range evs {
				if e.Type == eventkey.PaymentReceived {
					lines = append(lines, statementsample.EventLine(e, statements.KindPayment, e.OrderTotal))
				} else {
					lines = append(lines, statementsample.EventLine(e, statements.KindRefund, e.RefundAmount))
				}
			}
			return lines, nil
		},
		Statement: fakeStatement,
	})
	channelstest.RegisterParser(t, fakePay, statements.Parser{Parse: fakeParse, Refunds: statements.RefundLinesByNumber})
	runSuite(t, ledgertest.New(t), fakePay, 9000)
	t.Run("every channel", TestEveryChannel)
}
