package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// paymentRegistrationValue is the registration message of tr's payment for
// merchant.
func paymentRegistrationValue(t *testing.T, tr channelstest.Trade, merchant string, amount int64) []byte {
	t.Helper()
	created := tr.PaidAt.Add(-time.Minute)
	v, err := channels.RegistrationEnvelope(tr.TenantID, tr.Channel, created, channels.RegistrationMessage{
		Kind: channels.RegistrationPayment, MerchantID: merchant, MerchantOrderNo: tr.MerchantOrderNo,
		Amount: amount, Currency: "CNY", CreatedAt: created, ExpiresAt: created.Add(5 * time.Minute),
	})
	require.NoError(t, err)
	return v
}

func refundRegistrationValue(t *testing.T, tr channelstest.Trade, merchant, refundNo string, amount int64) []byte {
	t.Helper()
	v, err := channels.RegistrationEnvelope(tr.TenantID, tr.Channel, tr.PaidAt, channels.RegistrationMessage{
		Kind: channels.RegistrationRefund, MerchantID: merchant, MerchantOrderNo: tr.MerchantOrderNo,
		TradeNo: tr.TradeNo, RefundNo: refundNo, Amount: amount, Currency: "CNY", CreatedAt: tr.PaidAt,
	})
	require.NoError(t, err)
	return v
}

// TestRegistrationMessagesAreRecordedOnceAndMoveNoMoney: in one batch, a
// payment registration, its payment, the registration again, a
// contradicting one, a refund registration of the paid trade and one of a
// trade not paid: the payment settles and its registration is SUCCEEDED,
// the repeat changes nothing, the contradictions are dead-lettered
// conflict, nothing is claimed for a registration, and each message is
// counted once.
func TestRegistrationMessagesAreRecordedOnceAndMoveNoMoney(t *testing.T) {
	e := newPipelineEnv(t)
	dl := &reasonDeadLetterer{}
	e.p.DeadLetterer = dl
	ctx := context.Background()
	tr := channelstest.NewTrade(channels.WeChat, 801)
	unpaid := channelstest.NewTrade(channels.WeChat, 802)
	mismatched := tr
	mismatched.MerchantOrderNo = "P-OTHER"
	otherOrder := refundRegistrationValue(t, mismatched, "1230000109", "RF-2", 100)
	e.handle(t,
		paymentRegistrationValue(t, tr, "1230000109", tr.Total),
		channelstest.PaymentEnvelope(tr, channelstest.Delivery{}),
		paymentRegistrationValue(t, tr, "1230000109", tr.Total),
		paymentRegistrationValue(t, tr, "1230000109", tr.Total+1),
		refundRegistrationValue(t, tr, "1230000109", "RF-1", 100),
		refundRegistrationValue(t, unpaid, "1230000109", "RF-1", 100),
		otherOrder,
	)
	reg, err := e.svc.GetPaymentRegistration(ctx, tr.TenantID, tr.Channel, tr.MerchantOrderNo)
	require.NoError(t, err)
	assert.Equal(t, settlement.RegistrationSucceeded, reg.Status)
	assert.Equal(t, tr.Total, reg.Amount, "the first registration stands")
	refund, err := e.svc.GetRegistration(ctx, tr.TenantID, tr.Channel, tr.TradeNo, "RF-1")
	require.NoError(t, err)
	assert.Equal(t, settlement.RegistrationRegistered, refund.Status)

	letters := dl.letters()
	require.Len(t, letters, 3)
	assert.True(t, strings.HasPrefix(letters[0], "conflict: "), letters[0])
	assert.Contains(t, letters[0], "amount: registered 2580, now 2581")
	assert.True(t, strings.HasPrefix(letters[1], "conflict: "), letters[1])
	assert.Contains(t, letters[1], "no posted payment")
	assert.True(t, strings.HasPrefix(letters[2], "conflict: "), letters[2])
	assert.Contains(t, letters[2], `merchant_order_no: the trade's is "`+tr.MerchantOrderNo+`", the registration names "P-OTHER"`)
	_, err = e.svc.GetRegistration(ctx, tr.TenantID, tr.Channel, tr.TradeNo, "RF-2")
	require.ErrorIs(t, err, settlement.ErrRegistrationNotFound)

	n, err := e.db.NewSelect().Table("ss_channel_idempotent").Count(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "only the payment is claimed")
	assert.Equal(t, 3, eventsCounted(t, e.reg, "ignored"), "registrations recorded, the first time and again")
	assert.Equal(t, 3, eventsCounted(t, e.reg, "conflict"))
	assert.Equal(t, 1, eventsCounted(t, e.reg, "acquired"))
	assert.Equal(t, 7, eventsCounted(t, e.reg, ""), "each message counted once")
	assert.Equal(t, 1, refundsIgnored(t, e))
}

// TestRegistrationOfAnotherTenantsMerchantIsTenantMismatch: under a
// merchant binding, a registration naming a merchant bound to another
// tenant, or to none, is dead-lettered tenant_mismatch and nothing is
// recorded.
func TestRegistrationOfAnotherTenantsMerchantIsTenantMismatch(t *testing.T) {
	e := newPipelineEnv(t)
	dl := &reasonDeadLetterer{}
	e.p.DeadLetterer = dl
	path := filepath.Join(t.TempDir(), "merchants")
	writeBinding(t, path, "1001 WECHAT 1230000109\n2002 WECHAT 1900000109\n")
	f, err := merchantbinding.Load(path)
	require.NoError(t, err)
	e.p.Merchants = f
	bound := channelstest.NewTrade(channels.WeChat, 811)
	other := channelstest.NewTrade(channels.WeChat, 812)
	nowhere := channelstest.NewTrade(channels.WeChat, 813)
	e.handle(t,
		paymentRegistrationValue(t, bound, "1230000109", bound.Total),
		paymentRegistrationValue(t, other, "1900000109", other.Total),
		paymentRegistrationValue(t, nowhere, "1999999999", nowhere.Total),
	)
	ctx := context.Background()
	_, err = e.svc.GetPaymentRegistration(ctx, bound.TenantID, bound.Channel, bound.MerchantOrderNo)
	require.NoError(t, err)
	for _, tr := range []channelstest.Trade{other, nowhere} {
		_, err = e.svc.GetPaymentRegistration(ctx, tr.TenantID, tr.Channel, tr.MerchantOrderNo)
		require.ErrorIs(t, err, settlement.ErrPaymentRegistrationNotFound)
	}
	letters := dl.letters()
	require.Len(t, letters, 2)
	assert.Contains(t, letters[0], "tenant_mismatch: ")
	assert.Contains(t, letters[0], "binds it to tenant 2002")
	assert.Contains(t, letters[1], "binds it to no tenant")
}

// failingRegistrar fails every registration with a database error.
type failingRegistrar struct{ calls int }

func (f *failingRegistrar) RegisterPayment(context.Context, settlement.PaymentRequest) (settlement.PaymentRegistration, error) {
	f.calls++
	return settlement.PaymentRegistration{}, errors.New("connection reset")
}

func (f *failingRegistrar) RegisterRefund(context.Context, settlement.RefundRequest) (settlement.Registration, error) {
	f.calls++
	return settlement.Registration{}, errors.New("connection reset")
}

// TestRegistrationFailingInTheDatabaseIsRetried: an error other than the
// registrar's conflicts leaves the message not done, counted as a
// processing error of stage register, with no dead letter.
func TestRegistrationFailingInTheDatabaseIsRetried(t *testing.T) {
	e := newPipelineEnv(t)
	fr := &failingRegistrar{}
	e.p.Registrar = fr
	tr := channelstest.NewTrade(channels.SQB, 821)
	msgs := []kafka.Message{{Topic: "channel-events", Offset: 0, Value: paymentRegistrationValue(t, tr, "01939202039923029", tr.Total)}}
	states := make([]MessageState, 1)
	err := e.p.Handle(context.Background(), msgs, states)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection reset")
	assert.False(t, states[0].done)
	assert.Equal(t, 1, fr.calls)
	assert.Empty(t, e.dl.letters())
	assert.Zero(t, eventsCounted(t, e.reg, ""), "counted when done, not before")
}

// refundsIgnored is paycb_events_total{channel="WECHAT",
// event_type="REFUND_SUCCEEDED", outcome="ignored"}.
func refundsIgnored(t *testing.T, e *pipelineEnv) int {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "paycb_events_total" {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			want := map[string]string{"channel": "WECHAT", "event_type": "REFUND_SUCCEEDED", "outcome": "ignored"}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return int(m.GetCounter().GetValue())
		}
	}
	return 0
}
