package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/sample"
)

const queryStatementKey = "q1=0123456789abcdef0123456789abcdef"

// queryFiles writes what consumer query once reads for the fake WeChat w:
// the CA bundle trusting it, the credentials of the test merchant for
// tenant 1001, the channel's public key and a statement key file; it
// returns the variables naming them.
func queryFiles(t *testing.T, w *fakechannel.WeChat) map[string]string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	k := w.Keys()
	write("wechat.pem", string(fakechannel.PrivateKeyPEM(k.Merchant)))
	write("wechatpay_pub.pem", string(fakechannel.PublicKeyPEM(&k.Platform.PublicKey)))
	return map[string]string{
		"PAYCB_QUERY_TLS_CA_FILE": write("ca.pem", string(w.CertificatePEM())),
		"PAYCB_QUERY_WECHAT_URL":  w.URL(),
		"PAYCB_QUERY_CREDENTIALS_FILE": write("credentials.yaml", `- {tenant_id: 1001, channel: WECHAT, merchant_id: "`+
			fakechannel.WeChatMerchantID+`", serial_no: "`+fakechannel.WeChatSerialNo+`", private_key_file: wechat.pem}
`),
		"PAYCB_CHANNEL_PUBLIC_KEYS_FILE": write("channel_keys.yaml", `- {channel: WECHAT, merchant_id: "`+fakechannel.WeChatMerchantID+
			`", key_id: "`+fakechannel.WeChatPlatformKeyID+`", public_key_file: wechatpay_pub.pem}
`),
		"PAYCB_STATEMENT_KEY_FILE": write("statement_keys", queryStatementKey+"\n"),
	}
}

// withVars is lookup with vars over it; a value "" unsets the variable.
func withVars(lookup func(string) (string, bool), vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, v != ""
		}
		return lookup(k)
	}
}

// TestQueryOnceAsksTheFakeWeChat: against the fake WeChat over TLS and
// kfake, a SUCCESS answer is printed with its proven event and, with
// --publish, lands on the input topic signed, as a message the worker's
// decoder verifies and reads into the same event; the publication is
// audited. A forged answer exits 1 and publishes nothing; an order still
// unpaid exits 0 and is not published.
func TestQueryOnceAsksTheFakeWeChat(t *testing.T) {
	lookup, _ := opsEnv(t)
	w := fakechannel.MustWeChat(t, fakechannel.Options{})
	files := queryFiles(t, w)
	env := withVars(lookup, files)
	brokers, _ := lookup("PAYCB_KAFKA_BROKERS")

	paid := sample.NewTrade(channels.WeChat, 1)
	w.Script(paid, fakechannel.Step{}, fakechannel.Step{})
	out, errOut, err := runCmd(t, env, "query", "once", "--tenant", "1001", "--channel", "WECHAT", "--merchant-order-no", paid.MerchantOrderNo)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "answer: paid (outcome settled)")
	assert.Contains(t, out, "channel state: SUCCESS")
	assert.Contains(t, out, "event WECHAT:"+paid.TradeNo+":PAYMENT_RECEIVED PAYMENT_RECEIVED trade "+paid.TradeNo)
	assert.NotContains(t, out, "published")
	msgs, err := kafkaops.ReadAll(context.Background(), []string{brokers}, "channel-events")
	require.NoError(t, err)
	require.Empty(t, msgs, "nothing published without --publish")

	out, errOut, err = runCmd(t, env, "query", "once", "--tenant", "1001", "--channel", "WECHAT", "--merchant-order-no", paid.MerchantOrderNo, "--publish", "--json")
	require.NoError(t, err, errOut)
	var rep queryOnceJSON
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.True(t, rep.Verified)
	assert.True(t, rep.Published)
	assert.Equal(t, "paid", rep.Answer)
	assert.Equal(t, fakechannel.WeChatMerchantID, rep.MerchantID, "the tenant's one merchant with credentials")
	require.Len(t, rep.Events, 1)
	assert.Equal(t, paid.Total, rep.Events[0].OrderTotal)

	msgs, err = kafkaops.ReadAll(context.Background(), []string{brokers}, "channel-events")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, "WECHAT:"+paid.TradeNo, string(m.Key), "keyed as the trade's callback")
	stmtKeys, err := statementauth.Parse([]byte(queryStatementKey + "\n"))
	require.NoError(t, err)
	require.Len(t, m.Headers, 1)
	require.NoError(t, stmtKeys.Verify(m.Value, string(m.Headers[0].Value)), "signed with the statement key")
	pubKeys, err := channelkeys.Load(files["PAYCB_CHANNEL_PUBLIC_KEYS_FILE"])
	require.NoError(t, err)
	res, err := channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(stmtKeys), channels.VerifyQueryAnswers(pubKeys)).Decode(m.Value)
	require.NoError(t, err, "the worker reads it")
	assert.Equal(t, rep.Events[0].Key, string(res.Event.Key))

	dsn, _ := lookup("PAYCB_DB_DSN")
	db, err := sqldb.OpenMySQL(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var details []string
	require.NoError(t, db.NewRaw(`SELECT COALESCE(detail, '') FROM ss_operator_audit WHERE command = 'query once' AND result = 'ok'`).
		Scan(context.Background(), &details))
	require.Len(t, details, 1)
	assert.Contains(t, details[0], "WECHAT:"+paid.TradeNo+":PAYMENT_RECEIVED")

	// A refund query: its own amount, in fen, and nothing published
	// without --publish.
	w.ScriptRefund(paid, sample.Refund{No: "RF-1", Amount: 100})
	out, errOut, err = runCmd(t, env, "query", "once", "--tenant", "1001", "--channel", "WECHAT", "--trade-no", paid.TradeNo,
		"--merchant-order-no", paid.MerchantOrderNo, "--refund-no", "RF-1", "--json")
	require.NoError(t, err, errOut)
	var refund queryOnceJSON
	require.NoError(t, json.Unmarshal([]byte(out), &refund), out)
	assert.Equal(t, "REFUND", refund.Kind)
	assert.Equal(t, "refund_succeeded", refund.Answer)
	require.Len(t, refund.Events, 1)
	assert.Equal(t, "WECHAT:"+paid.TradeNo+":REFUND_SUCCEEDED:RF-1", refund.Events[0].Key)
	assert.Equal(t, int64(100), refund.Events[0].RefundAmount)
	assert.False(t, refund.Published)

	forged := sample.NewTrade(channels.WeChat, 2)
	w.Script(forged, fakechannel.Step{Forged: true})
	out, _, err = runCmd(t, env, "query", "once", "--tenant", "1001", "--channel", "WECHAT", "--merchant-order-no", forged.MerchantOrderNo, "--publish")
	require.Error(t, err)
	assert.Equal(t, 1, exitCode(err), "a forged answer")
	assert.Contains(t, out, "answer: unauthenticated: NOT VERIFIED")
	assert.Contains(t, out, "not published: the answer did not verify")

	unpaid := sample.NewTrade(channels.WeChat, 3)
	w.Script(unpaid, fakechannel.Step{Answer: fakechannel.Pending})
	out, errOut, err = runCmd(t, env, "query", "once", "--tenant", "1001", "--channel", "WECHAT", "--merchant-order-no", unpaid.MerchantOrderNo, "--publish")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "answer: not_yet (outcome pending)")
	assert.Contains(t, out, "channel state: NOTPAY")
	assert.Contains(t, out, "not published: the answer proves no payment or refund")

	msgs, err = kafkaops.ReadAll(context.Background(), []string{brokers}, "channel-events")
	require.NoError(t, err)
	assert.Len(t, msgs, 1, "neither the forged nor the unpaid answer was published")
}

// TestQueryOnceRefusesWhatCannotBeChecked: without credentials, with a
// merchant not in them or bound to another tenant, without the public
// keys of a channel that signs, and --publish without a statement key,
// query once exits 2 and asks nothing; no database is needed. A channel
// that does not answer exits 1.
func TestQueryOnceRefusesWhatCannotBeChecked(t *testing.T) {
	w := fakechannel.MustWeChat(t, fakechannel.Options{})
	files := queryFiles(t, w)
	binding := filepath.Join(t.TempDir(), "merchants")
	require.NoError(t, os.WriteFile(binding, []byte("2002 WECHAT "+fakechannel.WeChatMerchantID+"\n"), 0o600))
	tr := sample.NewTrade(channels.WeChat, 1)
	args := []string{"query", "once", "--tenant", "1001", "--channel", "WECHAT", "--merchant-order-no", tr.MerchantOrderNo}
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		extra []string
		code  int
		want  string
	}{
		{"no credentials file", map[string]string{"PAYCB_QUERY_CREDENTIALS_FILE": ""}, nil, 2, "PAYCB_QUERY_CREDENTIALS_FILE"},
		{"a credentials file that does not parse", map[string]string{"PAYCB_QUERY_CREDENTIALS_FILE": files["PAYCB_STATEMENT_KEY_FILE"]}, nil, 2, "query.credentials_file"},
		{"a merchant without credentials", nil, []string{"--merchant-id", "1900000999"}, 2, "no query credentials for tenant 1001"},
		{"a tenant without credentials", nil, []string{"--tenant", "1003"}, 2, "tenant 1003 has no WECHAT merchant"},
		{"a merchant bound to another tenant", map[string]string{"PAYCB_TENANT_MERCHANTS_FILE": binding}, []string{"--merchant-id", fakechannel.WeChatMerchantID}, 2, "not bound to tenant 1001"},
		{"no public keys", map[string]string{"PAYCB_CHANNEL_PUBLIC_KEYS_FILE": ""}, nil, 2, "PAYCB_CHANNEL_PUBLIC_KEYS_FILE"},
		{"publish without a statement key", map[string]string{"PAYCB_STATEMENT_KEY_FILE": ""}, []string{"--publish"}, 2, "PAYCB_STATEMENT_KEY_FILE"},
		{"neither number", nil, []string{"--merchant-order-no", ""}, 2, "--merchant-order-no or --trade-no"},
		{"an untrusted certificate", map[string]string{"PAYCB_QUERY_TLS_CA_FILE": ""}, nil, 1, "no answer from the channel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(w.Requests())
			vars := map[string]string{}
			for k, v := range files {
				vars[k] = v
			}
			for k, v := range tc.vars {
				vars[k] = v
			}
			_, errOut, err := runCmd(t, withVars(noEnv, vars), append(append([]string(nil), args...), tc.extra...)...)
			require.Error(t, err)
			assert.Equal(t, tc.code, exitCode(err), "%v / %s", err, errOut)
			msg := err.Error() + errOut
			assert.Contains(t, msg, tc.want)
			assert.NotContains(t, msg, "PRIVATE KEY", "no key material")
			if tc.code == 2 {
				assert.Len(t, w.Requests(), before, "nothing asked")
			}
		})
	}
}

// TestQueryOnceAsksShouqianbaWithoutPublicKeys: Shouqianba's answers are
// unsigned, so no PAYCB_CHANNEL_PUBLIC_KEYS_FILE is needed; TLS to the
// configured host is the answer's authentication. No database, no broker.
func TestQueryOnceAsksShouqianbaWithoutPublicKeys(t *testing.T) {
	q := fakechannel.MustSQB(t, fakechannel.Options{})
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	write("sqb.key", fakechannel.SQBTerminalKey+"\n")
	env := withVars(noEnv, map[string]string{
		"PAYCB_QUERY_TLS_CA_FILE": write("ca.pem", string(q.CertificatePEM())),
		"PAYCB_QUERY_SQB_URL":     q.URL(),
		"PAYCB_QUERY_CREDENTIALS_FILE": write("credentials.yaml", `- {tenant_id: 1001, channel: SQB, merchant_id: "`+
			fakechannel.SQBTerminalSN+`", terminal_key_file: sqb.key}
`),
	})
	tr := sample.NewTrade(channels.SQB, 1)
	q.Script(tr, fakechannel.Step{Answer: fakechannel.Closed})
	out, errOut, err := runCmd(t, env, "query", "once", "--tenant", "1001", "--channel", "SQB", "--merchant-order-no", tr.MerchantOrderNo)
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "answer: closed (outcome closed)")
	assert.Contains(t, out, "merchant "+fakechannel.SQBTerminalSN)
	reqs := q.Requests()
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].SignatureOK, reqs[0].SignatureError)
}
