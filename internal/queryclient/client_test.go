package queryclient_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/internal/queryclient"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

const tenant = 1001

// fakes are the three fake channels and what a test needs of each.
type fakes struct {
	keys   *fakechannel.Keys
	wechat *fakechannel.WeChat
	alipay *fakechannel.Alipay
	sqb    *fakechannel.SQB
}

func startFakes(t *testing.T) fakes {
	t.Helper()
	keys, err := fakechannel.SharedKeys()
	require.NoError(t, err)
	return fakes{
		keys:   keys,
		wechat: fakechannel.MustWeChat(t, fakechannel.Options{}),
		alipay: fakechannel.MustAlipay(t, fakechannel.Options{}),
		sqb:    fakechannel.MustSQB(t, fakechannel.Options{}),
	}
}

// trusting is a pool that trusts the fakes' certificate (every httptest
// TLS server has the same one).
func (f fakes) trusting() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(f.wechat.Certificate())
	return pool
}

func (f fakes) baseURLs() map[channels.Channel]string {
	return map[channels.Channel]string{
		wechat.Code: f.wechat.URL(), alipay.Code: f.alipay.GatewayURL(), sqb.Code: f.sqb.URL(),
	}
}

// creds are the test merchant's credentials on every channel, signing with
// key (and the SQB terminal key termKey).
func creds(k *fakechannel.Keys, key *rsa.PrivateKey, termKey string) queryclient.CredentialsFunc {
	list := map[channels.Channel]channels.QueryCredentials{
		wechat.Code: k.WeChatCredentials(tenant, key),
		alipay.Code: k.AlipayCredentials(tenant, key),
		sqb.Code:    fakechannel.SQBCredentials(tenant, termKey),
	}
	return func(tenantID int64, ch channels.Channel, merchantID string) (channels.QueryCredentials, bool) {
		c, ok := list[ch]
		if !ok || tenantID != c.QueryTenantID() || merchantID != c.QueryMerchantID() {
			return nil, false
		}
		return c, true
	}
}

func (f fakes) client(t *testing.T, cfg queryclient.Config, src queryclient.CredentialSource) *queryclient.Client {
	t.Helper()
	if cfg.BaseURLs == nil {
		cfg.BaseURLs = f.baseURLs()
	}
	if cfg.RootCAs == nil {
		cfg.RootCAs = f.trusting()
	}
	if src == nil {
		src = creds(f.keys, f.keys.Merchant, fakechannel.SQBTerminalKey)
	}
	c, err := queryclient.New(cfg, src)
	require.NoError(t, err)
	return c
}

func target(ch channels.Channel, tr sample.Trade) channels.QueryTarget {
	m := map[channels.Channel]string{
		wechat.Code: fakechannel.WeChatMerchantID, alipay.Code: fakechannel.AlipayMerchantID, sqb.Code: fakechannel.SQBTerminalSN,
	}
	return channels.QueryTarget{TenantID: tenant, Channel: ch, Kind: channels.QueryPayment, MerchantID: m[ch], MerchantOrderNo: tr.MerchantOrderNo}
}

// read reads resp with the channel's own reader.
func (f fakes) read(t *testing.T, tg channels.QueryTarget, resp channels.QueryResponse) channels.QueryAnswer {
	t.Helper()
	var (
		ans channels.QueryAnswer
		err error
	)
	switch tg.Channel {
	case wechat.Code:
		ans, err = wechat.ReadAnswer(tg, resp, f.keys.WeChatPublicKeys(), time.Now())
	case alipay.Code:
		ans, err = alipay.ReadAnswer(tg, resp, f.keys.AlipayPublicKey())
	case sqb.Code:
		ans, err = sqb.DecodeQueryAnswer(tg, resp)
	}
	require.NoError(t, err)
	return ans
}

func (f fakes) server(ch channels.Channel) interface {
	Script(sample.Trade, ...fakechannel.Step)
	Requests() []fakechannel.Request
} {
	switch ch {
	case wechat.Code:
		return f.wechat
	case alipay.Code:
		return f.alipay
	}
	return f.sqb
}

// TestQueryEveryChannel: each channel's request, built through its Spec
// with the credentials found for the target, is accepted by its fake (the
// signature checked) and the answer, handed back as received, reads back
// through the channel's reader as the payment scripted.
func TestQueryEveryChannel(t *testing.T) {
	f := startFakes(t)
	c := f.client(t, queryclient.Config{}, nil)
	for _, ch := range []channels.Channel{wechat.Code, alipay.Code, sqb.Code} {
		t.Run(string(ch), func(t *testing.T) {
			tr := sample.NewTrade(ch, 1)
			f.server(ch).Script(tr, fakechannel.Step{Answer: fakechannel.Pending}, fakechannel.Step{})
			tg := target(ch, tr)
			before := time.Now()
			resp, err := c.Query(context.Background(), tg)
			require.NoError(t, err)
			require.Equal(t, channels.QueryPending, f.read(t, tg, resp).Outcome)
			resp, err = c.Query(context.Background(), tg)
			require.NoError(t, err)
			require.False(t, resp.ReceivedAt.Before(before))
			ans := f.read(t, tg, resp)
			require.Equal(t, channels.QuerySettled, ans.Outcome, ans.Detail)
			require.Equal(t, tr.TradeNo, ans.Events[0].TradeNo)
			reqs := f.server(ch).Requests()
			require.Len(t, reqs, 2)
			for _, r := range reqs {
				require.True(t, r.SignatureOK, r.SignatureError)
				require.NotEmpty(t, r.Header.Get("User-Agent"))
			}
		})
	}
}

// TestWrongKeyRefusedByChannel: a request signed with a key the channel
// does not know is sent, refused by the fake, and the refusal is handed
// back as an answer (not an error): the channel's reader says refused.
func TestWrongKeyRefusedByChannel(t *testing.T) {
	f := startFakes(t)
	c := f.client(t, queryclient.Config{}, creds(f.keys, f.keys.Other, "0000000000000000000000000000beef"))
	for _, ch := range []channels.Channel{wechat.Code, alipay.Code, sqb.Code} {
		t.Run(string(ch), func(t *testing.T) {
			tr := sample.NewTrade(ch, 2)
			f.server(ch).Script(tr)
			tg := target(ch, tr)
			resp, err := c.Query(context.Background(), tg)
			require.NoError(t, err)
			require.Equal(t, channels.QueryRefused, f.read(t, tg, resp).Outcome)
			reqs := f.server(ch).Requests()
			require.Len(t, reqs, 1)
			require.False(t, reqs[0].SignatureOK)
		})
	}
}

// TestNothingSent: no credentials, no base URL, an unregistered channel or
// a target the builder refuses send nothing.
func TestNothingSent(t *testing.T) {
	f := startFakes(t)
	c := f.client(t, queryclient.Config{BaseURLs: map[channels.Channel]string{wechat.Code: f.wechat.URL()}}, nil)
	tr := sample.NewTrade(wechat.Code, 3)
	tg := target(wechat.Code, tr)

	other := tg
	other.MerchantID = "1900000999"
	_, err := c.Query(context.Background(), other)
	require.ErrorIs(t, err, queryclient.ErrNoCredentials)

	_, err = c.Query(context.Background(), target(alipay.Code, tr))
	require.ErrorIs(t, err, queryclient.ErrNotQueryable)

	unknown := tg
	unknown.Channel = "UNIONPAY"
	_, err = c.Query(context.Background(), unknown)
	require.ErrorIs(t, err, queryclient.ErrNotQueryable)

	bad := tg
	bad.MerchantOrderNo = ""
	_, err = c.Query(context.Background(), bad)
	require.ErrorIs(t, err, queryclient.ErrBuild)

	require.Empty(t, f.wechat.Requests())
}

// TestUntrustedCertificate: the system roots do not trust the fake's
// certificate: the TLS handshake fails, no request reaches the fake.
func TestUntrustedCertificate(t *testing.T) {
	f := startFakes(t)
	c, err := queryclient.New(queryclient.Config{BaseURLs: f.baseURLs()}, creds(f.keys, f.keys.Merchant, fakechannel.SQBTerminalKey))
	require.NoError(t, err)
	tr := sample.NewTrade(wechat.Code, 4)
	f.wechat.Script(tr)
	_, err = c.Query(context.Background(), target(wechat.Code, tr))
	require.ErrorIs(t, err, queryclient.ErrTransport)
	require.ErrorContains(t, err, "certificate")
	require.Empty(t, f.wechat.Requests())
}

// TestPlainHTTPRefused: an http base URL is refused when the client is
// made.
func TestPlainHTTPRefused(t *testing.T) {
	_, err := queryclient.New(queryclient.Config{BaseURLs: map[channels.Channel]string{wechat.Code: "http://127.0.0.1:1"}},
		queryclient.CredentialsFunc(func(int64, channels.Channel, string) (channels.QueryCredentials, bool) { return nil, false }))
	require.ErrorContains(t, err, "not an https URL")
}

// TestRedirectNotFollowed: a redirect to the real fake is an error, and
// the fake never sees the request.
func TestRedirectNotFollowed(t *testing.T) {
	f := startFakes(t)
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, f.wechat.URL()+r.RequestURI, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	c := f.client(t, queryclient.Config{BaseURLs: map[channels.Channel]string{wechat.Code: redirector.URL}}, nil)
	tr := sample.NewTrade(wechat.Code, 5)
	f.wechat.Script(tr)
	_, err := c.Query(context.Background(), target(wechat.Code, tr))
	require.ErrorIs(t, err, queryclient.ErrRedirect)
	require.NotErrorIs(t, err, queryclient.ErrTransport)
	require.Empty(t, f.wechat.Requests())
}

// TestBodyCap: a body of exactly MaxBody bytes is handed back, one byte
// more is refused.
func TestBodyCap(t *testing.T) {
	f := startFakes(t)
	const limit = 4096
	size := limit
	var mu sync.Mutex
	big := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n := size
		mu.Unlock()
		_, _ = w.Write([]byte(strings.Repeat("x", n)))
	}))
	t.Cleanup(big.Close)
	c := f.client(t, queryclient.Config{BaseURLs: map[channels.Channel]string{sqb.Code: big.URL}, MaxBody: limit}, nil)
	tg := target(sqb.Code, sample.NewTrade(sqb.Code, 6))
	resp, err := c.Query(context.Background(), tg)
	require.NoError(t, err)
	require.Len(t, resp.Body, limit)
	mu.Lock()
	size = limit + 1
	mu.Unlock()
	_, err = c.Query(context.Background(), tg)
	require.ErrorIs(t, err, queryclient.ErrTooLarge)
}

// TestTimeout: an answer held back past the client's timeout is a
// transport error that Timeout recognises; the fake saw the request.
func TestTimeout(t *testing.T) {
	f := startFakes(t)
	c := f.client(t, queryclient.Config{Timeout: time.Second}, nil)
	tr := sample.NewTrade(alipay.Code, 7)
	f.alipay.Script(tr, fakechannel.Step{Delay: time.Minute})
	resp, err := c.Query(context.Background(), target(alipay.Code, tr))
	require.ErrorIs(t, err, queryclient.ErrTransport, "answered HTTP %d: %s", resp.StatusCode, resp.Body)
	require.True(t, queryclient.Timeout(err), "%v", err)
	require.Len(t, f.alipay.Requests(), 1)
}

// TestRefusedConnection: nothing listening is a transport error, not a
// timeout.
func TestRefusedConnection(t *testing.T) {
	f := startFakes(t)
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	c := f.client(t, queryclient.Config{BaseURLs: map[channels.Channel]string{sqb.Code: url}}, nil)
	_, err := c.Query(context.Background(), target(sqb.Code, sample.NewTrade(sqb.Code, 8)))
	require.ErrorIs(t, err, queryclient.ErrTransport)
	require.False(t, queryclient.Timeout(err))
}

// TestConcurrentQueries: one client serves many goroutines at once; every
// query is answered and recorded once.
func TestConcurrentQueries(t *testing.T) {
	f := startFakes(t)
	c := f.client(t, queryclient.Config{}, nil)
	const n = 16
	trades := make([]sample.Trade, n)
	for i := range trades {
		trades[i] = sample.NewTrade(wechat.Code, 100+i)
		f.wechat.Script(trades[i])
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Query(context.Background(), target(wechat.Code, trades[i]))
			if err == nil && resp.StatusCode != http.StatusOK {
				err = &statusError{resp.StatusCode}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	reqs := f.wechat.Requests()
	require.Len(t, reqs, n)
	nonces := map[string]bool{}
	for _, r := range reqs {
		require.True(t, r.SignatureOK, r.SignatureError)
		nonces[r.Header.Get("Authorization")] = true
	}
	require.Len(t, nonces, n, "every request has its own nonce and signature")
}

type statusError struct{ code int }

func (e *statusError) Error() string { return http.StatusText(e.code) }

// TestCAFile: the system roots plus a CA file trust the fake; a file with
// no certificate, or none at all, is an error.
func TestCAFile(t *testing.T) {
	f := startFakes(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(good, f.wechat.CertificatePEM(), 0o600))
	pool, err := queryclient.SystemRootsWith(good)
	require.NoError(t, err)
	c := f.client(t, queryclient.Config{RootCAs: pool}, nil)
	tr := sample.NewTrade(sqb.Code, 9)
	f.sqb.Script(tr)
	_, err = c.Query(context.Background(), target(sqb.Code, tr))
	require.NoError(t, err)

	bad := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o600))
	_, err = queryclient.SystemRootsWith(bad)
	require.ErrorContains(t, err, "no PEM certificate")
	_, err = queryclient.SystemRootsWith(filepath.Join(dir, "missing.pem"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
