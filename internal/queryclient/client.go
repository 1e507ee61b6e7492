package queryclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds one query, from dialling to the last byte of
	// the answer. The channels answer queries in well under a second; a
	// query that takes longer is asked again later rather than waited for.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBody caps an answer's body. The channels' query answers
	// are a few kilobytes (WeChat's signed sample is 2,168 bytes).
	DefaultMaxBody = 1 << 20
	// DefaultUserAgent is the User-Agent of a request whose builder sets
	// none (WeChat asks API clients to send one).
	DefaultUserAgent = "paycallback-querier"
	// dialTimeout and handshakeTimeout bound connecting; each is also cut
	// short by Timeout.
	dialTimeout      = 5 * time.Second
	handshakeTimeout = 5 * time.Second
)

// Errors Query returns; each is wrapped with what was asked.
var (
	// ErrNoCredentials: no credentials are configured for the target's
	// tenant, channel and merchant. Nothing was sent.
	ErrNoCredentials = errors.New("no query credentials for the merchant")
	// ErrNotQueryable: the target's channel is not registered, has no
	// query builder, or no base URL is configured for it. Nothing was
	// sent.
	ErrNotQueryable = errors.New("channel cannot be queried")
	// ErrBuild: the channel's builder refused the target or the
	// credentials (a missing number, another tenant's merchant). Nothing
	// was sent.
	ErrBuild = errors.New("query request cannot be built")
	// ErrTransport: no answer came (refused or reset connection, DNS, TLS
	// failure or an untrusted certificate, a timeout, a body cut short).
	// The channel may or may not have seen the request; a query changes
	// nothing there, so it is asked again later.
	ErrTransport = errors.New("no answer from the channel")
	// ErrRedirect: the channel answered with a redirect, which is not
	// followed: the request was signed for its URL, and an answer from
	// elsewhere proves nothing. A wrong base URL, usually.
	ErrRedirect = errors.New("the channel answered with a redirect, not followed")
	// ErrTooLarge: the answer's body exceeded Config.MaxBody; it is not
	// handed back.
	ErrTooLarge = errors.New("answer body too large")
)

// CredentialSource finds a merchant's query credentials; the loaded
// PAYCB_QUERY_CREDENTIALS_FILE (package querycreds) is one. It must be
// safe for concurrent use.
type CredentialSource interface {
	Lookup(tenantID int64, ch channels.Channel, merchantID string) (channels.QueryCredentials, bool)
}

// CredentialsFunc is a function as a CredentialSource.
type CredentialsFunc func(tenantID int64, ch channels.Channel, merchantID string) (channels.QueryCredentials, bool)

// Lookup calls f.
func (f CredentialsFunc) Lookup(tenantID int64, ch channels.Channel, merchantID string) (channels.QueryCredentials, bool) {
	return f(tenantID, ch, merchantID)
}

// Config configures a Client.
type Config struct {
	// BaseURLs are the channels' API base URLs (PAYCB_QUERY_<CH>_URL),
	// each https. A channel without one cannot be queried.
	BaseURLs map[channels.Channel]string
	// RootCAs are the certificates trusted for the channels' APIs; nil:
	// the system roots (SystemRootsWith adds PAYCB_QUERY_TLS_CA_FILE).
	RootCAs *x509.CertPool
	// Timeout bounds one query (DefaultTimeout when zero).
	Timeout time.Duration
	// MaxBody caps an answer's body in bytes (DefaultMaxBody when zero).
	MaxBody int64
	// UserAgent is sent when the builder sets none (DefaultUserAgent when
	// empty).
	UserAgent string
	// Now is the clock requests are signed and answers stamped with
	// (time.Now when nil).
	Now func() time.Time
	// Nonce makes a request's nonce (32 random letters and digits when
	// nil).
	Nonce func() string
}

// Client sends queries. It is safe for concurrent use.
type Client struct {
	cfg   Config
	creds CredentialSource
	http  *http.Client
}

// New returns a Client with cfg's defaults filled in. It fails when a base
// URL is not an https URL of a host.
func New(cfg Config, creds CredentialSource) (*Client, error) {
	if creds == nil {
		return nil, errors.New("query client: no credential source")
	}
	for ch, u := range cfg.BaseURLs {
		if err := CheckBaseURL(u); err != nil {
			return nil, fmt.Errorf("query client: %s base URL: %w", ch, err)
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Nonce == nil {
		cfg.Nonce = randomNonce
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs},
		TLSHandshakeTimeout:   handshakeTimeout,
		ResponseHeaderTimeout: cfg.Timeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	return &Client{cfg: cfg, creds: creds, http: &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}, nil
}

// CheckBaseURL refuses a base URL that is not https://host[…]: every
// channel's answer is authenticated by TLS at least (Shouqianba's by TLS
// alone), so plain HTTP is never spoken, not even to a test server.
func CheckBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s does not parse", channels.Quote(raw))
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil {
		return fmt.Errorf("%s is not an https URL of a host (without user info)", channels.Quote(u.Redacted()))
	}
	return nil
}

// SystemRootsWith returns the system roots plus the certificates of the
// PEM file caFile (PAYCB_QUERY_TLS_CA_FILE; none when empty). It fails when
// the file cannot be read or holds no certificate.
func SystemRootsWith(caFile string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile == "" {
		return pool, nil
	}
	data, err := os.ReadFile(filepath.Clean(caFile)) // the operator names the file
	if err != nil {
		return nil, fmt.Errorf("query CA bundle: %w", err)
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("query CA bundle %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

// Query asks the channel about target: it finds the credentials of the
// target's tenant, channel and merchant, builds the signed request
// (channels.Spec.BuildQuery) for the channel's base URL at Now with a
// fresh nonce, sends it, and returns the answer as received: any HTTP
// status, its headers, its raw body, ReceivedAt when its last byte came.
// Errors wrap ErrNoCredentials, ErrNotQueryable or ErrBuild (nothing was
// sent), ErrTransport (no answer; Timeout tells a timeout), ErrRedirect
// or ErrTooLarge (an answer not handed back).
func (c *Client) Query(ctx context.Context, target channels.QueryTarget) (channels.QueryResponse, error) {
	what := fmt.Sprintf("query %s %s of tenant %d merchant %s", target.Channel, target.Kind, target.TenantID, channels.Quote(target.MerchantID))
	spec, ok := channels.Lookup(target.Channel)
	if !ok || spec.BuildQuery == nil {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w", what, ErrNotQueryable)
	}
	base, ok := c.cfg.BaseURLs[target.Channel]
	if !ok {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: no base URL configured", what, ErrNotQueryable)
	}
	creds, ok := c.creds.Lookup(target.TenantID, target.Channel, target.MerchantID)
	if !ok {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w", what, ErrNoCredentials)
	}
	req, err := spec.BuildQuery(target, creds, base, c.cfg.Now(), c.cfg.Nonce())
	if err != nil {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: %w", what, ErrBuild, err)
	}
	return c.send(ctx, what, req)
}

// send sends req and reads its answer.
func (c *Client) send(ctx context.Context, what string, req channels.QueryRequest) (channels.QueryResponse, error) {
	if err := CheckBaseURL(req.URL); err != nil {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: request URL %w", what, ErrBuild, err)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: %w", what, ErrBuild, err)
	}
	hr.Header = req.Header.Clone()
	if hr.Header == nil {
		hr.Header = http.Header{}
	}
	if hr.Header.Get("User-Agent") == "" {
		hr.Header.Set("User-Agent", c.cfg.UserAgent)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: %w", what, ErrTransport, stripURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: HTTP %d to %s", what, ErrRedirect, resp.StatusCode,
			channels.Quote(resp.Header.Get("Location")))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBody+1))
	if err != nil {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: reading the answer: %w", what, ErrTransport, stripURL(err))
	}
	if int64(len(body)) > c.cfg.MaxBody {
		return channels.QueryResponse{}, fmt.Errorf("%s: %w: more than %d bytes (HTTP %d)", what, ErrTooLarge, c.cfg.MaxBody, resp.StatusCode)
	}
	return channels.QueryResponse{StatusCode: resp.StatusCode, Header: resp.Header, Body: body, ReceivedAt: c.cfg.Now()}, nil
}

// stripURL returns a *url.Error's cause with the method and URL put back
// without the query (a WeChat query names the merchant there; nothing
// secret, but errors stay short).
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		u, perr := url.Parse(ue.URL)
		where := ue.URL
		if perr == nil {
			u.RawQuery = ""
			where = u.String()
		}
		return fmt.Errorf("%s %s: %w", ue.Op, where, ue.Err)
	}
	return err
}

// Timeout reports whether err is a query that timed out (Config.Timeout
// or the context's deadline).
func Timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// randomNonce is 32 random letters and digits.
func randomNonce() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on the supported platforms; a nonce
		// that could repeat is not acceptable.
		panic("query nonce: " + err.Error())
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Ask is Query with its error naming the channel asked: the client as the
// querier's Asker.
func (c *Client) Ask(ctx context.Context, target channels.QueryTarget) (channels.QueryResponse, error) {
	resp, err := c.Query(ctx, target)
	if err != nil {
		return resp, fmt.Errorf("ask %s: %w", target.Channel, err)
	}
	return resp, nil
}
