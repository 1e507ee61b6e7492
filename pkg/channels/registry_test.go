package channels_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// TestRegistryBuiltIn pins the built-in channels and the facts the rest of
// the worker asks of them: a change here is a change of behaviour.
func TestRegistryBuiltIn(t *testing.T) {
	require.Equal(t, []channels.Channel{channels.WeChat, channels.Alipay, channels.SQB}, channels.Codes())
	assert.Equal(t, "WECHAT, ALIPAY or SQB", channels.CodeList())
	want := map[channels.Channel]struct {
		contentType, merchant, statementMerchant, cancel string
		refunds                                          channels.RefundModel
	}{
		channels.WeChat: {channels.ContentTypeJSON, "mchid or sub_mchid", "商户号 or 特约商户号", "", channels.PerRefund},
		channels.Alipay: {channels.ContentTypeForm, "seller_id", "the #账号 header", "", channels.CumulativeRefunds},
		channels.SQB:    {channels.ContentTypeJSON, "terminal_sn", "terminal_sn", "CANCEL", channels.CumulativeRefunds},
	}
	for _, spec := range channels.All() {
		t.Run(string(spec.Code), func(t *testing.T) {
			w := want[spec.Code]
			require.NoError(t, spec.Validate())
			assert.Equal(t, w.contentType, spec.ContentType)
			assert.Equal(t, w.contentType, spec.Code.ContentType())
			assert.Equal(t, w.merchant, spec.MerchantField)
			assert.Equal(t, w.statementMerchant, spec.StatementMerchantField)
			assert.Equal(t, w.refunds, spec.Refunds)
			assert.Equal(t, w.refunds == channels.CumulativeRefunds, spec.Code.Cumulative())
			assert.Equal(t, w.cancel, spec.CancelRefundNo)
			assert.Equal(t, w.cancel != "", spec.Code.HasCancel())
			assert.Equal(t, string(spec.Code), spec.MetricLabel())
			assert.Len(t, spec.FingerprintFields, 5, "type, total, refund, cumulative or currency, merchant order no")
			assert.True(t, spec.Code.Valid())
			got, ok := channels.Lookup(spec.Code)
			require.True(t, ok)
			assert.Equal(t, spec.Code, got.Code)
		})
	}
	for _, c := range []channels.Channel{"", "wechat", "PAYPAL", "SQB "} {
		_, ok := channels.Lookup(c)
		assert.False(t, ok, "%q", c)
		assert.False(t, c.Valid())
		assert.False(t, c.Cumulative())
		assert.Empty(t, c.ContentType())
	}
	k, err := channels.CancelKey(channels.SQB, "7893250000000001")
	require.NoError(t, err)
	assert.Equal(t, eventkey.Key("SQB:7893250000000001:REFUND_SUCCEEDED:CANCEL"), k)
	_, err = channels.CancelKey(channels.WeChat, "1")
	require.Error(t, err, "WeChat has no cancel")
	all := channels.All()
	all[0].Code = "CHANGED"
	assert.Equal(t, channels.WeChat, channels.All()[0].Code, "All returns a copy")
}

func TestSpecValidate(t *testing.T) {
	ok := channels.Spec{
		Code: "TEST1", Name: "Test", ContentType: channels.ContentTypeJSON, Refunds: channels.PerRefund,
		MerchantField: "m", StatementMerchantField: "m", FingerprintFields: []string{"f"},
		Decode: func(channels.Envelope, channels.KeyProvider) (channels.Result, error) { return channels.Result{}, nil },
	}
	require.NoError(t, ok.Validate())
	for name, edit := range map[string]func(s *channels.Spec){
		"lower-case code":    func(s *channels.Spec) { s.Code = "test" },
		"code with a colon":  func(s *channels.Spec) { s.Code = "A:B" },
		"long code":          func(s *channels.Spec) { s.Code = "ABCDEFGHIJKLMNOPQ" },
		"no name":            func(s *channels.Spec) { s.Name = "" },
		"other content type": func(s *channels.Spec) { s.ContentType = "text/xml" },
		"no refund model":    func(s *channels.Spec) { s.Refunds = 0 },
		"per-refund cancel":  func(s *channels.Spec) { s.CancelRefundNo = "CANCEL" },
		"no merchant field":  func(s *channels.Spec) { s.MerchantField = "" },
		"no fingerprint":     func(s *channels.Spec) { s.FingerprintFields = nil },
		"no decoder":         func(s *channels.Spec) { s.Decode = nil },
		"query builder alone": func(s *channels.Spec) {
			s.BuildQuery = func(channels.QueryTarget, channels.QueryCredentials, string, time.Time, string) (channels.QueryRequest, error) {
				return channels.QueryRequest{}, nil
			}
		},
		"credentials parser alone": func(s *channels.Spec) {
			s.ParseQueryCredentials = func(channels.QueryCredentialsEntry) (channels.QueryCredentials, error) { return nil, nil }
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := ok
			edit(&s)
			require.Error(t, s.Validate())
		})
	}
}

// TestRegisterThroughChannelstest: a channel registered for a test is known
// to every lookup and decoded by a Decoder, refused twice, and gone when the
// test ends.
func TestRegisterThroughChannelstest(t *testing.T) {
	builtIn := channels.Codes()
	const code channels.Channel = "TESTPAY"
	decode := func(env channels.Envelope, _ channels.KeyProvider) (channels.Result, error) {
		var b struct {
			Trade string `json:"trade"`
			Total int64  `json:"total"`
		}
		if err := json.Unmarshal([]byte(env.Body), &b); err != nil {
			return channels.Result{}, &channels.Error{Kind: channels.KindMalformed, Err: err}
		}
		k, err := eventkey.NewPaymentKey(string(code), b.Trade)
		if err != nil {
			return channels.Result{}, &channels.Error{Kind: channels.KindMalformed, Err: err}
		}
		return channels.Result{Event: channels.Event{
			Type: eventkey.PaymentReceived, TradeNo: b.Trade, MerchantOrderNo: "O-" + b.Trade,
			OrderTotal: b.Total, OccurredAt: channelstest.BaseTime.UTC(), Key: k,
		}}, nil
	}
	spec := channels.Spec{
		Code: code, Name: "Test Pay", ContentType: channels.ContentTypeJSON, Refunds: channels.CumulativeRefunds, CancelRefundNo: "VOID",
		MerchantField: "merchant", StatementMerchantField: "merchant", FingerprintFields: []string{"total"}, Decode: decode,
	}
	body := func(t channelstest.Trade, _ channelstest.Delivery) []byte {
		return channelstest.Envelope(t.TenantID, t.Channel, `{"trade":"`+t.TradeNo+`","total":2580}`, channelstest.BaseTime.Add(time.Second))
	}
	bodies := channelstest.Bodies{
		TradeNo: func(seq int) string { return "T" + string(rune('0'+seq%10)) },
		Payment: body,
		Refund:  func(t channelstest.Trade, _ channelstest.Refund, d channelstest.Delivery) []byte { return body(t, d) },
	}
	t.Run("refused", func(t *testing.T) {
		for name, tc := range map[string]struct {
			spec   channels.Spec
			bodies channelstest.Bodies
		}{
			"a built-in code":   {func() channels.Spec { s := spec; s.Code = channels.SQB; return s }(), bodies},
			"an invalid spec":   {func() channels.Spec { s := spec; s.Name = ""; return s }(), bodies},
			"no refund builder": {spec, channelstest.Bodies{TradeNo: bodies.TradeNo, Payment: bodies.Payment}},
		} {
			rec := &fatalRecorder{TB: t}
			channelstest.Register(rec, tc.spec, tc.bodies)
			assert.NotEmpty(t, rec.fatal, name)
		}
		assert.False(t, code.Valid(), "nothing registered")
		assert.Equal(t, builtIn, channels.Codes())
	})
	t.Run("registered", func(t *testing.T) {
		require.False(t, code.Valid())
		channelstest.Register(t, spec, bodies)
		assert.True(t, code.Valid())
		assert.True(t, code.Cumulative())
		assert.Equal(t, "VOID", code.CancelRefundNo())
		assert.Equal(t, append(slices.Clone(builtIn), code), channels.Codes(), "added last")
		assert.True(t, strings.HasSuffix(channels.CodeList(), " or TESTPAY"), channels.CodeList())
		chs, err := channels.ParseChannels([]string{"TESTPAY", "SQB"})
		require.NoError(t, err)
		assert.Equal(t, []channels.Channel{code, channels.SQB}, chs)

		tr := channelstest.NewTrade(code, 3)
		assert.Equal(t, "T3", tr.TradeNo)
		res := mustDecode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
		assert.Equal(t, code, res.Event.Channel)
		assert.Equal(t, eventkey.Key("TESTPAY:T3:PAYMENT_RECEIVED"), res.Event.Key)
		assert.Equal(t, channels.CurrencyCNY, res.Event.Currency)
		assert.Equal(t, channels.Fingerprint(res.Event), res.Event.Fingerprint)

		_, err = channels.CancelKey(code, "T3")
		require.NoError(t, err)
	})
	assert.False(t, code.Valid(), "removed when the test that registered it ended")
	assert.Equal(t, builtIn, channels.Codes())
	_, ok := channelstest.BodiesOf(code)
	assert.False(t, ok)
	_, err := channels.NewDecoder(nil).Decode(channelstest.Envelope(1001, code, `{"trade":"T3","total":2580}`, channelstest.BaseTime))
	var e *channels.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, channels.KindUnknownChannel, e.Kind)
}

// TestBodiesCoverRegistry: channelstest builds callbacks of every
// registered channel, so the tests that range over channels.All reach a new
// channel too.
func TestBodiesCoverRegistry(t *testing.T) {
	for _, spec := range channels.All() {
		b, ok := channelstest.BodiesOf(spec.Code)
		require.True(t, ok, "channelstest has no bodies for %s", spec.Code)
		tr := channelstest.NewTrade(spec.Code, 7)
		assert.Equal(t, b.TradeNo(7), tr.TradeNo)
		assert.Equal(t, spec.Code, mustDecode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})).Event.Channel)
		assert.Equal(t, eventkey.RefundSucceeded, mustDecode(t, channelstest.RefundEnvelope(tr, channelstest.Refund{No: "RF-7", Amount: 100}, channelstest.Delivery{})).Event.Type)
	}
}

// TestRegistryReadsWhileATestRegisters: lookups from other goroutines see
// the registry before or after a registration, never a torn one (run with
// -race).
func TestRegistryReadsWhileATestRegisters(t *testing.T) {
	const code channels.Channel = "RACEPAY"
	spec := channels.Spec{
		Code: code, Name: "Race Pay", ContentType: channels.ContentTypeJSON, Refunds: channels.PerRefund,
		MerchantField: "m", StatementMerchantField: "m", FingerprintFields: []string{"f"},
		Decode: func(channels.Envelope, channels.KeyProvider) (channels.Result, error) { return channels.Result{}, nil },
	}
	env := func(channelstest.Trade, channelstest.Delivery) []byte { return nil }
	bodies := channelstest.Bodies{
		TradeNo: func(int) string { return "R1" }, Payment: env,
		Refund: func(channelstest.Trade, channelstest.Refund, channelstest.Delivery) []byte { return nil },
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				all := channels.All()
				if n := len(all); n != 3 && n != 4 {
					t.Errorf("registry of %d channels", n)
				}
				if !channels.WeChat.Valid() || !channels.SQB.HasCancel() {
					t.Error("a built-in channel went missing")
				}
				_ = code.Valid()
			}
		})
	}
	for range 20 {
		t.Run("register", func(t *testing.T) {
			channelstest.Register(t, spec, bodies)
			require.True(t, code.Valid())
		})
		require.False(t, code.Valid())
	}
	close(stop)
	wg.Wait()
}

// fatalRecorder records Fatalf instead of ending the test, to see
// channelstest.Register refuse.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
