package fakechannel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/paycallback/paycallback/internal/fakechannel"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/stretchr/testify/require"
)

const tenant = 1001

// channelFake is one fake with the client side of its channel: how a
// request is built and an answer read.
type channelFake struct {
	name   channels.Channel
	start  func(t *testing.T) fakeServer
	build  func(k *fakechannel.Keys, target channels.QueryTarget, base string, signer bool) (channels.QueryRequest, error)
	read   func(k *fakechannel.Keys, target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error)
	target func(t sample.Trade, kind channels.QueryKind, refundNo string) channels.QueryTarget
}

type fakeServer interface {
	URL() string
	Client() *http.Client
	Keys() *fakechannel.Keys
	Requests() []fakechannel.Request
	Script(sample.Trade, ...fakechannel.Step)
	ScriptRefund(sample.Trade, sample.Refund, ...fakechannel.Step)
}

// base is the URL the channel's builder is given.
func base(s fakeServer) string {
	if a, ok := s.(*fakechannel.Alipay); ok {
		return a.GatewayURL()
	}
	return s.URL()
}

var fakes = []channelFake{
	{
		name: wechat.Code,
		start: func(t *testing.T) fakeServer {
			t.Helper()
			return fakechannel.MustWeChat(t, fakechannel.Options{})
		},
		build: func(k *fakechannel.Keys, target channels.QueryTarget, base string, good bool) (channels.QueryRequest, error) {
			key := k.Merchant
			if !good {
				key = k.Other
			}
			return wechat.NewQueryRequest(target, k.WeChatCredentials(tenant, key), base, time.Now(), "n0nce")
		},
		read: func(k *fakechannel.Keys, target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
			return wechat.ReadAnswer(target, resp, k.WeChatPublicKeys(), time.Now())
		},
		target: func(t sample.Trade, kind channels.QueryKind, refundNo string) channels.QueryTarget {
			return channels.QueryTarget{
				TenantID: tenant, Channel: wechat.Code, Kind: kind, MerchantID: fakechannel.WeChatMerchantID,
				TradeNo: t.TradeNo, MerchantOrderNo: t.MerchantOrderNo, RefundNo: refundNo,
			}
		},
	},
	{
		name: alipay.Code,
		start: func(t *testing.T) fakeServer {
			t.Helper()
			return fakechannel.MustAlipay(t, fakechannel.Options{})
		},
		build: func(k *fakechannel.Keys, target channels.QueryTarget, base string, good bool) (channels.QueryRequest, error) {
			key := k.Merchant
			if !good {
				key = k.Other
			}
			return alipay.BuildQueryRequest(target, k.AlipayCredentials(tenant, key), base, time.Now(), "")
		},
		read: func(k *fakechannel.Keys, target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
			return alipay.ReadAnswer(target, resp, k.AlipayPublicKey())
		},
		target: func(t sample.Trade, kind channels.QueryKind, refundNo string) channels.QueryTarget {
			return channels.QueryTarget{
				TenantID: tenant, Channel: alipay.Code, Kind: kind, MerchantID: fakechannel.AlipayMerchantID,
				TradeNo: t.TradeNo, MerchantOrderNo: t.MerchantOrderNo, RefundNo: refundNo,
			}
		},
	},
	{
		name: sqb.Code,
		start: func(t *testing.T) fakeServer {
			t.Helper()
			return fakechannel.MustSQB(t, fakechannel.Options{})
		},
		build: func(_ *fakechannel.Keys, target channels.QueryTarget, base string, good bool) (channels.QueryRequest, error) {
			key := fakechannel.SQBTerminalKey
			if !good {
				key = "0000000000000000000000000000beef"
			}
			return sqb.BuildQueryRequest(target, fakechannel.SQBCredentials(tenant, key), base, time.Now(), "")
		},
		read: func(_ *fakechannel.Keys, target channels.QueryTarget, resp channels.QueryResponse) (channels.QueryAnswer, error) {
			return sqb.DecodeQueryAnswer(target, resp)
		},
		target: func(t sample.Trade, kind channels.QueryKind, refundNo string) channels.QueryTarget {
			return channels.QueryTarget{
				TenantID: tenant, Channel: sqb.Code, Kind: kind, MerchantID: fakechannel.SQBTerminalSN,
				TradeNo: t.TradeNo, MerchantOrderNo: t.MerchantOrderNo, RefundNo: refundNo,
			}
		},
	},
}

// send sends req with the fake's own client and returns the answer as
// received.
func send(ctx context.Context, c *http.Client, req channels.QueryRequest) (channels.QueryResponse, error) {
	hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return channels.QueryResponse{}, err
	}
	hr.Header = req.Header.Clone()
	resp, err := c.Do(hr)
	if err != nil {
		return channels.QueryResponse{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return channels.QueryResponse{}, err
	}
	return channels.QueryResponse{StatusCode: resp.StatusCode, Header: resp.Header, Body: body, ReceivedAt: time.Now()}, nil
}

func ask(t *testing.T, cf channelFake, s fakeServer, target channels.QueryTarget, good bool) (channels.QueryAnswer, error) {
	t.Helper()
	req, err := cf.build(s.Keys(), target, base(s), good)
	require.NoError(t, err)
	resp, err := send(context.Background(), s.Client(), req)
	require.NoError(t, err)
	return cf.read(s.Keys(), target, resp)
}

// outcomes is what each step reads back as, per channel, for a payment and
// a refund target (docs/queries.md, "Fake channel servers").
var outcomes = map[fakechannel.Answer]map[channels.Channel][2]channels.QueryOutcome{
	fakechannel.Success: {
		wechat.Code: {channels.QuerySettled, channels.QuerySettled},
		alipay.Code: {channels.QuerySettled, channels.QuerySettled},
		sqb.Code:    {channels.QuerySettled, channels.QuerySettled},
	},
	fakechannel.Pending: {
		wechat.Code: {channels.QueryPending, channels.QueryPending},
		alipay.Code: {channels.QueryPending, channels.QueryNotFound},
		sqb.Code:    {channels.QueryPending, channels.QueryNotFound},
	},
	fakechannel.Closed: {
		wechat.Code: {channels.QueryClosed, channels.QueryClosed},
		alipay.Code: {channels.QueryUncertain, channels.QueryNotFound},
		sqb.Code:    {channels.QueryClosed, channels.QueryClosed},
	},
	fakechannel.Uncertain: {
		wechat.Code: {channels.QueryUncertain, channels.QueryUncertain},
		alipay.Code: {channels.QueryUncertain, channels.QueryUncertain},
		sqb.Code:    {channels.QueryUncertain, channels.QueryUncertain},
	},
	fakechannel.NotFound: {
		wechat.Code: {channels.QueryNotFound, channels.QueryNotFound},
		alipay.Code: {channels.QueryNotFound, channels.QueryNotFound},
		sqb.Code:    {channels.QueryNotFound, channels.QueryNotFound},
	},
	fakechannel.RateLimited: {
		wechat.Code: {channels.QueryThrottled, channels.QueryThrottled},
		alipay.Code: {channels.QueryThrottled, channels.QueryThrottled},
		sqb.Code:    {channels.QueryThrottled, channels.QueryThrottled},
	},
	fakechannel.SystemError: {
		wechat.Code: {channels.QueryRetry, channels.QueryRetry},
		alipay.Code: {channels.QueryRetry, channels.QueryRetry},
		sqb.Code:    {channels.QueryRetry, channels.QueryRetry},
	},
}

// TestAnswersReadBack: every scripted answer of every fake, for a payment
// and a refund, reads back through the channel's own reader as the
// outcome docs/queries.md gives it, and a settled one carries the events
// of the scripted trade.
func TestAnswersReadBack(t *testing.T) {
	for _, cf := range fakes {
		t.Run(string(cf.name), func(t *testing.T) {
			s := cf.start(t)
			seq := 0
			for answer, byChannel := range outcomes {
				for i, kind := range []channels.QueryKind{channels.QueryPayment, channels.QueryRefund} {
					seq++
					tr := sample.NewTrade(cf.name, seq)
					r := sample.Refund{No: fmt.Sprintf("RF%d", seq), Amount: tr.Total, Cumulative: tr.Total}
					refundNo := ""
					if kind == channels.QueryRefund {
						refundNo = r.No
						s.ScriptRefund(tr, r, fakechannel.Step{Answer: answer})
					} else {
						s.Script(tr, fakechannel.Step{Answer: answer})
					}
					target := cf.target(tr, kind, refundNo)
					if kind == channels.QueryPayment {
						// As a registration is asked: WeChat's unpaid answers
						// carry no transaction_id to match.
						target.TradeNo = ""
					}
					ans, err := ask(t, cf, s, target, true)
					require.NoError(t, err, "%s %s", answer, kind)
					reqs := s.Requests()
					require.Equal(t, answer, reqs[len(reqs)-1].Step.Answer, "the step answered is recorded")
					require.Equal(t, byChannel[cf.name][i], ans.Outcome, "%s %s: %s", answer, kind, ans.Detail)
					if ans.Outcome == channels.QuerySettled {
						require.NotEmpty(t, ans.Events)
						last := ans.Events[len(ans.Events)-1]
						require.Equal(t, tr.TradeNo, last.TradeNo)
						if kind == channels.QueryRefund {
							require.Equal(t, r.No, last.RefundNo)
						}
					}
				}
			}
		})
	}
}

// TestScriptSequence: NOTPAY, NOTPAY, then SUCCESS for ever, asked by the
// merchant order number; the fake records every query.
func TestScriptSequence(t *testing.T) {
	for _, cf := range fakes {
		t.Run(string(cf.name), func(t *testing.T) {
			s := cf.start(t)
			tr := sample.NewTrade(cf.name, 1)
			s.Script(tr, append(fakechannel.Steps(2, fakechannel.Step{Answer: fakechannel.Pending}), fakechannel.Step{Answer: fakechannel.Success})...)
			target := cf.target(tr, channels.QueryPayment, "")
			target.TradeNo = "" // an unpaid order is asked by its merchant order number
			var got []channels.QueryOutcome
			for range 4 {
				ans, err := ask(t, cf, s, target, true)
				require.NoError(t, err)
				got = append(got, ans.Outcome)
			}
			require.Equal(t, []channels.QueryOutcome{channels.QueryPending, channels.QueryPending, channels.QuerySettled, channels.QuerySettled}, got)
			reqs := s.Requests()
			require.Len(t, reqs, 4)
			for _, r := range reqs {
				require.True(t, r.SignatureOK, r.SignatureError)
				require.Equal(t, tr.MerchantOrderNo, r.Asked)
				require.Equal(t, http.StatusOK, r.Status)
			}
		})
	}
}

// TestUnknownTrade: a number no script names is not found.
func TestUnknownTrade(t *testing.T) {
	for _, cf := range fakes {
		t.Run(string(cf.name), func(t *testing.T) {
			s := cf.start(t)
			ans, err := ask(t, cf, s, cf.target(sample.NewTrade(cf.name, 99), channels.QueryPayment, ""), true)
			require.NoError(t, err)
			require.Equal(t, channels.QueryNotFound, ans.Outcome)
		})
	}
}

// TestBadSignatureRefused: a request signed with a key the channel does
// not know is refused as the channel refuses it, and recorded so.
func TestBadSignatureRefused(t *testing.T) {
	for _, cf := range fakes {
		t.Run(string(cf.name), func(t *testing.T) {
			s := cf.start(t)
			tr := sample.NewTrade(cf.name, 1)
			s.Script(tr)
			ans, err := ask(t, cf, s, cf.target(tr, channels.QueryPayment, ""), false)
			require.NoError(t, err)
			require.Equal(t, channels.QueryRefused, ans.Outcome, ans.Detail)
			reqs := s.Requests()
			require.Len(t, reqs, 1)
			require.False(t, reqs[0].SignatureOK)
			require.NotEmpty(t, reqs[0].SignatureError)
		})
	}
}

// TestForgedAndStaleAnswersRefused: an answer signed with another key,
// one dated outside the window and an unsigned one are refused by the
// reader as unauthenticated; Shouqianba signs nothing, so it is left out.
func TestForgedAndStaleAnswersRefused(t *testing.T) {
	for _, cf := range fakes[:2] {
		for name, st := range map[string]fakechannel.Step{
			"forged":         {Forged: true},
			"unsigned":       {Unsigned: true},
			"forged refusal": {Answer: fakechannel.NotFound, Forged: true},
		} {
			t.Run(string(cf.name)+"/"+name, func(t *testing.T) {
				s := cf.start(t)
				tr := sample.NewTrade(cf.name, 1)
				s.Script(tr, st)
				_, err := ask(t, cf, s, cf.target(tr, channels.QueryPayment, ""), true)
				require.Error(t, err)
				kind, _ := channels.KindOf(err)
				require.Equal(t, channels.KindUnauthenticated, kind, err.Error())
			})
		}
	}
	t.Run("WECHAT/stale", func(t *testing.T) {
		s := fakechannel.MustWeChat(t, fakechannel.Options{})
		tr := sample.NewTrade(wechat.Code, 1)
		s.Script(tr, fakechannel.Step{Stale: true}, fakechannel.Step{})
		target := fakes[0].target(tr, channels.QueryPayment, "")
		_, err := ask(t, fakes[0], s, target, true)
		kind, _ := channels.KindOf(err)
		require.Equal(t, channels.KindUnauthenticated, kind, "%v", err)
		ans, err := ask(t, fakes[0], s, target, true) // the next answer is fresh
		require.NoError(t, err)
		require.Equal(t, channels.QuerySettled, ans.Outcome)
	})
}

// TestStaleRequestRefused: WeChat refuses a request whose timestamp is
// outside the window of the fake's clock.
func TestStaleRequestRefused(t *testing.T) {
	s := fakechannel.MustWeChat(t, fakechannel.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	tr := sample.NewTrade(wechat.Code, 1)
	s.Script(tr)
	req, err := fakes[0].build(s.Keys(), fakes[0].target(tr, channels.QueryPayment, ""), s.URL(), true)
	require.NoError(t, err)
	resp, err := send(context.Background(), s.Client(), req)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(resp.Body), "SIGN_ERROR")
	require.Contains(t, s.Requests()[0].SignatureError, "timestamp")
}

// TestDelayOutlastsClient: a delayed answer outlasts a client's timeout;
// the request is recorded all the same.
func TestDelayOutlastsClient(t *testing.T) {
	for _, cf := range fakes {
		t.Run(string(cf.name), func(t *testing.T) {
			s := cf.start(t)
			tr := sample.NewTrade(cf.name, 1)
			s.Script(tr, fakechannel.Step{Delay: time.Minute})
			req, err := cf.build(s.Keys(), cf.target(tr, channels.QueryPayment, ""), base(s), true)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = send(ctx, s.Client(), req)
			require.Error(t, err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Len(t, s.Requests(), 1)
		})
	}
}

// TestConcurrentAsksSeen: a request asking about an order while another
// request about it is still unanswered is recorded with InFlight 1; one
// asked after the answer, or about another order, with 0.
func TestConcurrentAsksSeen(t *testing.T) {
	for _, cf := range fakes {
		t.Run(string(cf.name), func(t *testing.T) {
			s := cf.start(t)
			tr, other := sample.NewTrade(cf.name, 1), sample.NewTrade(cf.name, 2)
			s.Script(tr, fakechannel.Step{}, fakechannel.Step{Delay: time.Minute}, fakechannel.Step{})
			s.Script(other)
			req, err := cf.build(s.Keys(), cf.target(tr, channels.QueryPayment, ""), base(s), true)
			require.NoError(t, err)
			_, err = send(context.Background(), s.Client(), req)
			require.NoError(t, err, "asked once, answered")

			ctx, cancel := context.WithCancel(context.Background())
			held := make(chan error, 1)
			go func() {
				_, err := send(ctx, s.Client(), req)
				held <- err
			}()
			require.Eventually(t, func() bool { return len(s.Requests()) == 2 }, 10*time.Second, 5*time.Millisecond,
				"the second ask received, its answer held back")
			_, err = send(context.Background(), s.Client(), req)
			require.NoError(t, err, "asked a third time while the second is unanswered")
			otherReq, err := cf.build(s.Keys(), cf.target(other, channels.QueryPayment, ""), base(s), true)
			require.NoError(t, err)
			_, err = send(context.Background(), s.Client(), otherReq)
			require.NoError(t, err)
			cancel()
			require.Error(t, <-held, "the held answer given up on")

			reqs := s.Requests()
			require.Len(t, reqs, 4)
			inFlight := make([]int, len(reqs))
			for i, r := range reqs {
				inFlight[i] = r.InFlight
			}
			require.Equal(t, []int{0, 0, 1, 0}, inFlight, "first, held, asked during the held one, another order")
		})
	}
}

// TestBareHTTPStatus: a proxy's 502 page reads as retry on every channel.
func TestBareHTTPStatus(t *testing.T) {
	for _, cf := range fakes {
		t.Run(string(cf.name), func(t *testing.T) {
			s := cf.start(t)
			tr := sample.NewTrade(cf.name, 1)
			s.Script(tr, fakechannel.Step{HTTPStatus: http.StatusBadGateway})
			ans, err := ask(t, cf, s, cf.target(tr, channels.QueryPayment, ""), true)
			require.NoError(t, err)
			require.Equal(t, channels.QueryRetry, ans.Outcome)
		})
	}
}

// TestChannelStates: a step's State writes the channel's own state:
// USERPAYING for ever is pending every time, WeChat REFUND (转入退款) is a
// paid order, Alipay TRADE_FINISHED is paid.
func TestChannelStates(t *testing.T) {
	s := fakechannel.MustWeChat(t, fakechannel.Options{})
	tr := sample.NewTrade(wechat.Code, 1)
	s.Script(tr, fakechannel.Step{Answer: fakechannel.Pending, State: "USERPAYING"})
	target := fakes[0].target(tr, channels.QueryPayment, "")
	target.TradeNo = ""
	for range 3 {
		ans, err := ask(t, fakes[0], s, target, true)
		require.NoError(t, err)
		require.Equal(t, channels.QueryPending, ans.Outcome)
		require.Equal(t, "USERPAYING", ans.RawState)
	}
	s.Script(tr, fakechannel.Step{State: "REFUND"})
	ans, err := ask(t, fakes[0], s, target, true)
	require.NoError(t, err)
	require.Equal(t, channels.QuerySettled, ans.Outcome)
	require.Equal(t, "REFUND", ans.RawState)

	a := fakechannel.MustAlipay(t, fakechannel.Options{})
	atr := sample.NewTrade(alipay.Code, 1)
	a.Script(atr, fakechannel.Step{State: alipay.TradeFinished})
	ans, err = ask(t, fakes[1], a, fakes[1].target(atr, channels.QueryPayment, ""), true)
	require.NoError(t, err)
	require.Equal(t, channels.QuerySettled, ans.Outcome)
	require.Equal(t, alipay.TradeFinished, ans.RawState)
}

// TestAlipayUnknownApp: a request for an application the gateway does not
// know is refused in error_response, signed, and read as refused.
func TestAlipayUnknownApp(t *testing.T) {
	a := fakechannel.MustAlipay(t, fakechannel.Options{})
	k := a.Keys()
	tr := sample.NewTrade(alipay.Code, 1)
	a.Script(tr)
	target := fakes[1].target(tr, channels.QueryPayment, "")
	creds := k.AlipayCredentials(tenant, k.Merchant)
	creds.AppID = "2021999999999999"
	req, err := alipay.BuildQueryRequest(target, creds, a.GatewayURL(), time.Now(), "")
	require.NoError(t, err)
	resp, err := send(context.Background(), a.Client(), req)
	require.NoError(t, err)
	require.Contains(t, string(resp.Body), `"error_response"`)
	require.Contains(t, string(resp.Body), "isv.invalid-app-id")
	ans, err := alipay.ReadAnswer(target, resp, k.AlipayPublicKey())
	require.NoError(t, err)
	require.Equal(t, channels.QueryRefused, ans.Outcome)
	require.False(t, a.Requests()[0].SignatureOK)
}

// TestWeChatTradeType: a step's TradeType is the trade_type of a paid
// WeChat answer (a barcode payment's MICROPAY), which still reads back as
// settled; an unpaid answer names no trade_type, and without TradeType a
// paid one says the sample's JSAPI.
func TestWeChatTradeType(t *testing.T) {
	s := fakechannel.MustWeChat(t, fakechannel.Options{})
	tr := sample.NewTrade(wechat.Code, 1)
	s.Script(tr,
		fakechannel.Step{Answer: fakechannel.Pending, TradeType: "MICROPAY"},
		fakechannel.Step{TradeType: "MICROPAY"},
		fakechannel.Step{})
	target := fakes[0].target(tr, channels.QueryPayment, "")
	target.TradeNo = ""
	tradeType := func() any {
		t.Helper()
		req, err := fakes[0].build(s.Keys(), target, s.URL(), true)
		require.NoError(t, err)
		resp, err := send(context.Background(), s.Client(), req)
		require.NoError(t, err)
		ans, err := fakes[0].read(s.Keys(), target, resp)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.Unmarshal(resp.Body, &body))
		if ans.Outcome != channels.QuerySettled {
			return ans.Outcome
		}
		return body["trade_type"]
	}
	require.Equal(t, channels.QueryPending, tradeType(), "not paid: no trade type to set")
	require.Equal(t, "MICROPAY", tradeType())
	require.Equal(t, "JSAPI", tradeType())
}

// TestWeChatMoreMerchants: a fake WeChat given more merchants accepts
// requests of each, answers naming the merchant asked (which the reader
// holds to the merchant of its key), and still refuses a merchant it was
// not given.
func TestWeChatMoreMerchants(t *testing.T) {
	const other, unknown = "1900000001", "1900000002"
	s := fakechannel.MustWeChat(t, fakechannel.Options{WeChatMerchants: []string{other}})
	k := s.Keys()
	tr := sample.NewTrade(wechat.Code, 3)
	s.Script(tr)
	askAs := func(mchid string) (channels.QueryAnswer, error) {
		t.Helper()
		target := channels.QueryTarget{
			TenantID: tenant, Channel: wechat.Code, Kind: channels.QueryPayment, MerchantID: mchid,
			MerchantOrderNo: tr.MerchantOrderNo,
		}
		creds := wechat.Credentials{TenantID: tenant, MerchantID: mchid, SerialNo: fakechannel.WeChatSerialNo, PrivateKey: k.Merchant}
		req, err := wechat.NewQueryRequest(target, creds, s.URL(), time.Now(), "n0nce")
		require.NoError(t, err)
		resp, err := send(context.Background(), s.Client(), req)
		require.NoError(t, err)
		keys := []wechat.PublicKey{{MerchantID: mchid, KeyID: fakechannel.WeChatPlatformKeyID, Key: &k.Platform.PublicKey}}
		return wechat.ReadAnswer(target, resp, keys, time.Now())
	}
	for _, mchid := range []string{fakechannel.WeChatMerchantID, other} {
		ans, err := askAs(mchid)
		require.NoError(t, err, mchid)
		require.Equal(t, channels.QuerySettled, ans.Outcome, "%s: %s", mchid, ans.Detail)
	}
	ans, err := askAs(unknown)
	require.NoError(t, err)
	require.Equal(t, channels.QueryRefused, ans.Outcome, ans.Detail)
	reqs := s.Requests()
	require.Len(t, reqs, 3)
	require.True(t, reqs[0].SignatureOK)
	require.True(t, reqs[1].SignatureOK)
	require.Equal(t, other, reqs[1].Merchant)
	require.False(t, reqs[2].SignatureOK)
	require.Contains(t, reqs[2].SignatureError, "unknown mchid")
}
