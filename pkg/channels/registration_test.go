package channels_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
)

func registrationValue(t *testing.T, body string) []byte {
	t.Helper()
	v, err := json.Marshal(channels.Envelope{
		TenantID: 1001, Channel: "WECHAT", ReceivedAt: time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC),
		ContentType: channels.ContentTypeRegistration, Body: body,
	})
	require.NoError(t, err)
	return v
}

const (
	paymentRegistration = `{"kind": "PAYMENT", "merchant_id": "1900000100", "merchant_order_no": "P20261205000123",
 "amount": 1200, "currency": "CNY",
 "created_at": "2026-12-05T10:00:00+08:00", "expires_at": "2026-12-05T10:05:00+08:00"}`
	refundRegistration = `{"kind": "REFUND", "merchant_id": "1900000100", "channel_trade_no": "4200000000202612050000000001",
 "merchant_order_no": "P20261205000123", "refund_no": "R1", "amount": 300, "currency": "CNY",
 "created_at": "2026-12-05T11:00:00+08:00"}`
)

func TestDecodeReadsTheContractsRegistrations(t *testing.T) {
	d := channels.NewDecoder(nil)
	res, err := d.DecodeMessage(registrationValue(t, paymentRegistration), "")
	require.NoError(t, err, "a registration is not signed")
	require.NotNil(t, res.Registration)
	assert.Equal(t, channels.RegistrationMessage{
		Kind: channels.RegistrationPayment, MerchantID: "1900000100", MerchantOrderNo: "P20261205000123",
		Amount: 1200, Currency: "CNY",
		CreatedAt: time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2026, 12, 5, 2, 5, 0, 0, time.UTC),
	}, *res.Registration)
	assert.Equal(t, "1900000100", res.MerchantID)
	assert.Equal(t, int64(1001), res.Event.TenantID)
	assert.Empty(t, res.Event.Key, "a registration is no event")

	res, err = d.DecodeMessage(registrationValue(t, refundRegistration), "")
	require.NoError(t, err)
	require.NotNil(t, res.Registration)
	assert.Equal(t, channels.RegistrationRefund, res.Registration.Kind)
	assert.Equal(t, "4200000000202612050000000001", res.Registration.TradeNo)
	assert.Equal(t, "R1", res.Registration.RefundNo)
	assert.Equal(t, int64(300), res.Registration.Amount)
}

func TestRegistrationEnvelopeRoundTrips(t *testing.T) {
	m := channels.RegistrationMessage{
		Kind: channels.RegistrationPayment, MerchantID: "M", MerchantOrderNo: "O1", Amount: 1, Currency: "CNY",
		CreatedAt: time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC),
	}
	v, err := channels.RegistrationEnvelope(7, channels.Alipay, m.CreatedAt, m)
	require.NoError(t, err)
	res, err := channels.NewDecoder(nil).DecodeMessage(v, "")
	require.NoError(t, err)
	require.NotNil(t, res.Registration)
	assert.Equal(t, m, *res.Registration)
}

func TestParseRegistrationRefusesWhatItCannotTrust(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		kind channels.ErrorKind
	}{
		"repeated member":     {`{"kind":"PAYMENT","kind":"REFUND","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindMalformed},
		"unknown member":      {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z","note":"x"}`, channels.KindMalformed},
		"trailing data":       {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"} {}`, channels.KindMalformed},
		"unknown kind":        {`{"kind":"CAPTURE","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z"}`, channels.KindMalformed},
		"no merchant":         {`{"kind":"PAYMENT","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindMalformed},
		"control character":   {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O\u0001","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindMalformed},
		"no expiry":           {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z"}`, channels.KindMalformed},
		"expiry before":       {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T09:00:00Z"}`, channels.KindMalformed},
		"absurd expiry":       {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2027-12-05T10:00:00Z"}`, channels.KindMalformed},
		"no created_at":       {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"CNY","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindMalformed},
		"payment names trade": {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","channel_trade_no":"T","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindMalformed},
		"refund no refund_no": {`{"kind":"REFUND","merchant_id":"M","merchant_order_no":"O","channel_trade_no":"T","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z"}`, channels.KindMalformed},
		"refund with expiry":  {`{"kind":"REFUND","merchant_id":"M","merchant_order_no":"O","channel_trade_no":"T","refund_no":"R","amount":1,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindMalformed},
		"no amount":           {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindMalformed},
		"zero amount":         {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":0,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindInvalidAmount},
		"negative amount":     {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":-5,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindInvalidAmount},
		"fractional amount":   {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":12.5,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindInvalidAmount},
		"exponent amount":     {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1e3,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindInvalidAmount},
		"string amount":       {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":"12","currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindInvalidAmount},
		"huge amount":         {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":99999999999999999999,"currency":"CNY","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindInvalidAmount},
		"other currency":      {`{"kind":"PAYMENT","merchant_id":"M","merchant_order_no":"O","amount":1,"currency":"USD","created_at":"2026-12-05T10:00:00Z","expires_at":"2026-12-05T11:00:00Z"}`, channels.KindUnsupported},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := channels.NewDecoder(nil).DecodeMessage(registrationValue(t, tc.body), "")
			require.Error(t, err)
			kind, ok := channels.KindOf(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, tc.kind, kind, "%v", err)
		})
	}
}

// FuzzParseRegistration: whatever the body, ParseRegistration either
// refuses it with a typed error or returns a registration that keeps every
// rule it checks, and that RegistrationEnvelope carries unchanged.
func FuzzParseRegistration(f *testing.F) {
	f.Add(paymentRegistration)
	f.Add(refundRegistration)
	f.Fuzz(func(t *testing.T, body string) {
		env := channels.Envelope{
			TenantID: 1001, Channel: "SQB", ReceivedAt: time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC),
			ContentType: channels.ContentTypeRegistration, Body: body,
		}
		m, err := channels.ParseRegistration(env)
		if err != nil {
			_, ok := channels.KindOf(err)
			require.True(t, ok, "untyped error %v", err)
			return
		}
		require.Positive(t, m.Amount)
		require.LessOrEqual(t, m.Amount, channels.MaxAmount)
		require.Equal(t, "CNY", m.Currency)
		require.NotEmpty(t, m.MerchantID)
		require.NotEmpty(t, m.MerchantOrderNo)
		switch m.Kind {
		case channels.RegistrationPayment:
			require.True(t, m.ExpiresAt.After(m.CreatedAt))
			require.LessOrEqual(t, m.ExpiresAt.Sub(m.CreatedAt), channels.MaxPaymentLifetime)
			require.Empty(t, m.TradeNo+m.RefundNo)
		case channels.RegistrationRefund:
			require.True(t, m.ExpiresAt.IsZero())
			require.NotEmpty(t, m.TradeNo)
			require.NotEmpty(t, m.RefundNo)
		default:
			t.Fatalf("kind %q accepted", m.Kind)
		}
		v, err := channels.RegistrationEnvelope(env.TenantID, channels.Channel(env.Channel), env.ReceivedAt, m)
		require.NoError(t, err)
		res, err := channels.NewDecoder(nil).DecodeMessage(v, "")
		require.NoError(t, err)
		require.Equal(t, m, *res.Registration)
	})
}
