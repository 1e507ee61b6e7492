package app_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/app"
	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

const (
	secretNew  = "fedcba9876543210fedcba9876543210" // 32 bytes
	secretOld  = "0123456789abcdef0123456789abcdef"
	secretNext = "00112233445566778899aabbccddeeff-next"
)

// signedStatement is a statement event for tr's payment as --publish-missing
// publishes it, with the signature of keys file ("" leaves it unsigned).
type signedStatement struct {
	ev    channels.Event
	msg   kafkaops.Message
	value []byte
}

func statementPayment(t *testing.T, tr channelstest.Trade, file string) signedStatement {
	t.Helper()
	ev, value := channelstest.StatementPayment(tr)
	s := signedStatement{ev: ev, value: value, msg: kafkaops.Message{Key: []byte(string(tr.Channel) + ":" + tr.TradeNo), Value: value}}
	if file != "" {
		ks, err := statementauth.Parse([]byte(file))
		require.NoError(t, err)
		sig, err := ks.Sign(value)
		require.NoError(t, err)
		s.msg.Headers = []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}}
	}
	return s
}

// TestStatementEventsAreAuthenticated runs the worker on statement events as
// an attacker, a stale publisher and a rotation leave them: those signed
// with either key of the file settle; unsigned ones, ones signed with a key
// the file does not hold and a value changed after signing are
// dead-lettered unauthenticated with nothing claimed; a callback needs no
// signature. The one signed with a key the workers did not have yet keeps
// its signature in its dead letter, and once the key is added to the file
// (re-read while running) its redrive restores the header and settles.
func TestStatementEventsAreAuthenticated(t *testing.T) {
	h := newHarness(t, 1)
	keyFile := filepath.Join(t.TempDir(), "statement-keys")
	current := "# current first\nnew=" + secretNew + "\nold=" + secretOld + "\n"
	require.NoError(t, os.WriteFile(keyFile, []byte(current), 0o600))

	signedNew := statementPayment(t, channelstest.NewTrade(channels.WeChat, 61), "new="+secretNew)
	signedOld := statementPayment(t, channelstest.NewTrade(channels.Alipay, 62), "old="+secretOld)
	unsigned := statementPayment(t, channelstest.NewTrade(channels.WeChat, 63), "")
	forged := statementPayment(t, channelstest.NewTrade(channels.SQB, 64), "new="+secretOld) // a known id, another secret
	unknown := statementPayment(t, channelstest.NewTrade(channels.WeChat, 65), "someone="+secretNew)
	tampered := statementPayment(t, channelstest.NewTrade(channels.WeChat, 66), "new="+secretNew)
	richer := statementPayment(t, channelstest.NewTrade(channels.WeChat, 66), "")
	richerEv := richer.ev
	richerEv.OrderTotal *= 10
	richerEv.Fingerprint = channels.Fingerprint(richerEv)
	richerValue, err := channels.StatementEnvelope(richerEv, time.Now())
	require.NoError(t, err)
	tampered.msg.Value = richerValue // the signature of the genuine value, on a larger payment
	early := statementPayment(t, channelstest.NewTrade(channels.WeChat, 67), "next="+secretNext)
	callback := channelstest.NewTrade(channels.WeChat, 68)

	msgs := []kafkaops.Message{
		signedNew.msg, signedOld.msg, unsigned.msg, forged.msg, unknown.msg, tampered.msg, early.msg,
		{Key: []byte("WECHAT:" + callback.TradeNo), Value: channelstest.PaymentEnvelope(callback, channelstest.Delivery{})},
	}
	require.NoError(t, kafkaops.Produce(context.Background(), h.brokers, h.topic(), msgs))
	w := h.start(func(m *app.Main) { m.Config.Statement.KeyFile = keyFile })
	h.waitConsumed(time.Minute)

	claimed := func(ev channels.Event) int {
		t.Helper()
		n, err := h.db.NewSelect().TableExpr("ss_channel_idempotent").Where("tenant_id = ?", ev.TenantID).
			Where("idempotent_key = ?", string(ev.Key)).Count(context.Background())
		require.NoError(t, err)
		return int(n)
	}
	posted := func(ev channels.Event) int {
		t.Helper()
		n, err := h.db.NewSelect().TableExpr("ss_ledger_entry").Where("tenant_id = ?", ev.TenantID).
			Where("idempotent_key = ?", string(ev.Key)).Count(context.Background())
		require.NoError(t, err)
		return int(n)
	}
	for name, s := range map[string]signedStatement{"current key": signedNew, "older key": signedOld} {
		assert.Equal(t, 1, claimed(s.ev), "signed with the %s: claimed", name)
		assert.Equal(t, 2, posted(s.ev), "signed with the %s: posted, both legs", name)
	}
	res, err := channels.NewDecoder(channelstest.Keys()).Decode(msgs[len(msgs)-1].Value)
	require.NoError(t, err)
	assert.Equal(t, 2, posted(res.Event), "a callback needs no signature")

	reasons := map[string]string{}
	var earlyLetter kafka.Message
	for _, dl := range h.deadLetters() {
		assert.Equal(t, "unauthenticated", header(dl, deadletters.HeaderErrorKind))
		reasons[string(dl.Key)] = header(dl, deadletters.HeaderError)
		if string(dl.Key) == string(early.msg.Key) {
			earlyLetter = dl
		}
		for _, secret := range []string{secretNew, secretOld, secretNext} {
			assert.NotContains(t, header(dl, deadletters.HeaderError), secret)
		}
	}
	want := map[string]string{
		string(unsigned.msg.Key): "no signature",
		string(forged.msg.Key):   `signature does not match the message: key "new"`,
		string(unknown.msg.Key):  `unknown statement key "someone"`,
		string(tampered.msg.Key): `signature does not match the message: key "new"`,
		string(early.msg.Key):    `unknown statement key "next"`,
	}
	require.Len(t, reasons, len(want), "one dead letter each: %v", reasons)
	for key, reason := range want {
		assert.Contains(t, reasons[key], "unauthenticated: statement event: "+reason, key)
	}
	for _, s := range []signedStatement{unsigned, forged, unknown, tampered, early} {
		assert.Zero(t, claimed(s.ev), "%s: nothing claimed", s.msg.Key)
	}
	assert.Zero(t, claimed(richerEv), "the tampered payment: nothing claimed")
	assert.InDelta(t, 5.0, counted(t, w.main, "paycb_dead_letters_total", map[string]string{"kind": "unauthenticated"}), 0)
	assert.Equal(t, header(kafka.Message{Headers: early.msg.Headers}, statementauth.HeaderSignature),
		header(earlyLetter, statementauth.HeaderSignature), "the dead letter keeps the signature")

	// The key is added second while the worker runs; the worker re-reads
	// the file, and the redriven event, its signature restored, settles.
	require.NoError(t, os.WriteFile(keyFile, []byte(current+"next="+secretNext+"\n"), 0o600))
	require.Eventually(t, func() bool { return slices.Contains(w.main.StatementKeyIDs(), "next") }, 30*time.Second, 50*time.Millisecond)
	assert.Equal(t, []string{"new", "old", "next"}, w.main.StatementKeyIDs())
	k := kafkaops.Kafka{Brokers: h.brokers, Topic: h.topic(), DLQTopic: h.dlq(), Timeout: 5 * time.Second}
	ds, err := deadletters.ReadTopic(context.Background(), k, deadletters.Filter{Kind: "unauthenticated"})
	require.NoError(t, err)
	var redrive []deadletters.Message
	for _, d := range ds {
		if string(d.Key) == string(early.msg.Key) {
			redrive = append(redrive, d)
		}
	}
	require.Len(t, redrive, 1)
	require.NoError(t, deadletters.Redrive(context.Background(), k, redrive))
	h.waitConsumed(time.Minute)
	assert.Equal(t, 1, claimed(early.ev), "the redriven event is claimed")
	assert.Equal(t, 2, posted(early.ev), "and posted")
	in, err := kafkaops.ReadAll(context.Background(), h.brokers, h.topic())
	require.NoError(t, err)
	last := in[len(in)-1]
	assert.Equal(t, string(early.msg.Key), string(last.Key))
	assert.NotEmpty(t, header(last, deadletters.HeaderRedrivenFrom))
	assert.Equal(t, header(earlyLetter, statementauth.HeaderSignature), header(last, statementauth.HeaderSignature), "the redrive restores the signature")
	assert.Len(t, h.deadLetters(), len(want), "no new dead letter")
}

// TestStatementEventsWithoutAKeyFileAreUnauthenticated: a worker without
// PAYCB_STATEMENT_KEY_FILE claims no statement event, signed or not, and
// says why; callbacks settle.
func TestStatementEventsWithoutAKeyFileAreUnauthenticated(t *testing.T) {
	h := newHarness(t, 1)
	signed := statementPayment(t, channelstest.NewTrade(channels.WeChat, 71), "new="+secretNew)
	callback := channelstest.NewTrade(channels.SQB, 72)
	require.NoError(t, kafkaops.Produce(context.Background(), h.brokers, h.topic(), []kafkaops.Message{
		signed.msg, {Key: []byte("SQB:" + callback.TradeNo), Value: channelstest.PaymentEnvelope(callback, channelstest.Delivery{})},
	}))
	h.start(nil)
	h.waitConsumed(time.Minute)
	dls := h.deadLetters()
	require.Len(t, dls, 1)
	assert.Equal(t, "unauthenticated", header(dls[0], deadletters.HeaderErrorKind))
	assert.Contains(t, header(dls[0], deadletters.HeaderError), "PAYCB_STATEMENT_KEY_FILE")
	n, err := h.db.NewSelect().TableExpr("ss_channel_idempotent").Count(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "only the callback is claimed")
}

// TestABadStatementKeyFileStopsTheStart: a key file that does not parse is
// a configuration error at start, naming the line and no secret.
func TestABadStatementKeyFileStopsTheStart(t *testing.T) {
	h := newHarness(t, 1)
	keyFile := filepath.Join(t.TempDir(), "statement-keys")
	require.NoError(t, os.WriteFile(keyFile, []byte("k1="+secretNew+"\nk1="+secretOld+"\n"), 0o600))
	cfg := h.config()
	cfg.Statement.KeyFile = keyFile
	err := cfg.Validate(app.FileChecks())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	assert.Contains(t, err.Error(), "PAYCB_STATEMENT_KEY_FILE")
	assert.NotContains(t, err.Error(), secretOld)
	m := &app.Main{Config: cfg, Logger: testLogger()}
	err = m.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	assert.NotContains(t, err.Error(), secretOld)
}
