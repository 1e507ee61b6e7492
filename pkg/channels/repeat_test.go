package channels_test

import (
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// TestEnvelopeWithARepeatedMemberIsMalformed: a member name given twice in
// an envelope, exactly or in another case, at any depth, is refused, so no
// body or tenant is read one way here and another elsewhere.
func TestEnvelopeWithARepeatedMemberIsMalformed(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, channelstest.Beijing)
	valid := string(channelstest.EnvelopeWith(channels.Envelope{
		TenantID: 1001, Channel: "SQB", ReceivedAt: at, ContentType: "application/json", Body: sqbDocPayment,
	}))
	mustDecode(t, []byte(valid))
	for _, tt := range []struct{ name, members, repeated string }{
		{"tenant_id twice", `"tenant_id":1002`, "tenant_id"},
		{"tenant_id in upper case", `"TENANT_ID":1002`, "TENANT_ID"},
		{"two bodies", `"body":"{}"`, "body"},
		{"a body in another case", `"Body":"{}"`, "Body"},
		{"an escaped name", `"b\u006fdy":"{}"`, "body"},
		{"the same member with the same value", `"channel":"SQB"`, "channel"},
		{"an unknown member twice", `"trace":"a","trace":"b"`, "trace"},
		{"a repeat nested in an unknown member", `"meta":{"hop":[{"id":1,"ID":2}]}`, "ID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			channelstest.RequireRepeatRefused(t, testDecoder(), []byte(channelstest.WithMembers(valid, tt.members)), tt.repeated, "1002")
		})
	}
}

// TestStatementEventWithARepeatedMemberIsMalformed: the canonical event of
// a statement envelope is read one way only too.
func TestStatementEventWithARepeatedMemberIsMalformed(t *testing.T) {
	tr := channelstest.NewTrade(channels.WeChat, 7)
	ev, err := channels.NewStatementEvent(channels.Event{
		TenantID: tr.TenantID, Channel: channels.WeChat, Type: eventkey.PaymentReceived, TradeNo: tr.TradeNo,
		MerchantOrderNo: tr.MerchantOrderNo, OrderTotal: tr.Total, OccurredAt: tr.PaidAt, ReceivedAt: tr.PaidAt, RawStatus: "SUCCESS",
	})
	if err != nil {
		t.Fatal(err)
	}
	envelope := func(body string) []byte {
		return channelstest.EnvelopeWith(channels.Envelope{
			TenantID: tr.TenantID, Channel: string(channels.WeChat), ReceivedAt: tr.PaidAt,
			ContentType: channels.ContentTypeStatement, Body: body,
		})
	}
	body := string(ev.AppendJSON(nil))
	mustDecode(t, envelope(body))
	channelstest.RequireRepeatRefused(t, testDecoder(), envelope(channelstest.WithMembers(body, `"ORDER_TOTAL":999900`)), "ORDER_TOTAL", "999900")
	channelstest.RequireRepeatRefused(t, testDecoder(), envelope(channelstest.WithMembers(body, `"order_total":999900`)), "order_total", "999900")
}
