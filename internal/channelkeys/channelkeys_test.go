package channelkeys_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/pkg/channels"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/querytest"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "channels", "wechat", "testdata", "query", name))
	require.NoError(t, err)
	return b
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// TestLoadTheContractsExample: the contract's example, its key files
// relative to the YAML, loads one key per entry, each of its channel's
// type; an absolute key path loads too.
func TestLoadTheContractsExample(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "wechatpay_pub.pem"), testdata(t, "a3_certificate.pem"))
	write(t, filepath.Join(dir, "alipay_pub.pem"), testdata(t, "a1_verifier_public_key.pem"))
	path := filepath.Join(dir, "keys.yaml")
	write(t, path, []byte(`# PAYCB_CHANNEL_PUBLIC_KEYS_FILE (public: the worker's)
- {channel: WECHAT, merchant_id: "1900000100", key_id: "PUB_KEY_ID_0119000000000000000000000000000",
   public_key_file: wechatpay_pub.pem}    # key_id: the public-key id or the platform certificate serial
- {channel: ALIPAY, app_id: "2021000000000000", public_key_file: `+filepath.Join(dir, "alipay_pub.pem")+`}
`))
	f, err := channelkeys.Load(path)
	require.NoError(t, err)
	keys := f.Current()
	assert.Equal(t, 2, keys.Len())
	require.Len(t, keys.Of(channels.WeChat), 1)
	wk, ok := keys.Of(channels.WeChat)[0].(wechat.PublicKey)
	require.True(t, ok)
	assert.Equal(t, "1900000100", wk.MerchantID)
	assert.Equal(t, "PUB_KEY_ID_0119000000000000000000000000000", wk.KeyID)
	assert.Len(t, keys.Of(channels.Alipay), 1)
	assert.Empty(t, keys.Of(channels.SQB))

	write(t, path, nil)
	changed, err := f.Refresh()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Zero(t, f.Current().Len(), "an empty file holds no key")
}

// TestLoadRefuses: each bad file is refused with a message that says what
// is wrong.
func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "pub.pem"), testdata(t, "a3_certificate.pem"))
	write(t, filepath.Join(dir, "private.pem"), testdata(t, "a3_private_key.pem"))
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown field":    {`- {channel: WECHAT, merchant_id: "1", key_id: K, public_key_file: pub.pem, serial: X}`, "field serial not found"},
		"unknown channel":  {`- {channel: PAYPAL, merchant_id: "1", public_key_file: pub.pem}`, "unknown channel"},
		"lower-case code":  {`- {channel: wechat, merchant_id: "1", key_id: K, public_key_file: pub.pem}`, "unknown channel"},
		"SQB takes no key": {`- {channel: SQB, merchant_id: "1", public_key_file: pub.pem}`, "does not sign its query answers"},
		"no channel":       {`- {merchant_id: "1", public_key_file: pub.pem}`, "no channel"},
		"no key file":      {`- {channel: WECHAT, merchant_id: "1", key_id: K}`, "no public_key_file"},
		"missing key file": {`- {channel: WECHAT, merchant_id: "1", key_id: K, public_key_file: gone.pem}`, "gone.pem"},
		"a private key":    {`- {channel: WECHAT, merchant_id: "1", key_id: K, public_key_file: private.pem}`, "PRIVATE KEY"},
		"wechat no key_id": {`- {channel: WECHAT, merchant_id: "1", public_key_file: pub.pem}`, "key_id is missing"},
		"wechat with app":  {`- {channel: WECHAT, merchant_id: "1", key_id: K, app_id: A, public_key_file: pub.pem}`, "app_id"},
		"alipay no app_id": {`- {channel: ALIPAY, public_key_file: pub.pem}`, "app_id is missing"},
		"alipay merchant":  {`- {channel: ALIPAY, app_id: A, merchant_id: "1", public_key_file: pub.pem}`, "app_id only"},
		"repeated entry":   {"- {channel: ALIPAY, app_id: A, public_key_file: pub.pem}\n- {channel: ALIPAY, app_id: A, public_key_file: pub.pem}", "repeats entry 1"},
		"not a list":       {`channel: WECHAT`, "cannot unmarshal"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "keys.yaml")
			write(t, path, []byte(tc.yaml))
			_, err := channelkeys.Load(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), path)
		})
	}
}

// TestReloadFollowsTheKeyFiles: replacing a key file, the YAML unchanged,
// is a change: the decoder reading the File verifies with the new key at
// once; a broken key file keeps the last good keys in force.
func TestReloadFollowsTheKeyFiles(t *testing.T) {
	kit := querytest.New(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "platform.pem")
	write(t, keyPath, kit.CertPEM)
	path := filepath.Join(dir, "keys.yaml")
	write(t, path, []byte(kit.KeysYAML))
	f, err := channelkeys.Load(path)
	require.NoError(t, err)
	dec := channels.NewDecoder(nil, channels.VerifyQueryAnswers(f))
	at := channelstest.BaseTime.Add(time.Minute)
	value := kit.WeChatPayment(t, channelstest.NewTrade(channels.WeChat, 91), "SUCCESS", kit.Trusted, at, at).Value(t)
	_, err = dec.Decode(value)
	require.NoError(t, err, "verified with the configured key")

	write(t, keyPath, testdata(t, "a1_verifier_public_key.pem"))
	changed, err := f.Refresh()
	require.NoError(t, err)
	require.True(t, changed, "a key file's change is the File's change")
	_, err = dec.Decode(value)
	kind, _ := channels.KindOf(err)
	assert.Equal(t, channels.KindUnauthenticated, kind, "the key is no longer trusted")

	write(t, keyPath, []byte("not a key"))
	_, err = f.Refresh()
	require.Error(t, err)
	assert.Equal(t, 2, f.Current().Len(), "the last good keys stay")
	write(t, keyPath, kit.CertPEM)
	_, err = f.Refresh()
	require.NoError(t, err)
	_, err = dec.Decode(value)
	require.NoError(t, err)
}
