package querytest

import (
	"crypto/rsa"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// The identities the kit's keys are configured for.
const (
	// WeChatSerial is the Wechatpay-Serial of the trusted WeChat key.
	WeChatSerial = "9AD59953ADF1BABB"
	// AlipayAppID is the application the trusted Alipay key is Alipay's
	// key of (the sample callbacks' app_id).
	AlipayAppID = "2021000000000000"
	// AlipayMerchant is the Alipay PID the sample callbacks name.
	AlipayMerchant = "2088101117955611"
	// SQBTerminal is the terminal_sn the sample Shouqianba callbacks name.
	SQBTerminal = "01939202039923029"
	// nonce is the Wechatpay-Nonce of the kit's WeChat answers.
	nonce = "5K8264ILTKCH16CQ2502SI8ZNMTM67VS"
)

// Kit signs answers and query messages.
type Kit struct {
	// Trusted signs answers that Keys verifies (WeChat platform key of
	// wechat.SampleMerchantID, Alipay key of AlipayAppID); Forger signs
	// answers that no configured key verifies.
	Trusted, Forger *rsa.PrivateKey
	// Keys are the channel public keys the worker is configured with.
	Keys channels.ChannelPublicKeys
	// KeysYAML is PAYCB_CHANNEL_PUBLIC_KEYS_FILE's text for Keys, its
	// key file named CertFile; CertPEM is that file's content.
	KeysYAML, CertFile string
	CertPEM            []byte
}

// testdata is the content of a file of a channel package's testdata/query.
func testdata(tb testing.TB, channel, name string) []byte {
	tb.Helper()
	_, self, _, ok := runtime.Caller(0)
	require.True(tb, ok)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", channel, "testdata", "query", name)) //nolint:gosec // the channel packages' own testdata
	require.NoError(tb, err)
	return b
}

// New returns the kit, its keys read from the channel packages' testdata.
func New(tb testing.TB) Kit {
	tb.Helper()
	trusted, err := wechat.ParsePrivateKey(testdata(tb, "wechat", "a3_private_key.pem"))
	require.NoError(tb, err)
	a1 := strings.ReplaceAll(string(testdata(tb, "wechat", "a1_signer_testing_key.pem")), "TESTING KEY", "PRIVATE KEY")
	forger, err := wechat.ParsePrivateKey([]byte(a1))
	require.NoError(tb, err)
	cert := testdata(tb, "wechat", "a3_certificate.pem")
	entries := []channels.PublicKeyEntry{
		{Channel: wechat.Code, MerchantID: wechat.SampleMerchantID, KeyID: WeChatSerial, PublicKeyFile: "platform.pem"},
		{Channel: alipay.Code, AppID: AlipayAppID, PublicKeyFile: "platform.pem"},
	}
	keys, err := channels.NewChannelPublicKeys(entries, [][]byte{cert, cert})
	require.NoError(tb, err)
	yaml := "- {channel: WECHAT, merchant_id: \"" + wechat.SampleMerchantID + "\", key_id: " + WeChatSerial + ", public_key_file: platform.pem}\n" +
		"- {channel: ALIPAY, app_id: \"" + AlipayAppID + "\", public_key_file: platform.pem}\n"
	return Kit{Trusted: trusted, Forger: forger, Keys: keys, KeysYAML: yaml, CertFile: "platform.pem", CertPEM: cert}
}

// Answer is one answer to carry: the target asked, the answer's status,
// headers and body, and when it was received.
type Answer struct {
	Target     channels.QueryTarget
	Status     int
	Header     map[string][]string
	Body       []byte
	ReceivedAt time.Time
}

// Value is the query envelope carrying a (asked a second before it was
// received), with the headers the channel's verification reads.
func (a Answer) Value(tb testing.TB) []byte {
	tb.Helper()
	spec, ok := channels.Lookup(a.Target.Channel)
	require.True(tb, ok)
	status := a.Status
	if status == 0 {
		status = 200
	}
	v, err := channels.QueryEnvelope(a.Target, a.ReceivedAt.Add(-time.Second),
		channels.QueryResponse{StatusCode: status, Header: a.Header, Body: a.Body, ReceivedAt: a.ReceivedAt}, spec.QueryAnswerHeaders)
	require.NoError(tb, err)
	return v
}

// WeChatPayment is WeChat's answer to a payment query about t, in
// trade_state state, signed with key at signedAt (its Wechatpay-Timestamp)
// and received at receivedAt.
func (k Kit) WeChatPayment(tb testing.TB, t sample.Trade, state string, key *rsa.PrivateKey, signedAt, receivedAt time.Time) Answer {
	tb.Helper()
	t = t.WithDefaults()
	body := wechat.SamplePaymentAnswer(t, state)
	h, err := wechat.SignAnswer(key, WeChatSerial, signedAt, nonce, body)
	require.NoError(tb, err)
	return Answer{
		Target: channels.QueryTarget{
			TenantID: t.TenantID, Channel: wechat.Code, Kind: channels.QueryPayment,
			MerchantID: wechat.SampleMerchantID, MerchantOrderNo: t.MerchantOrderNo,
		},
		Header: h, Body: body, ReceivedAt: receivedAt,
	}
}

// AlipayPayment is Alipay's answer to alipay.trade.query about t in
// trade_status status, signed with key (nil: unsigned), received at
// receivedAt.
func (k Kit) AlipayPayment(tb testing.TB, t sample.Trade, status string, key *rsa.PrivateKey, receivedAt time.Time) Answer {
	tb.Helper()
	t = t.WithDefaults()
	body, err := alipay.SampleTradeQueryAnswer(t, status, key)
	require.NoError(tb, err)
	return Answer{
		Target: channels.QueryTarget{
			TenantID: t.TenantID, Channel: alipay.Code, Kind: channels.QueryPayment,
			MerchantID: AlipayMerchant, MerchantOrderNo: t.MerchantOrderNo, TradeNo: t.TradeNo,
		},
		Body: body, ReceivedAt: receivedAt,
	}
}

// SQBOrder is Shouqianba's answer to a query of kind (refundNo for a
// refund) about the order whose callback body is order (the answer's data
// has the callback's fields), received at receivedAt.
func (k Kit) SQBOrder(t sample.Trade, kind channels.QueryKind, refundNo string, order []byte, receivedAt time.Time) Answer {
	t = t.WithDefaults()
	return Answer{
		Target: channels.QueryTarget{
			TenantID: t.TenantID, Channel: sqb.Code, Kind: kind, MerchantID: SQBTerminal,
			TradeNo: t.TradeNo, MerchantOrderNo: t.MerchantOrderNo, RefundNo: refundNo,
		},
		Body:       []byte(`{"result_code":"200","biz_response":{"result_code":"SUCCESS","data":` + string(order) + `}}`),
		ReceivedAt: receivedAt,
	}
}
