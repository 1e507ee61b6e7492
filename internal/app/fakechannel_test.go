package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// fakeChannel is a channel no production code names: it exists only
// through the registry (channelstest.Register).
const fakeChannel channels.Channel = "FAKEPAY"

// fakeBody is the fake channel's callback body: JSON with integer fen,
// refunds reported cumulatively (like Alipay's refund_fee).
type fakeBody struct {
	Status     string    `json:"status"` // PAID or REFUNDED
	TradeNo    string    `json:"trade_no"`
	OrderNo    string    `json:"order_no"`
	Merchant   string    `json:"merchant"`
	Total      int64     `json:"total"`
	RefundNo   string    `json:"refund_no,omitempty"`
	Refunded   int64     `json:"refunded,omitempty"`
	At         time.Time `json:"at"`
	NotifiedAt time.Time `json:"notified_at"` // a delivery field: differs between retries
}

func decodeFake(env channels.Envelope, _ channels.KeyProvider) (channels.Result, error) {
	var b fakeBody
	if err := json.Unmarshal([]byte(env.Body), &b); err != nil {
		return channels.Result{}, &channels.Error{Kind: channels.KindMalformed, Err: fmt.Errorf("decode fake body: %w", err)}
	}
	ev := channels.Event{
		TradeNo: b.TradeNo, MerchantOrderNo: b.OrderNo, OrderTotal: b.Total,
		OccurredAt: b.At.UTC(), RawStatus: b.Status,
	}
	res := channels.Result{MerchantID: b.Merchant}
	var err error
	switch b.Status {
	case "PAID":
		ev.Type = idempotent.PaymentReceived
		ev.Key, err = idempotent.NewPaymentKey(string(fakeChannel), b.TradeNo)
	case "REFUNDED":
		ev.Type, ev.RefundNo, ev.CumulativeRefunded = idempotent.RefundSucceeded, b.RefundNo, b.Refunded
		ev.Key, err = idempotent.NewRefundKey(string(fakeChannel), b.TradeNo, b.RefundNo)
		res.RefundStatus = channels.RefundSuccess
	default:
		return channels.Result{}, &channels.Error{Kind: channels.KindUnsupported, Err: fmt.Errorf("fake status %q", b.Status)}
	}
	if err != nil {
		return channels.Result{}, &channels.Error{Kind: channels.KindMalformed, Err: err}
	}
	res.Event = ev
	return res, nil
}

// fakeMerchant is the merchant fake callbacks name unless b.Merchant says
// otherwise ("-": none).
const fakeMerchant = "FAKE-MCH-1"

// fakeEnvelope is one delivery of a fake callback.
func fakeEnvelope(t channelstest.Trade, b fakeBody, d channelstest.Delivery) []byte {
	b.TradeNo, b.OrderNo, b.Total = t.TradeNo, t.MerchantOrderNo, t.Total
	switch b.Merchant {
	case "":
		b.Merchant = fakeMerchant
	case "-":
		b.Merchant = ""
	}
	b.NotifiedAt = b.At.Add(time.Second + time.Duration(d.Attempt)*4*time.Minute)
	received := d.ReceivedAt
	if received.IsZero() {
		received = b.NotifiedAt.Add(120 * time.Millisecond)
	}
	body, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return channelstest.Envelope(t.TenantID, t.Channel, string(body), received)
}

// registerFakeChannel adds fakeChannel to the registry for the rest of the
// test: its Spec and its test-body builders, nothing else.
func registerFakeChannel(t *testing.T) {
	t.Helper()
	channelstest.Register(t, channels.Spec{
		Code: fakeChannel, Name: "Fake Pay", ContentType: channels.ContentTypeJSON, Refunds: channels.CumulativeRefunds,
		MerchantField: "the merchant field", StatementMerchantField: "merchant",
		FingerprintFields: []string{"status", "total", "refunded", "(CNY)", "order_no"},
		Decode:            decodeFake,
	}, channelstest.Bodies{
		TradeNo: func(seq int) string { return fmt.Sprintf("FK%012d", seq) },
		Payment: func(t channelstest.Trade, d channelstest.Delivery) []byte {
			return fakeEnvelope(t, fakeBody{Status: "PAID", At: t.PaidAt}, d)
		},
		Refund: func(t channelstest.Trade, r channelstest.Refund, d channelstest.Delivery) []byte {
			cum := r.Cumulative
			if cum == 0 {
				cum = r.Amount
			}
			at := r.At
			if at.IsZero() {
				at = t.PaidAt.Add(time.Hour)
			}
			return fakeEnvelope(t, fakeBody{Status: "REFUNDED", RefundNo: r.No, Refunded: cum, At: at}, d)
		},
	})
}

// TestAChannelAddedThroughTheRegistryAloneSettlesReconcilesAndIsCounted is
// the check that a channel is written down in one place: a channel that
// exists only as a registered Spec (and its test bodies) is accepted by
// the default configuration, decoded, claimed and settled through the real
// pipeline against MariaDB (cumulative refunds, duplicates, refunds before
// payments: the demo's stream, which ranges over the registry), passes the
// invariant checker and settlement.Reconcile, and is counted in metrics
// under its own label, never UNKNOWN.
func TestAChannelAddedThroughTheRegistryAloneSettlesReconcilesAndIsCounted(t *testing.T) {
	_, known := channels.Lookup(fakeChannel)
	require.False(t, known, "the fake channel is not built in")
	registerFakeChannel(t)
	require.Contains(t, channels.Codes(), fakeChannel)

	h := newHarness(t, 3)
	s := demo.Generate(demo.StreamOptions{Seed: 23, Trades: 60, Tenants: []int64{1001}, NoTraps: true})
	fakeMsgs := 0
	for _, m := range s.Messages {
		var env channels.Envelope
		require.NoError(t, json.Unmarshal(m.Value, &env))
		if env.Channel == string(fakeChannel) {
			fakeMsgs++
		}
	}
	require.Positive(t, fakeMsgs, "the demo's stream ranges over the registry, the fake channel included")

	h.produce(s.Messages)
	w := h.start(nil)
	assert.Contains(t, w.main.Config.Worker.Channels, string(fakeChannel), "PAYCB_CHANNELS' default is every registered channel")
	h.waitConsumed(time.Minute)
	h.checkStream(s)

	ctx := context.Background()
	claims, err := h.db.NewSelect().Table("ss_channel_idempotent").
		Where("idempotent_key LIKE ?", string(fakeChannel)+":%").Where("status = ?", string(idempotent.StatusSettled)).Count(ctx)
	require.NoError(t, err)
	require.Positive(t, claims)
	receivable, err := h.db.NewSelect().Table("ss_ledger_entry").
		Where("account = ?", settlement.ReceivableAccount(fakeChannel)).Count(ctx)
	require.NoError(t, err)
	assert.Positive(t, receivable, "postings against the fake channel's own receivable")

	rep, err := settlement.Reconcile(ctx, h.db, settlement.ReconcileOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Discrepancies, "reconcile knows the fake channel's accounts and refund model")
	assert.Positive(t, rep.Examined[settlement.CheckOrderState])

	label := map[string]string{"channel": string(fakeChannel)}
	assert.InDelta(t, float64(fakeMsgs), counted(t, w.main, "paycb_events_total", label), 0, "every fake message counted under its own label")
	assert.InDelta(t, float64(claims), counted(t, w.main, "paycb_events_total",
		map[string]string{"channel": string(fakeChannel), "outcome": "acquired"}), 0)
	assert.InDelta(t, 0.0, counted(t, w.main, "paycb_events_total", map[string]string{"channel": "UNKNOWN"}), 0)
	assert.InDelta(t, 0.0, counted(t, w.main, "paycb_dead_letters_total", nil), 0)
}

// TestAChannelNotRegisteredIsUnknown is the control: the same fake callback
// without the registration is dead-lettered unknown_channel and counted
// UNKNOWN, so the test above can fail.
func TestAChannelNotRegisteredIsUnknown(t *testing.T) {
	h := newHarness(t, 1)
	tr := channelstest.Trade{TenantID: 1001, Channel: fakeChannel, TradeNo: "FK1", MerchantOrderNo: "O1", Total: 100, PaidAt: channelstest.BaseTime}
	h.produce([]demo.Message{{Value: fakeEnvelope(tr, fakeBody{Status: "PAID", At: tr.PaidAt}, channelstest.Delivery{})}})
	w := h.start(nil)
	h.waitConsumed(time.Minute)
	dls := h.deadLetters()
	require.Len(t, dls, 1)
	assert.Equal(t, "unknown_channel", header(dls[0], "x-error-kind"))
	assert.Contains(t, header(dls[0], "x-error"), string(fakeChannel))
	assert.InDelta(t, 1.0, counted(t, w.main, "paycb_events_total", map[string]string{"channel": "UNKNOWN"}), 0)
}

// TestAChannelAddedThroughTheRegistryAloneIsBoundToItsMerchants: the merchant
// binding accepts the registered channel's lines, and the merchant check
// refuses its callbacks of another tenant's merchant or of none, naming the
// Spec's merchant field.
func TestAChannelAddedThroughTheRegistryAloneIsBoundToItsMerchants(t *testing.T) {
	registerFakeChannel(t)
	h := newHarness(t, 1)
	binding := filepath.Join(t.TempDir(), "merchants")
	require.NoError(t, os.WriteFile(binding, []byte("1001 FAKEPAY "+fakeMerchant+"\n1002 FAKEPAY FAKE-MCH-2\n"), 0o600))
	trade := func(seq int) channelstest.Trade { return channelstest.NewTrade(fakeChannel, seq) }
	bound, other, none := trade(1), trade(2), trade(3)
	h.produce([]demo.Message{
		{Value: fakeEnvelope(bound, fakeBody{Status: "PAID", At: bound.PaidAt}, channelstest.Delivery{})},
		{Value: fakeEnvelope(other, fakeBody{Status: "PAID", At: other.PaidAt, Merchant: "FAKE-MCH-2"}, channelstest.Delivery{})},
		{Value: fakeEnvelope(none, fakeBody{Status: "PAID", At: none.PaidAt, Merchant: "-"}, channelstest.Delivery{})},
	})
	w := h.start(func(m *app.Main) { m.Config.Worker.TenantMerchantsFile = binding })
	h.waitConsumed(time.Minute)

	dls := h.deadLetters()
	require.Len(t, dls, 2)
	reasons := map[string]string{}
	for _, dl := range dls {
		assert.Equal(t, "tenant_mismatch", header(dl, "x-error-kind"))
		var env channels.Envelope
		require.NoError(t, json.Unmarshal(dl.Value, &env))
		var b fakeBody
		require.NoError(t, json.Unmarshal([]byte(env.Body), &b))
		reasons[b.TradeNo] = header(dl, "x-error")
	}
	assert.Contains(t, reasons[other.TradeNo], "binds it to tenant 1002")
	assert.Contains(t, reasons[none.TradeNo], "names no merchant (the merchant field)", "the Spec's merchant field")
	n, err := h.db.NewSelect().Table("ss_ledger_entry").Where("channel_code = ?", string(fakeChannel)).Count(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the bound merchant's payment alone is posted")
	assert.InDelta(t, 2.0, counted(t, w.main, "paycb_events_total",
		map[string]string{"channel": string(fakeChannel), "outcome": "dead_lettered"}), 0)
}
