package demo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestCheckBarcodeReportsWhatIsNotRecovered: the demo's checks report a
// barcode payment registered but never settled (its registration still
// REGISTERED, no ledger rows) and one never registered, and count neither
// as recovered.
func TestCheckBarcodeReportsWhatIsNotRecovered(t *testing.T) {
	ctx := context.Background()
	db := sqldbtest.MustSQLite(t)
	b := generateBarcode(3, 20, 2)
	svc, err := settlement.New(db, idempotent.NewStore(db), nil, nil)
	require.NoError(t, err)
	now := time.Now().UTC()
	registered := b.trades[0]
	_, err = svc.RegisterPayment(ctx, settlement.PaymentRequest{
		TenantID: registered.TenantID, Channel: channels.WeChat, MerchantID: fakechannel.WeChatMerchantID,
		MerchantOrderNo: registered.MerchantOrderNo, Amount: registered.Total, Currency: channels.CurrencyCNY,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	})
	require.NoError(t, err)

	rep, problems, err := checkBarcode(ctx, db, b)
	require.NoError(t, err)
	assert.Equal(t, BarcodeReport{Registered: 2}, rep)
	require.Len(t, problems, 4, "%q", problems)
	assert.Contains(t, problems[0], registered.MerchantOrderNo+" (trade "+registered.TradeNo+"): registration REGISTERED, not SUCCEEDED")
	assert.Contains(t, problems[1], registered.MerchantOrderNo+" (trade "+registered.TradeNo+"): not settled")
	assert.Contains(t, problems[2], b.trades[1].MerchantOrderNo+" (trade "+b.trades[1].TradeNo+"): not registered")
	assert.Contains(t, problems[3], b.trades[1].MerchantOrderNo+" (trade "+b.trades[1].TradeNo+"): not settled")
}

// TestBarcodeNumbersAreTheirOwn: the barcode payments' numbers are none
// of the stream's trades' (nor its conflicting one's), and their first
// answers are "not paid yet" for two in three.
func TestBarcodeNumbersAreTheirOwn(t *testing.T) {
	stream := Generate(StreamOptions{Seed: 8, Trades: 30})
	b := generateBarcode(8, stream.Trades, 9)
	assert.Equal(t, 6, b.pending)
	seen := map[string]bool{}
	for _, m := range stream.Messages {
		seen[string(m.Key)] = true
	}
	for i, tr := range b.trades {
		assert.False(t, seen["WECHAT:"+tr.TradeNo], tr.TradeNo)
		assert.Equal(t, "MICROPAY", b.steps[i][len(b.steps[i])-1].TradeType)
	}
}
