package settled_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/paycallback/paycallback/pkg/settled"
)

// contractExample is the contract's example value, byte for byte as
// Encode writes it.
const contractExample = `{"event_id":"1001:WECHAT:4200000000202612050000000001:PAYMENT_RECEIVED",` +
	`"event_type":"PAYMENT_RECEIVED","tenant_id":1001,"channel":"WECHAT",` +
	`"channel_trade_no":"4200000000202612050000000001","merchant_order_no":"P20261205000123",` +
	`"refund_no":"","amount":1200,"currency":"CNY",` +
	`"order_status":"PAID","order_amount":1200,"refunded_amount":0,"trade_seq":1,` +
	`"occurred_at":"2026-12-05T02:00:03Z","settled_at":"2026-12-05T02:00:03.412Z",` +
	`"source":"callback"}`

func payment() settled.Event {
	return settled.Event{
		EventID:   "1001:WECHAT:4200000000202612050000000001:PAYMENT_RECEIVED",
		EventType: settled.PaymentReceived, TenantID: 1001, Channel: "WECHAT",
		ChannelTradeNo: "4200000000202612050000000001", MerchantOrderNo: "P20261205000123",
		Amount: 1200, Currency: "CNY", OrderStatus: settled.OrderPaid, OrderAmount: 1200, TradeSeq: 1,
		OccurredAt: time.Date(2026, 12, 5, 10, 0, 3, 0, time.FixedZone("CST", 8*3600)),
		SettledAt:  time.Date(2026, 12, 5, 2, 0, 3, 412_000_000, time.UTC),
		Source:     settled.SourceCallback,
	}
}

func refund() settled.Event {
	e := payment()
	e.EventType, e.RefundNo = settled.RefundSucceeded, "rf:1"
	e.EventID = settled.EventID(1001, "WECHAT:4200000000202612050000000001:REFUND_SUCCEEDED:rf:1")
	e.Amount, e.OrderStatus, e.RefundedAmount, e.TradeSeq = 300, settled.OrderPartiallyRefunded, 300, 2
	e.Source = settled.SourceStatement
	return e
}

func TestEncodeWritesTheContractsExample(t *testing.T) {
	b, err := settled.Encode(payment())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != contractExample {
		t.Fatalf("encoded\n%s\nwant\n%s", b, contractExample)
	}
	if got := payment().MessageKey(); got != "1001:WECHAT:4200000000202612050000000001" {
		t.Fatalf("message key %q", got)
	}
}

func TestEncodeDecodeRoundTripIsByteForByte(t *testing.T) {
	for _, e := range []settled.Event{payment(), refund()} {
		b1, err := settled.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		d, err := settled.Decode(b1)
		if err != nil {
			t.Fatalf("decode %s: %v", b1, err)
		}
		b2, err := settled.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("re-encoded differs:\n%s\n%s", b1, b2)
		}
		if !d.OccurredAt.Equal(e.OccurredAt) || d.OccurredAt.Location() != time.UTC || d.TradeSeq != e.TradeSeq {
			t.Fatalf("decoded %+v from %+v", d, e)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, value := range map[string]string{
		"repeated member":        strings.Replace(contractExample, `"amount":1200,`, `"amount":1200,"amount":1,`, 1),
		"member in another case": strings.Replace(contractExample, `"amount":1200,`, `"amount":1200,"AMOUNT":1,`, 1),
		"escaped member name":    strings.Replace(contractExample, `"amount":1200,`, `"amount":1200,"\u0061mount":1,`, 1),
		"unknown member twice":   strings.Replace(contractExample, `"source":"callback"`, `"source":"callback","later":1,"Later":2`, 1),
		"repeat nested":          strings.Replace(contractExample, `"source":"callback"`, `"source":"callback","later":{"a":[{"b":1,"B":2}]}`, 1),
		"missing member":         strings.Replace(contractExample, `"refund_no":"",`, ``, 1),
		"null member":            strings.Replace(contractExample, `"refund_no":""`, `"refund_no":null`, 1),
		"fraction":               strings.Replace(contractExample, `"amount":1200`, `"amount":1200.0`, 1),
		"exponent":               strings.Replace(contractExample, `"amount":1200`, `"amount":12e2`, 1),
		"string amount":          strings.Replace(contractExample, `"amount":1200`, `"amount":"1200"`, 1),
		"numeric string":         strings.Replace(contractExample, `"currency":"CNY"`, `"currency":156`, 1),
		"array":                  "[" + contractExample + "]",
		"trailing data":          contractExample + "{}",
		"two objects":            contractExample + contractExample,
		"wrong event_id":         strings.Replace(contractExample, `"1001:WECHAT:4200`, `"1002:WECHAT:4200`, 1),
		"unknown source":         strings.Replace(contractExample, `"callback"`, `"replay"`, 1),
		"zero trade_seq":         strings.Replace(contractExample, `"trade_seq":1`, `"trade_seq":0`, 1),
		"refund_no on a payment": strings.Replace(contractExample, `"refund_no":""`, `"refund_no":"R1"`, 1),
		"not UTF-8":              strings.Replace(contractExample, `P20261205000123`, "P\xff", 1),
		"empty":                  "",
	} {
		if _, err := settled.Decode([]byte(value)); !errors.Is(err, settled.ErrInvalid) {
			t.Errorf("%s: Decode(%s) = %v, want ErrInvalid", name, value, err)
		}
	}
}

func TestDecodeIgnoresMembersItDoesNotKnow(t *testing.T) {
	value := strings.Replace(contractExample, `"source":"callback"`, `"source":"callback","later":{"a":[1,2]}`, 1)
	e, err := settled.Decode([]byte(value))
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != settled.SourceCallback || e.Amount != 1200 {
		t.Fatalf("decoded %+v", e)
	}
}

func TestEncodeRefusesAnInvalidEvent(t *testing.T) {
	for name, mut := range map[string]func(e *settled.Event){
		"event id of another key": func(e *settled.Event) { e.EventID = "1001:WECHAT:x:PAYMENT_RECEIVED" },
		"refund without number":   func(e *settled.Event) { e.EventType = settled.RefundSucceeded },
		"negative amount":         func(e *settled.Event) { e.Amount = -1 },
		"lower-case currency":     func(e *settled.Event) { e.Currency = "cny" },
		"unknown status":          func(e *settled.Event) { e.OrderStatus = "CLOSED" },
		"no settled time":         func(e *settled.Event) { e.SettledAt = time.Time{} },
		"no source":               func(e *settled.Event) { e.Source = "" },
		"space in trade no": func(e *settled.Event) {
			e.ChannelTradeNo = "42 00"
			e.EventID = settled.EventID(1001, "WECHAT:42 00:PAYMENT_RECEIVED")
		},
	} {
		e := payment()
		mut(&e)
		if _, err := settled.Encode(e); !errors.Is(err, settled.ErrInvalid) {
			t.Errorf("%s: Encode = %v, want ErrInvalid", name, err)
		}
	}
}

// compileSchema compiles docs/settled-event.schema.json, with format
// assertions on (date-time).
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile("../../docs/settled-event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("settled-event.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("settled-event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, value []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		t.Fatalf("%s: %v", value, err)
	}
	return sch.Validate(v)
}

func TestEncodedEventsMatchTheSchema(t *testing.T) {
	sch := compileSchema(t)
	cancel := refund()
	cancel.Channel, cancel.RefundNo, cancel.Source = "SQB", "CANCEL", settled.SourceQuery
	cancel.EventID = settled.EventID(1001, "SQB:4200000000202612050000000001:REFUND_SUCCEEDED:CANCEL")
	cancel.OrderStatus, cancel.RefundedAmount = settled.OrderRefunded, 1200
	spaced := payment()
	spaced.MerchantOrderNo = "ORD 2026:12/05 №1" // a merchant's own number: spaces, colons, any script
	for _, e := range []settled.Event{payment(), refund(), cancel, spaced} {
		b, err := settled.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(t, sch, b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	// The schema is no rubber stamp: it refuses what Decode refuses.
	for _, bad := range []string{
		strings.Replace(contractExample, `"source":"callback"`, `"source":"callback","later":1`, 1),
		strings.Replace(contractExample, `"refund_no":""`, `"refund_no":"R1"`, 1),
		strings.Replace(contractExample, `"trade_seq":1`, `"trade_seq":0`, 1),
		strings.Replace(contractExample, `"amount":1200`, `"amount":12.5`, 1),
		strings.Replace(contractExample, `"settled_at":"2026-12-05T02:00:03.412Z"`, `"settled_at":"yesterday"`, 1),
		strings.Replace(contractExample, `"currency":"CNY",`, ``, 1),
		strings.Replace(contractExample, `P20261205000123`, `P\u0007`, 1),
	} {
		if err := validate(t, sch, []byte(bad)); err == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}
