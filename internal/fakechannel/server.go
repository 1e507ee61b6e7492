package fakechannel

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/paycallback/paycallback/pkg/channels/sample"
)

// Answer is what a scripted step answers, in the channel's own terms (the
// channel's fake turns it into its real answer; docs/queries.md, "Fake
// channel servers", has the table).
type Answer string

// The answers a step can give.
const (
	// Success: the order is paid (WeChat SUCCESS, Alipay TRADE_SUCCESS,
	// Shouqianba PAID), or the refund succeeded (WeChat SUCCESS, Alipay
	// REFUND_SUCCESS, a Shouqianba order REFUNDED or PARTIAL_REFUNDED
	// showing the refund).
	Success Answer = "success"
	// Pending: not yet (WeChat NOTPAY or refund PROCESSING, Alipay
	// WAIT_BUYER_PAY or a refund query with no refund data, Shouqianba
	// CREATED or, for a refund, the order PAID without it).
	Pending Answer = "pending"
	// Closed: ended without money moving (WeChat CLOSED, Alipay
	// TRADE_CLOSED, Shouqianba PAY_CANCELED).
	Closed Answer = "closed"
	// Uncertain: the channel cannot say (WeChat PAYERROR or refund
	// ABNORMAL, Alipay a trade_status nobody documents, Shouqianba
	// PAY_ERROR).
	Uncertain Answer = "uncertain"
	// NotFound: the channel does not know it (WeChat 404 ORDER_NOT_EXIST
	// or RESOURCE_NOT_EXISTS, Alipay 40004 ACQ.TRADE_NOT_EXIST, Shouqianba
	// UPAY_ORDER_NOT_EXISTS). A number no script names answers so too.
	NotFound Answer = "not_found"
	// RateLimited: the channel limits the rate (WeChat 429
	// RATELIMIT_EXCEEDED, or FREQUENCY_LIMITED on a refund query; Alipay
	// 40005; Shouqianba HTTP 429).
	RateLimited Answer = "rate_limited"
	// SystemError: the channel failed (WeChat 500 SYSTEM_ERROR, Alipay
	// 20000 isp.unknow-error, Shouqianba result_code 500).
	SystemError Answer = "system_error"
)

// Step is one scripted answer. The zero Step answers Success.
type Step struct {
	// Answer is what is answered (default Success).
	Answer Answer
	// State, when set, is the channel's own state written instead of the
	// one Answer gives (WeChat USERPAYING, ACCEPT, REVOKED, REFUND; Alipay
	// TRADE_FINISHED; Shouqianba CANCELED): the answer keeps Answer's
	// shape (a paid WeChat state carries the paid members).
	State string
	// HTTPStatus, when set, answers that bare status with a body that is
	// no channel's (a proxy's error page) instead.
	HTTPStatus int
	// Delay holds the answer back this long (or until the client gives
	// up): longer than a client's timeout, it is a timeout.
	Delay time.Duration
	// Forged signs the answer with Keys.Other under the platform key's
	// id: a reader must refuse it (WeChat, Alipay).
	Forged bool
	// Stale dates the answer's Wechatpay-Timestamp ten minutes back,
	// outside the 300 s window a reader allows (WeChat only: the other
	// channels' answers carry no signed time).
	Stale bool
	// Unsigned leaves the signature out (WeChat, Alipay).
	Unsigned bool
	// TradeType, when set, is the trade_type a paid WeChat payment answer
	// names instead of the sample's JSAPI: MICROPAY for a barcode payment
	// (付款码), which WeChat never notifies. WeChat only; the readers do
	// not judge it.
	TradeType string
}

// Steps is n copies of s, for scripts: Steps(3, Step{Answer: Pending}).
func Steps(n int, s Step) []Step {
	out := make([]Step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// Request is one request a fake received, recorded before it is answered
// (a request answered too late for its client is recorded too).
type Request struct {
	// At is when it came, by the fake's clock.
	At time.Time
	// Method and URI are the request line's (URI the path and query as
	// sent).
	Method string
	URI    string
	// Header and Body are as received.
	Header http.Header
	Body   []byte
	// Merchant is the merchant the request claims to be sent for (WeChat
	// mchid, Alipay app_id, Shouqianba terminal_sn), as written.
	Merchant string
	// Asked is the number asked about: the trade's (transaction_id,
	// trade_no, sn) or the merchant's order number, and for a refund
	// "refund:" and the refund number.
	Asked string
	// SignatureOK reports whether the request's signature verified; a
	// request whose signature did not is refused, as the channel refuses
	// it, and SignatureError says why.
	SignatureOK    bool
	SignatureError string
	// Step is the scripted step answered (zero when the request was
	// refused before any script was read).
	Step Step
	// Status is the HTTP status answered.
	Status int
	// InFlight is how many other requests asking about the same number
	// (Asked) the fake had received and not yet answered when this one
	// was received: 0 unless two clients ask about one order at once.
	InFlight int
}

// Options configure a fake server.
type Options struct {
	// Keys are the test keys (SharedKeys when nil).
	Keys *Keys
	// Now is the fake's clock: request timestamps are checked against it,
	// answers signed and requests recorded at it (time.Now when nil).
	Now func() time.Time
	// WeChatMerchants are mchids the fake WeChat accepts besides
	// WeChatMerchantID, with the same keys and serial; an answer names
	// the merchant asked. A merchant belongs to one tenant, and the query
	// budget is a merchant's: the benchmark spreads its queries over
	// many.
	WeChatMerchants []string
}

// TB is the part of testing.TB the Must constructors use; *testing.T
// and *testing.B are TBs. (The package does not import testing: the demo
// may run a fake.)
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// reply is what a channel's handler answers.
type reply struct {
	status int
	header http.Header
	body   []byte
	delay  time.Duration
}

// script is one order's or refund's scripted steps: each request takes
// the next, the last repeats for ever.
type script struct {
	steps []Step
	next  int
}

func (s *script) take() Step {
	st := s.steps[s.next]
	if s.next < len(s.steps)-1 {
		s.next++
	}
	return st
}

// scriptedTrade is a trade a fake knows, with its payment script and its
// refunds' scripts by refund number.
type scriptedTrade struct {
	trade   sample.Trade
	pay     *script
	refunds map[string]*scriptedRefund
	// lastRefund is the refund scripted last: Shouqianba has no refund
	// query, so its order's answers speak of that refund.
	lastRefund string
}

type scriptedRefund struct {
	refund sample.Refund
	script *script
}

// fake is what the three fake servers share: the TLS server, the scripts,
// the requests received.
type fake struct {
	ts   *httptest.Server
	keys *Keys
	now  func() time.Time

	mu       sync.Mutex
	trades   map[string]*scriptedTrade // by TradeNo and by MerchantOrderNo
	requests []Request
	inFlight map[string]int // requests received and not yet answered, by Asked
}

// maxRequestBody caps what a fake reads of a request.
const maxRequestBody = 1 << 20

func newFake(opts Options, handle func(r *http.Request, body []byte, rec *Request) reply) (*fake, error) {
	f := &fake{keys: opts.Keys, now: opts.Now, trades: map[string]*scriptedTrade{}, inFlight: map[string]int{}}
	if f.keys == nil {
		k, err := SharedKeys()
		if err != nil {
			return nil, err
		}
		f.keys = k
	}
	if f.now == nil {
		f.now = time.Now
	}
	f.ts = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
		if err != nil {
			http.Error(w, "request body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		rec := Request{At: f.now(), Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: body}
		rp := handle(r, body, &rec)
		rec.Status = rp.status
		f.mu.Lock()
		if asked := rec.Asked; asked != "" {
			rec.InFlight = f.inFlight[asked]
			f.inFlight[asked]++
			// Answered (or given up on) when the handler returns: its
			// reply is flushed to the client only after that.
			defer func() {
				f.mu.Lock()
				f.inFlight[asked]--
				f.mu.Unlock()
			}()
		}
		f.requests = append(f.requests, rec)
		f.mu.Unlock()
		if rp.delay > 0 {
			t := time.NewTimer(rp.delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				// The client gave up: abort the connection rather than let
				// the server finish an empty 200, which a client still
				// reading would take for an answer.
				panic(http.ErrAbortHandler)
			}
		}
		for k, vs := range rp.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(rp.status)
		_, _ = w.Write(rp.body)
	}))
	return f, nil
}

// URL is the server's base URL, https://127.0.0.1:port.
func (f *fake) URL() string { return f.ts.URL }

// Client is an HTTP client that trusts the server's certificate.
func (f *fake) Client() *http.Client { return f.ts.Client() }

// Certificate is the server's self-signed certificate.
func (f *fake) Certificate() *x509.Certificate { return f.ts.Certificate() }

// CertificatePEM is the server's certificate as PEM: the CA bundle a
// client must trust (PAYCB_QUERY_TLS_CA_FILE).
func (f *fake) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.ts.Certificate().Raw})
}

// Keys are the keys the server checks requests and signs answers with.
func (f *fake) Keys() *Keys { return f.keys }

// Close shuts the server down, waiting for the requests in flight (a
// delayed answer ends when its client has gone).
func (f *fake) Close() {
	f.ts.CloseClientConnections()
	f.ts.Close()
}

// Requests returns every request received so far, in order.
func (f *fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Script makes the server know trade t (by its trade number and its
// merchant order number) and answer its payment queries with steps, one
// per query, the last repeated for ever (Success when none). Scripting
// the same trade again starts its payment script anew.
func (f *fake) Script(t sample.Trade, steps ...Step) {
	t = t.WithDefaults()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.tradeLocked(t)
	st.pay = newScript(steps)
}

// ScriptRefund makes the server know trade t and its refund r (by r.No)
// and answer queries about the refund with steps, as Script does.
func (f *fake) ScriptRefund(t sample.Trade, r sample.Refund, steps ...Step) {
	t = t.WithDefaults()
	r = r.WithDefaults(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.tradeLocked(t)
	st.refunds[r.No] = &scriptedRefund{refund: r, script: newScript(steps)}
	st.lastRefund = r.No
}

func newScript(steps []Step) *script {
	if len(steps) == 0 {
		steps = []Step{{}}
	}
	return &script{steps: slices.Clone(steps)}
}

func (f *fake) tradeLocked(t sample.Trade) *scriptedTrade {
	for _, no := range []string{t.TradeNo, t.MerchantOrderNo} {
		if st, ok := f.trades[no]; ok && st.trade.TradeNo == t.TradeNo && st.trade.MerchantOrderNo == t.MerchantOrderNo {
			st.trade = t
			return st
		}
	}
	st := &scriptedTrade{trade: t, pay: newScript(nil), refunds: map[string]*scriptedRefund{}}
	f.trades[t.TradeNo] = st
	f.trades[t.MerchantOrderNo] = st
	return st
}

// takePayment returns the trade a payment query names (by trade number,
// else merchant order number) and its next step; ok is false for a trade
// no script names.
func (f *fake) takePayment(tradeNo, orderNo string) (sample.Trade, Step, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.lookupLocked(tradeNo, orderNo)
	if st == nil {
		return sample.Trade{}, Step{}, false
	}
	return st.trade, st.pay.take(), true
}

// lastRefund is the number of the refund last scripted for the trade a
// query names, "" when none is.
func (f *fake) lastRefund(tradeNo, orderNo string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.lookupLocked(tradeNo, orderNo); st != nil {
		return st.lastRefund
	}
	return ""
}

// takeRefund returns the trade and refund a refund query names and the
// refund's next step.
func (f *fake) takeRefund(tradeNo, orderNo, refundNo string) (sample.Trade, sample.Refund, Step, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tradeNo == "" && orderNo == "" {
		// WeChat asks by out_refund_no alone.
		for _, st := range f.trades {
			if sr, ok := st.refunds[refundNo]; ok {
				return st.trade, sr.refund, sr.script.take(), true
			}
		}
		return sample.Trade{}, sample.Refund{}, Step{}, false
	}
	st := f.lookupLocked(tradeNo, orderNo)
	if st == nil {
		return sample.Trade{}, sample.Refund{}, Step{}, false
	}
	sr, ok := st.refunds[refundNo]
	if !ok {
		return st.trade, sample.Refund{}, Step{}, false
	}
	return st.trade, sr.refund, sr.script.take(), true
}

func (f *fake) lookupLocked(tradeNo, orderNo string) *scriptedTrade {
	if tradeNo != "" {
		if st, ok := f.trades[tradeNo]; ok && st.trade.TradeNo == tradeNo {
			return st
		}
		return nil
	}
	if st, ok := f.trades[orderNo]; ok && st.trade.MerchantOrderNo == orderNo {
		return st
	}
	return nil
}

// bareStatus is the reply of a step with HTTPStatus: a proxy's page.
func bareStatus(st Step) reply {
	return reply{
		status: st.HTTPStatus,
		header: http.Header{"Content-Type": {"text/html"}},
		body:   []byte(fmt.Sprintf("<html><body><h1>%d %s</h1></body></html>", st.HTTPStatus, http.StatusText(st.HTTPStatus))),
		delay:  st.Delay,
	}
}

// nonce is a fresh 32-character nonce of letters and digits.
func nonce() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("read random nonce: %v", err)) // crypto/rand does not fail
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// mustFake is the common body of the Must constructors.
func mustFake[T interface{ Close() }](tb TB, start func() (T, error)) T {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatalf("start fake channel server: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}
