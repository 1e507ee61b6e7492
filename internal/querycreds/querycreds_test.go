package querycreds_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/queryclient"
	"github.com/paycallback/paycallback/internal/querycreds"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// secret marks key material: no error may contain it.
const secret = "TOPSECRETKEYMATERIAL"

// dir writes the test merchant's key files into a fresh directory (the
// Alipay key under keys/, the SQB key at an absolute path elsewhere) and
// returns it and the list naming them.
func setup(t *testing.T) (dir, list string) {
	t.Helper()
	keys, err := fakechannel.SharedKeys()
	require.NoError(t, err)
	dir = t.TempDir()
	elsewhere := t.TempDir()
	write(t, filepath.Join(dir, "wechat.pem"), string(fakechannel.PrivateKeyPEM(keys.Merchant)))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "keys"), 0o700))
	write(t, filepath.Join(dir, "keys", "alipay.pem"), string(fakechannel.PrivateKeyPEM(keys.Merchant)))
	sqbKey := filepath.Join(elsewhere, "sqb_terminal.key")
	write(t, sqbKey, fakechannel.SQBTerminalKey+"\n")
	list = `# the querier's credentials
- {tenant_id: 1001, channel: WECHAT, merchant_id: "` + fakechannel.WeChatMerchantID + `",
   serial_no: "` + fakechannel.WeChatSerialNo + `", private_key_file: wechat.pem}
- tenant_id: 1001
  channel: ALIPAY
  merchant_id: "` + fakechannel.AlipayMerchantID + `"
  app_id: "` + fakechannel.AlipayAppID + `"
  private_key_file: keys/alipay.pem
- {tenant_id: 1001, channel: SQB, merchant_id: "` + fakechannel.SQBTerminalSN + `", terminal_key_file: ` + sqbKey + `}
`
	write(t, filepath.Join(dir, "credentials.yaml"), list)
	return dir, list
}

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

// TestLoad: every channel's entry is read, relative paths against the
// list's directory (not the working directory), and the credentials sign
// requests their fakes accept.
func TestLoad(t *testing.T) {
	dir, _ := setup(t)
	s, err := querycreds.Load(filepath.Join(dir, "credentials.yaml"))
	require.NoError(t, err)
	require.Equal(t, 3, s.Len())
	c, ok := s.Lookup(1001, wechat.Code, fakechannel.WeChatMerchantID)
	require.True(t, ok)
	require.IsType(t, wechat.Credentials{}, c)
	_, ok = s.Lookup(1002, wechat.Code, fakechannel.WeChatMerchantID)
	require.False(t, ok, "another tenant's")
	_, ok = s.Lookup(1001, alipay.Code, fakechannel.WeChatMerchantID)
	require.False(t, ok, "another channel's")
	sc, ok := s.Lookup(1001, sqb.Code, fakechannel.SQBTerminalSN)
	require.True(t, ok)
	require.Equal(t, fakechannel.SQBTerminalKey, sc.(sqb.Credentials).TerminalKey)
	require.Equal(t, []string{fakechannel.WeChatMerchantID}, s.Merchants(1001, wechat.Code))
	require.Empty(t, s.Merchants(1002, wechat.Code), "another tenant's")

	// The credentials as loaded sign requests the fakes accept.
	w := fakechannel.MustWeChat(t, fakechannel.Options{})
	a := fakechannel.MustAlipay(t, fakechannel.Options{})
	q := fakechannel.MustSQB(t, fakechannel.Options{})
	pool, _ := queryclient.SystemRootsWith("")
	pool.AddCert(w.Certificate())
	client, err := queryclient.New(queryclient.Config{
		BaseURLs: map[channels.Channel]string{wechat.Code: w.URL(), alipay.Code: a.GatewayURL(), sqb.Code: q.URL()},
		RootCAs:  pool,
	}, s)
	require.NoError(t, err)
	merchants := map[channels.Channel]string{
		wechat.Code: fakechannel.WeChatMerchantID, alipay.Code: fakechannel.AlipayMerchantID, sqb.Code: fakechannel.SQBTerminalSN,
	}
	for ch, m := range merchants {
		_, err := client.Query(context.Background(), channels.QueryTarget{
			TenantID: 1001, Channel: ch, Kind: channels.QueryPayment, MerchantID: m, MerchantOrderNo: sample.NewTrade(ch, 1).MerchantOrderNo,
		})
		require.NoError(t, err, ch)
	}
	for _, reqs := range [][]fakechannel.Request{w.Requests(), a.Requests(), q.Requests()} {
		require.Len(t, reqs, 1)
		require.True(t, reqs[0].SignatureOK, reqs[0].SignatureError)
	}
}

// TestRefused: each kind of bad list is refused with an error naming the
// entry and what is wrong, never key material.
func TestRefused(t *testing.T) {
	dir, good := setup(t)
	write(t, filepath.Join(dir, "bad.pem"), "-----BEGIN PRIVATE KEY-----\n"+secret+"\n-----END PRIVATE KEY-----\n")
	write(t, filepath.Join(dir, "bad.key"), secret+"\n"+secret+"\n")
	wechatEntry := `- {tenant_id: 1001, channel: WECHAT, merchant_id: "1230000109", serial_no: "ABC", private_key_file: wechat.pem`
	for name, tc := range map[string]struct{ list, want string }{
		"not a list":       {`tenant_id: 1001`, "want a YAML list"},
		"empty list":       {`[]`, "no entries"},
		"not YAML":         {"- {tenant_id: [", "not YAML"},
		"unknown field":    {wechatEntry + `, app_id: "x"}`, "entry 1 (line 1): WECHAT credentials of merchant \"1230000109\": unknown field(s) app_id"},
		"missing field":    {`- {tenant_id: 1001, channel: WECHAT, merchant_id: "1230000109", private_key_file: wechat.pem}`, "missing serial_no"},
		"no tenant":        {`- {channel: WECHAT, merchant_id: "1230000109"}`, "tenant_id is missing"},
		"bad tenant":       {`- {tenant_id: -3, channel: WECHAT, merchant_id: "1230000109"}`, "not a positive integer"},
		"unknown channel":  {`- {tenant_id: 1001, channel: wechat, merchant_id: "1230000109"}`, "cannot be queried"},
		"no merchant":      {`- {tenant_id: 1001, channel: SQB, terminal_key_file: bad.key}`, "merchant_id"},
		"field twice":      {`- {tenant_id: 1001, tenant_id: 1002, channel: SQB}`, "twice"},
		"list value":       {`- {tenant_id: 1001, channel: SQB, merchant_id: [a, b]}`, "single value"},
		"missing key file": {`- {tenant_id: 1001, channel: SQB, merchant_id: "T1", terminal_key_file: nope.key}`, "no such file"},
		"bad pem":          {`- {tenant_id: 1001, channel: ALIPAY, merchant_id: "2088", app_id: "2021", private_key_file: bad.pem}`, "entry 1"},
		"bad terminal key": {`- {tenant_id: 1001, channel: SQB, merchant_id: "T1", terminal_key_file: bad.key}`, "line break"},
		"listed twice":     {good + firstEntry(good), "listed twice"},
		"two tenants":      {good + strings.ReplaceAll(firstEntry(good), "1001", "1002"), "tenants 1001 and 1002"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := querycreds.Parse([]byte(tc.list), dir)
			require.ErrorIs(t, err, querycreds.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), secret)
		})
	}
}

// firstEntry is the first entry of the list setup writes (the WeChat one,
// two lines after the comment).
func firstEntry(list string) string {
	lines := strings.SplitAfter(list, "\n")
	return lines[1] + lines[2]
}

// TestRefresh: a rotated key file (the list itself unchanged) is taken on
// Refresh; a broken list leaves the last good credentials in force and is
// reported once; the fixed list is taken again.
func TestRefresh(t *testing.T) {
	dir, list := setup(t)
	path := filepath.Join(dir, "credentials.yaml")
	f, err := querycreds.Open(path)
	require.NoError(t, err)
	changed, err := f.Refresh()
	require.NoError(t, err)
	require.False(t, changed)

	sqbKeyFile := strings.TrimSuffix(strings.SplitN(list, "terminal_key_file: ", 2)[1], "}\n")
	write(t, sqbKeyFile, "0123456789abcdef0123456789abcdef\n")
	changed, err = f.Refresh()
	require.NoError(t, err)
	require.True(t, changed)
	c, _ := f.Lookup(1001, sqb.Code, fakechannel.SQBTerminalSN)
	require.Equal(t, "0123456789abcdef0123456789abcdef", c.(sqb.Credentials).TerminalKey)

	write(t, path, list+"- {tenant_id: 1001, channel: SQB}\n")
	_, err = f.Refresh()
	require.ErrorContains(t, err, "last good credentials stay in force")
	_, err = f.Refresh()
	require.NoError(t, err, "the same failure is reported once")
	_, ok := f.Lookup(1001, wechat.Code, fakechannel.WeChatMerchantID)
	require.True(t, ok)

	write(t, path, list)
	changed, err = f.Refresh()
	require.NoError(t, err)
	require.False(t, changed, "the same contents as the last good ones")
}

// TestConcurrentLookup: lookups never see a half-made reading while the
// files change and Refresh runs (run with -race).
func TestConcurrentLookup(t *testing.T) {
	dir, list := setup(t)
	path := filepath.Join(dir, "credentials.yaml")
	f, err := querycreds.Open(path)
	require.NoError(t, err)
	sqbKeyFile := strings.TrimSuffix(strings.SplitN(list, "terminal_key_file: ", 2)[1], "}\n")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if f.Current().Len() != 3 {
					panic("a reading without every entry")
				}
				if _, ok := f.Lookup(1001, sqb.Code, fakechannel.SQBTerminalSN); !ok {
					panic("the terminal went missing")
				}
			}
		}()
	}
	for i := range 20 {
		write(t, sqbKeyFile, strings.Repeat(string(rune('a'+i%6)), 32)+"\n")
		_, err := f.Refresh()
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
}

// TestWatch: Watch takes a rotated key within its interval, logs the
// reload and a refused list by path, never their contents, and stops with
// its context.
func TestWatch(t *testing.T) {
	dir, list := setup(t)
	path := filepath.Join(dir, "credentials.yaml")
	f, err := querycreds.Open(path)
	require.NoError(t, err)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Watch(ctx, 5*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	sqbKeyFile := strings.TrimSuffix(strings.SplitN(list, "terminal_key_file: ", 2)[1], "}\n")
	write(t, sqbKeyFile, secret+"\n")
	require.Eventually(t, func() bool {
		c, _ := f.Lookup(1001, sqb.Code, fakechannel.SQBTerminalSN)
		return c.(sqb.Credentials).TerminalKey == secret
	}, 10*time.Second, 5*time.Millisecond)
	write(t, path, list+"- {tenant_id: 1001, channel: SQB, merchant_id: x, terminal_key_file: "+sqbKeyFile+", terminal_key: "+secret+"}\n")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "query credentials refused") }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-done
	out := logs.String()
	require.Contains(t, out, "query credentials reloaded")
	require.Contains(t, out, path)
	require.NotContains(t, out, secret)
}

// syncBuffer is a bytes.Buffer safe for the watcher's and the test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
