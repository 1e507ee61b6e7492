package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/querytest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// queryMessage is a's query message signed with the statement key new.
func queryMessage(t *testing.T, a querytest.Answer) kafkaops.Message {
	t.Helper()
	ks, err := statementauth.Parse([]byte("new=" + secretNew))
	require.NoError(t, err)
	value := a.Value(t)
	sig, err := ks.Sign(value)
	require.NoError(t, err)
	return kafkaops.Message{
		Key: []byte(string(a.Target.Channel) + ":" + a.Target.MerchantOrderNo), Value: value,
		Headers: []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}},
	}
}

// TestQueryAnswersThroughTheWorker runs the worker, configured with a
// statement key file and PAYCB_CHANNEL_PUBLIC_KEYS_FILE, on a broker
// holding a WeChat answer and the same trade's callback, and an Alipay
// answer signed with a key the file does not hold: the answer settles, the
// callback is its duplicate, and the forged answer is dead-lettered
// unauthenticated with nothing claimed.
func TestQueryAnswersThroughTheWorker(t *testing.T) {
	h := newHarness(t, 1)
	kit := querytest.New(t)
	dir := t.TempDir()
	stmtFile := filepath.Join(dir, "statement-keys")
	require.NoError(t, os.WriteFile(stmtFile, []byte("new="+secretNew+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, kit.CertFile), kit.CertPEM, 0o600))
	keysFile := filepath.Join(dir, "channel-keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(kit.KeysYAML), 0o600))

	at := time.Now().UTC().Truncate(time.Second)
	tr := channelstest.NewTrade(channels.WeChat, 91)
	forgedTr := channelstest.NewTrade(channels.Alipay, 92)
	cb := channelstest.PaymentEnvelope(tr, channelstest.Delivery{})
	require.NoError(t, kafkaops.Produce(context.Background(), h.brokers, h.topic(), []kafkaops.Message{
		queryMessage(t, kit.WeChatPayment(t, tr, "SUCCESS", kit.Trusted, at, at)),
		{Key: []byte("WECHAT:" + tr.TradeNo), Value: cb},
		queryMessage(t, kit.AlipayPayment(t, forgedTr, "TRADE_SUCCESS", kit.Forger, at)),
	}))
	w := h.start(func(m *app.Main) {
		m.Config.Statement.KeyFile = stmtFile
		m.Config.Worker.ChannelPublicKeysFile = keysFile
	})
	h.waitConsumed(time.Minute)

	res, err := channels.NewDecoder(channelstest.Keys()).Decode(cb)
	require.NoError(t, err)
	n, err := h.db.NewSelect().TableExpr("ss_ledger_entry").Where("idempotent_key = ?", string(res.Event.Key)).Count(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "posted once")
	assert.InDelta(t, 1, counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "acquired"}), 0)
	assert.InDelta(t, 1, counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "duplicate"}), 0)
	dls := h.deadLetters()
	require.Len(t, dls, 1)
	assert.Equal(t, "unauthenticated", header(dls[0], deadletters.HeaderErrorKind))
	assert.Contains(t, header(dls[0], deadletters.HeaderError), "ALIPAY keys")
	claims, err := h.db.NewSelect().TableExpr("ss_channel_idempotent").Count(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, claims, "the forged answer claimed nothing")
}

// TestAClosedAnswerClosesItsRegistration: through the worker, on kfake
// and MariaDB, a payment registration then a signed CLOSED WeChat answer
// about its order, delivered twice: the registration ends CLOSED, nothing
// is claimed or posted, and a registration already SUCCEEDED (its callback
// consumed) stays SUCCEEDED under a closed answer.
func TestAClosedAnswerClosesItsRegistration(t *testing.T) {
	h := newHarness(t, 1)
	kit := querytest.New(t)
	dir := t.TempDir()
	stmtFile := filepath.Join(dir, "statement-keys")
	require.NoError(t, os.WriteFile(stmtFile, []byte("new="+secretNew+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, kit.CertFile), kit.CertPEM, 0o600))
	keysFile := filepath.Join(dir, "channel-keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(kit.KeysYAML), 0o600))

	at := time.Now().UTC().Truncate(time.Second)
	reg := func(tr channelstest.Trade) kafkaops.Message {
		t.Helper()
		created := at.Add(-time.Minute)
		v, err := channels.RegistrationEnvelope(tr.TenantID, tr.Channel, created, channels.RegistrationMessage{
			Kind: channels.RegistrationPayment, MerchantID: wechat.SampleMerchantID, MerchantOrderNo: tr.MerchantOrderNo,
			Amount: tr.Total, Currency: "CNY", CreatedAt: created, ExpiresAt: created.Add(time.Hour),
		})
		require.NoError(t, err)
		return kafkaops.Message{Key: []byte("WECHAT:" + tr.MerchantOrderNo), Value: v}
	}
	unpaid := channelstest.NewTrade(channels.WeChat, 9201)
	paid := channelstest.NewTrade(channels.WeChat, 9202)
	closedAnswer := queryMessage(t, kit.WeChatPayment(t, unpaid, "CLOSED", kit.Trusted, at, at))
	require.NoError(t, kafkaops.Produce(context.Background(), h.brokers, h.topic(), []kafkaops.Message{
		reg(unpaid), closedAnswer, closedAnswer,
		reg(paid),
		{Key: []byte("WECHAT:" + paid.TradeNo), Value: channelstest.PaymentEnvelope(paid, channelstest.Delivery{})},
		queryMessage(t, kit.WeChatPayment(t, paid, "CLOSED", kit.Trusted, at, at)),
	}))
	w := h.start(func(m *app.Main) {
		m.Config.Statement.KeyFile = stmtFile
		m.Config.Worker.ChannelPublicKeysFile = keysFile
	})
	h.waitConsumed(time.Minute)

	status := func(tr channelstest.Trade) string {
		t.Helper()
		var s string
		require.NoError(t, h.db.NewSelect().Table("ss_payment_registration").Column("status").
			Where("merchant_order_no = ?", tr.MerchantOrderNo).Scan(context.Background(), &s))
		return s
	}
	assert.Equal(t, "CLOSED", status(unpaid))
	assert.Equal(t, "SUCCEEDED", status(paid), "money moved wins")
	n, err := h.db.NewSelect().TableExpr("ss_ledger_entry").Where("channel_trade_no = ?", unpaid.TradeNo).Count(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "nothing posted for the closed order")
	claims, err := h.db.NewSelect().TableExpr("ss_channel_idempotent").Count(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, claims, "only the paid callback claimed")
	assert.InDelta(t, 5, counted(t, w.main, "paycb_events_total", map[string]string{"outcome": "ignored"}), 0, "two registrations, three closed answers")
	assert.Empty(t, h.deadLetters())
}

// TestABadChannelKeysFileStopsTheStart: a public-keys file with an unknown
// field is a configuration error (exit 2) at validation and at start.
func TestABadChannelKeysFileStopsTheStart(t *testing.T) {
	h := newHarness(t, 1)
	keysFile := filepath.Join(t.TempDir(), "channel-keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte("- {channel: ALIPAY, app_id: \"2021\", public_key_file: k.pem, sign_type: RSA2}\n"), 0o600))
	cfg := h.config()
	cfg.Worker.ChannelPublicKeysFile = keysFile
	err := cfg.Validate(app.FileChecks())
	require.ErrorIs(t, err, config.ErrInvalid)
	assert.Contains(t, err.Error(), "PAYCB_CHANNEL_PUBLIC_KEYS_FILE")
	assert.Contains(t, err.Error(), "sign_type")
	err = (&app.Main{Config: cfg, Logger: testLogger()}).Run(context.Background())
	require.ErrorIs(t, err, config.ErrInvalid)
}
