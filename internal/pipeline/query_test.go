package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/channels/querytest"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// queryEnv is a pipeline on MariaDB whose decoder verifies statement
// signatures with stmt and query answers with the kit's channel keys, as
// the worker's does.
type queryEnv struct {
	*pipelineEnv
	kit  querytest.Kit
	stmt statementauth.Keys
}

func newQueryEnv(t *testing.T) *queryEnv {
	t.Helper()
	kit := querytest.New(t)
	stmt, err := statementauth.Parse([]byte("k1=0123456789abcdef0123456789abcdef\n"))
	require.NoError(t, err)
	e := newPipelineEnv(t)
	e.p.Decoder = channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(stmt),
		channels.VerifyQueryAnswers(channels.FixedQueryKeys(kit.Keys)))
	return &queryEnv{pipelineEnv: e, kit: kit, stmt: stmt}
}

// answer is a's query message at offset, signed with the statement key
// when signed is set.
func (e *queryEnv) answer(t *testing.T, a querytest.Answer, offset int64, signed bool) kafka.Message {
	t.Helper()
	value := a.Value(t)
	msg := kafka.Message{Topic: "channel-events", Partition: 7, Offset: offset, Value: value}
	if signed {
		sig, err := e.stmt.Sign(value)
		require.NoError(t, err)
		msg.Headers = []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}}
	}
	return msg
}

// callback is a channel callback at offset.
func callback(value []byte, offset int64) kafka.Message {
	return kafka.Message{Topic: "channel-events", Partition: 8, Offset: offset, Value: value}
}

// handleAll hands msgs to the pipeline as one batch (or one at a time)
// and requires every one done.
func (e *queryEnv) handleAll(t *testing.T, batch bool, msgs ...kafka.Message) {
	t.Helper()
	if !batch {
		for _, m := range msgs {
			e.handleAll(t, true, m)
		}
		return
	}
	states := make([]MessageState, len(msgs))
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
	for i := range states {
		require.True(t, states[i].Done(), "message %d done", i)
	}
}

// postings counts the ledger rows of key.
func (e *queryEnv) postings(t *testing.T, tenant int64, key eventkey.Key) int {
	t.Helper()
	n, err := e.db.NewSelect().Table("ss_ledger_entry").
		Where("tenant_id = ? AND idempotent_key = ?", tenant, string(key)).Count(context.Background())
	require.NoError(t, err)
	return int(n)
}

func (e *queryEnv) requireUnclaimed(t *testing.T, tenant int64, key eventkey.Key) {
	t.Helper()
	_, err := e.claims.Get(context.Background(), tenant, key)
	require.Error(t, err, "%s: nothing claimed", key)
	require.Zero(t, e.postings(t, tenant, key))
}

// TestQueryAnswerAndCallbackSettleOnce: the callback and the query answer
// of one trade, consumed in either order, in one batch or apart, settle
// once: whichever comes second is a duplicate of the first's claim, and the
// ledger holds one posting (two rows) for the key. For each channel.
func TestQueryAnswerAndCallbackSettleOnce(t *testing.T) {
	at := channelstest.BaseTime.Add(2 * time.Minute)
	seq := 800
	for _, ch := range []channels.Channel{channels.WeChat, channels.Alipay, channels.SQB} {
		for _, answerFirst := range []bool{true, false} {
			for _, batch := range []bool{true, false} {
				seq++
				name := string(ch) + map[bool]string{true: " answer first", false: " callback first"}[answerFirst] +
					map[bool]string{true: " one batch", false: " apart"}[batch]
				t.Run(name, func(t *testing.T) {
					e := newQueryEnv(t)
					tr := channelstest.NewTrade(ch, seq)
					cbValue := channelstest.PaymentEnvelope(tr, channelstest.Delivery{})
					var a querytest.Answer
					switch ch {
					case channels.WeChat:
						a = e.kit.WeChatPayment(t, tr, "SUCCESS", e.kit.Trusted, at, at)
					case channels.Alipay:
						a = e.kit.AlipayPayment(t, tr, "TRADE_SUCCESS", e.kit.Trusted, at)
					default:
						env, err := channels.ParseEnvelope(cbValue)
						require.NoError(t, err)
						a = e.kit.SQBOrder(tr, channels.QueryPayment, "", []byte(env.Body), at)
					}
					ans, cb := e.answer(t, a, 0, true), callback(cbValue, 0)
					msgs := []kafka.Message{cb, ans}
					if answerFirst {
						msgs = []kafka.Message{ans, cb}
					}
					e.handleAll(t, batch, msgs...)
					ev := e.decode(t, cbValue)
					rec := e.claim(t, ev)
					assert.Equal(t, "SETTLED", string(rec.Status))
					assert.Equal(t, ev.Fingerprint, rec.Fingerprint)
					wantMaker := msgs[0]
					assert.True(t, rec.MadeBy(srcOf(wantMaker)), "the first message made the claim")
					assert.Equal(t, 2, e.postings(t, tr.TenantID, ev.Key), "one posting")
					src := settled.SourceCallback
					if answerFirst {
						src = settled.SourceQuery
					}
					e.checkSource(t, ev, src)
					assert.InDelta(t, 1, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "acquired"), 0)
					assert.InDelta(t, 1, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "duplicate"), 0)
					assert.Empty(t, e.dl.letters())
				})
			}
		}
	}
}

func srcOf(m kafka.Message) idempotent.Source {
	return idempotent.Source{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
}

// TestUnauthenticatedAnswersClaimNothing: a WeChat answer signed with a
// key no entry trusts, one replayed (its timestamp 300 s or more before the
// envelope's received_at), an Alipay answer signed with another key, and a
// good answer without the statement signature are dead-lettered
// unauthenticated and claim nothing, in a batch of many and one at a time;
// the good answer, signed, settles beside them.
func TestUnauthenticatedAnswersClaimNothing(t *testing.T) {
	at := channelstest.BaseTime.Add(2 * time.Minute)
	for _, batch := range []bool{true, false} {
		t.Run(map[bool]string{true: "one batch", false: "one at a time"}[batch], func(t *testing.T) {
			e := newQueryEnv(t)
			forgedTr, replayTr := channelstest.NewTrade(channels.WeChat, 821), channelstest.NewTrade(channels.WeChat, 822)
			alipayTr, unsignedTr := channelstest.NewTrade(channels.Alipay, 823), channelstest.NewTrade(channels.WeChat, 824)
			goodTr := channelstest.NewTrade(channels.WeChat, 825)
			msgs := []kafka.Message{
				e.answer(t, e.kit.WeChatPayment(t, forgedTr, "SUCCESS", e.kit.Forger, at, at), 0, true),
				e.answer(t, e.kit.WeChatPayment(t, replayTr, "SUCCESS", e.kit.Trusted, at, at.Add(10*time.Minute)), 1, true),
				e.answer(t, e.kit.AlipayPayment(t, alipayTr, "TRADE_SUCCESS", e.kit.Forger, at), 2, true),
				e.answer(t, e.kit.WeChatPayment(t, unsignedTr, "SUCCESS", e.kit.Trusted, at, at), 3, false),
				e.answer(t, e.kit.WeChatPayment(t, goodTr, "SUCCESS", e.kit.Trusted, at, at), 4, true),
			}
			e.handleAll(t, batch, msgs...)
			u := channels.KindUnauthenticated
			assert.Equal(t, []deadLetterAt{{0, u}, {1, u}, {2, u}, {3, u}}, e.dl.letters())
			for _, tr := range []channelstest.Trade{forgedTr, replayTr, alipayTr, unsignedTr} {
				e.requireUnclaimed(t, tr.TenantID, e.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})).Key)
			}
			good := e.decode(t, channelstest.PaymentEnvelope(goodTr, channelstest.Delivery{}))
			assert.Equal(t, "SETTLED", string(e.claim(t, good).Status))
		})
	}
}

// sqbRefunded is Shouqianba's answer about tr after refund r (the refund
// callback's order, numbered by refund_request_no), and the payment and
// refund callbacks' events.
func sqbRefunded(t *testing.T, e *queryEnv, tr channelstest.Trade, r channelstest.Refund, at time.Time) (querytest.Answer, []byte, []byte) {
	t.Helper()
	d := channelstest.Delivery{SQB: channelstest.SQBRequestNo}
	refundCB := sqb.SampleRefund(tr, r, d)
	env, err := channels.ParseEnvelope(refundCB)
	require.NoError(t, err)
	return e.kit.SQBOrder(tr, channels.QueryRefund, r.No, []byte(env.Body), at), sqb.SamplePayment(tr, d), refundCB
}

// TestQueryAnswerProvingTwoEvents: a Shouqianba answer about a refunded
// order proves the payment and the refund; each is claimed on its own key
// and settled, whether neither, one or both callbacks came first, and the
// callbacks that come after are duplicates. The trade's totals are the
// callbacks' whatever the order.
func TestQueryAnswerProvingTwoEvents(t *testing.T) {
	at := channelstest.BaseTime.Add(3 * time.Hour)
	for _, tc := range []struct {
		name   string
		before []int // callbacks handled before the answer: 0 payment, 1 refund
	}{
		{"answer first", nil},
		{"payment callback first", []int{0}},
		{"refund callback first", []int{1}},
		{"both callbacks first", []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newQueryEnv(t)
			tr := channelstest.NewTrade(channels.SQB, 831)
			r := channelstest.Refund{No: "RF831", Cumulative: 700}
			a, pay, refund := sqbRefunded(t, e, tr, r, at)
			cbs := [][]byte{pay, refund}
			for i, k := range tc.before {
				e.handleAll(t, true, callback(cbs[k], int64(i)))
			}
			e.handleAll(t, true, e.answer(t, a, 0, true))
			for i, v := range cbs {
				e.handleAll(t, true, callback(v, int64(10+i)))
			}
			for _, v := range cbs {
				ev := e.decode(t, v)
				assert.Equal(t, "SETTLED", string(e.claim(t, ev).Status), ev.Key)
				assert.Equal(t, 2, e.postings(t, tr.TenantID, ev.Key), "%s posted once", ev.Key)
			}
			o, err := settlement.GetOrder(context.Background(), e.db, tr.TenantID, channels.SQB, tr.TradeNo)
			require.NoError(t, err)
			assert.Equal(t, tr.Total, o.Amount)
			assert.Equal(t, int64(700), o.RefundedAmount)
			assert.InDelta(t, 2, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "acquired"), 0)
			assert.Empty(t, e.dl.letters())
		})
	}
}

// TestTwoEventAnswerWithOneConflict: a Shouqianba answer proving the
// payment and a refund whose key a callback already claimed with other
// contents (another cumulative amount): the payment settles through the
// answer, the refund's conflict dead-letters the message once, the
// message is done, and the refund posted by the callback stays as it was.
func TestTwoEventAnswerWithOneConflict(t *testing.T) {
	e := newQueryEnv(t)
	tr := channelstest.NewTrade(channels.SQB, 833)
	a, pay, _ := sqbRefunded(t, e, tr, channelstest.Refund{No: "RF833", Cumulative: 700}, channelstest.BaseTime.Add(3*time.Hour))
	earlier := sqb.SampleRefund(tr, channelstest.Refund{No: "RF833", Cumulative: 500}, channelstest.Delivery{SQB: channelstest.SQBRequestNo})
	e.handleAll(t, true, callback(earlier, 1))
	payEv, refundEv := e.decode(t, pay), e.decode(t, earlier)
	require.Equal(t, 2, e.postings(t, tr.TenantID, refundEv.Key), "the refund callback posted")

	msgs := []kafka.Message{e.answer(t, a, 5, true)}
	states := make([]MessageState, 1)
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
	require.True(t, states[0].Done(), "a conflict is a durable outcome")
	assert.Equal(t, []deadLetterAt{{5, channels.KindConflict}}, e.dl.letters())
	assert.Equal(t, "SETTLED", string(e.claim(t, payEv).Status))
	assert.Equal(t, 2, e.postings(t, tr.TenantID, payEv.Key), "the payment posted once")
	assert.Equal(t, 2, e.postings(t, tr.TenantID, refundEv.Key), "the refund posted once, by its callback")
	o, err := settlement.GetOrder(context.Background(), e.db, tr.TenantID, channels.SQB, tr.TradeNo)
	require.NoError(t, err)
	assert.Equal(t, int64(500), o.RefundedAmount, "the callback's amount stands")
}

// failingSettler fails every settlement that includes key while armed,
// and settles as Settler otherwise.
type failingSettler struct {
	Settler
	mu    sync.Mutex
	key   eventkey.Key
	armed bool
}

func (f *failingSettler) fail(evs []channels.Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range evs {
		if ev.Key == f.key && f.armed {
			return true
		}
	}
	return false
}

func (f *failingSettler) disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
}

func (f *failingSettler) SettleBatchFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]settlement.Result, error) {
	if f.fail(evs) {
		return nil, errors.New("injected: the refund's settlement fails")
	}
	return f.Settler.SettleBatchFrom(ctx, evs, sources)
}

func (f *failingSettler) SettleFrom(ctx context.Context, ev channels.Event, src settled.Source) (settlement.Result, error) {
	if f.fail([]channels.Event{ev}) {
		return settlement.Result{}, errors.New("injected: the refund's settlement fails")
	}
	return f.Settler.SettleFrom(ctx, ev, src)
}

// TestTwoEventAnswerIsDoneOnlyWhenBothAre: when one of an answer's events
// fails to settle, the message is not done (its offset is not committed
// past); the retry of the same message with its state settles the rest and
// counts each event once.
func TestTwoEventAnswerIsDoneOnlyWhenBothAre(t *testing.T) {
	e := newQueryEnv(t)
	tr := channelstest.NewTrade(channels.SQB, 841)
	a, pay, refund := sqbRefunded(t, e, tr, channelstest.Refund{No: "RF841", Cumulative: 300}, channelstest.BaseTime.Add(3*time.Hour))
	refundKey := e.decode(t, refund).Key
	fs := &failingSettler{Settler: e.svc, key: refundKey, armed: true}
	e.p.Settler = fs
	msgs := []kafka.Message{e.answer(t, a, 0, true)}
	states := make([]MessageState, 1)
	require.Error(t, e.p.Handle(context.Background(), msgs, states))
	require.False(t, states[0].Done(), "not done while the refund is not durable")
	assert.Equal(t, "SETTLED", string(e.claim(t, e.decode(t, pay)).Status), "the payment settled alone")
	assert.Equal(t, "ACQUIRED", string(e.claim(t, e.decode(t, refund)).Status), "the refund claimed, not settled")
	fs.disarm()
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
	require.True(t, states[0].Done())
	for _, v := range [][]byte{pay, refund} {
		ev := e.decode(t, v)
		assert.Equal(t, "SETTLED", string(e.claim(t, ev).Status), ev.Key)
		assert.Equal(t, 2, e.postings(t, tr.TenantID, ev.Key))
	}
	assert.InDelta(t, 2, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "acquired"), 0)
}

// TestAnswerAndCallbackRace: a query answer and the callback of one trade
// handled at once by two pipelines (two workers) on the same database: the
// unique index lets exactly one claim, the ledger holds one posting.
func TestAnswerAndCallbackRace(t *testing.T) {
	at := channelstest.BaseTime.Add(2 * time.Minute)
	for round := range 8 {
		e := newQueryEnv(t)
		// The second worker: its own claim store and settlement service
		// on the same database, counting into the same metrics.
		claims2 := idempotent.NewStore(e.db)
		svc2, err := settlement.New(e.db, claims2, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
		require.NoError(t, err)
		other := Pipeline{
			Decoder: e.p.Decoder, Claims: claims2, Settler: svc2, DeadLetterer: e.dl,
			Metrics: e.p.Metrics, Logger: e.p.Logger,
		}
		tr := channelstest.NewTrade(channels.WeChat, 850+round)
		cbValue := channelstest.PaymentEnvelope(tr, channelstest.Delivery{})
		msgs := []kafka.Message{e.answer(t, e.kit.WeChatPayment(t, tr, "SUCCESS", e.kit.Trusted, at, at), 0, true), callback(cbValue, 0)}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, p := range []*Pipeline{e.p, &other} {
			wg.Go(func() {
				states := make([]MessageState, 1)
				for {
					err := p.Handle(context.Background(), msgs[i:i+1], states)
					if !errors.Is(err, ErrClaimInFlight) {
						errs[i] = err
						return
					}
				}
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		ev := e.decode(t, cbValue)
		assert.Equal(t, "SETTLED", string(e.claim(t, ev).Status))
		assert.Equal(t, 2, e.postings(t, tr.TenantID, ev.Key))
		assert.InDelta(t, 1, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "acquired"), 0)
	}
}

// closedRecorder records the closed answers the pipeline hands it, and
// fails while failing is set.
type closedRecorder struct {
	mu      sync.Mutex
	got     []channels.QueryTarget
	failing bool
}

func (c *closedRecorder) QueryClosed(_ context.Context, q channels.QueryAnswered) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing {
		return errors.New("injected: the registration cannot be closed")
	}
	c.got = append(c.got, q.Target)
	return nil
}

// TestQueryAnswersThatPostNothing: authenticated answers that are not
// settled (not paid yet, closed, failed) claim nothing and count ignored;
// a closed one is handed to the QueryCloser, and the message is not done
// while the closer fails.
func TestQueryAnswersThatPostNothing(t *testing.T) {
	e := newQueryEnv(t)
	closer := &closedRecorder{failing: true}
	e.p.QueryClosed = closer
	at := channelstest.BaseTime.Add(2 * time.Minute)
	tr := channelstest.NewTrade(channels.WeChat, 861)
	pending := e.answer(t, e.kit.WeChatPayment(t, tr, "NOTPAY", e.kit.Trusted, at, at), 0, true)
	closedA := e.kit.WeChatPayment(t, tr, "CLOSED", e.kit.Trusted, at, at)
	closed := e.answer(t, closedA, 1, true)
	failed := e.answer(t, e.kit.WeChatPayment(t, tr, "PAYERROR", e.kit.Trusted, at, at), 2, true)
	msgs := []kafka.Message{pending, closed, failed}
	states := make([]MessageState, len(msgs))
	require.Error(t, e.p.Handle(context.Background(), msgs, states))
	require.True(t, states[0].Done())
	require.False(t, states[1].Done(), "not done while its registration is not closed")
	closer.mu.Lock()
	closer.failing = false
	closer.mu.Unlock()
	require.NoError(t, e.p.Handle(context.Background(), msgs, states))
	for i := range states {
		require.True(t, states[i].Done())
	}
	assert.Equal(t, []channels.QueryTarget{closedA.Target}, closer.got)
	e.requireUnclaimed(t, tr.TenantID, e.decode(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{})).Key)
	assert.InDelta(t, 3, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "ignored"), 0)
	assert.Empty(t, e.dl.letters())
}

// TestQueryAnswersAreBoundToTheirTenant: under a merchant binding, an
// answer about a merchant bound to another tenant, and an Alipay answer
// verified with the key of an application not the tenant's, are
// dead-lettered tenant_mismatch with nothing claimed; the others settle.
func TestQueryAnswersAreBoundToTheirTenant(t *testing.T) {
	e := newQueryEnv(t)
	dl := &reasonDeadLetterer{}
	e.p.DeadLetterer = dl
	path := filepath.Join(t.TempDir(), "merchants")
	writeBinding(t, path, "1001 WECHAT "+wechat.SampleMerchantID+"\n2002 ALIPAY "+querytest.AlipayMerchant+
		"\n2002 ALIPAY app_id 2021000000000999\n")
	f, err := merchantbinding.Load(path)
	require.NoError(t, err)
	e.p.Merchants = f
	at := channelstest.BaseTime.Add(2 * time.Minute)
	own := channelstest.NewTrade(channels.WeChat, 871)
	foreign := channelstest.NewTrade(channels.WeChat, 872)
	foreign.TenantID = 2002
	otherApp := channelstest.NewTrade(channels.Alipay, 873)
	otherApp.TenantID = 2002
	e.handleAll(t, true,
		e.answer(t, e.kit.WeChatPayment(t, own, "SUCCESS", e.kit.Trusted, at, at), 0, true),
		e.answer(t, e.kit.WeChatPayment(t, foreign, "SUCCESS", e.kit.Trusted, at, at), 1, true),
		e.answer(t, e.kit.AlipayPayment(t, otherApp, "TRADE_SUCCESS", e.kit.Trusted, at), 2, true),
	)
	got := dl.letters()
	require.Len(t, got, 2)
	assert.Contains(t, got[0], "tenant_mismatch: WECHAT merchant "+wechat.SampleMerchantID+" is not bound to tenant 2002")
	assert.Contains(t, got[1], "tenant_mismatch")
	assert.Contains(t, got[1], querytest.AlipayAppID)
	assert.Equal(t, "SETTLED", string(e.claim(t, e.decode(t, channelstest.PaymentEnvelope(own, channelstest.Delivery{}))).Status))
	e.requireUnclaimed(t, 2002, e.decode(t, channelstest.PaymentEnvelope(foreign, channelstest.Delivery{})).Key)
	e.requireUnclaimed(t, 2002, e.decode(t, channelstest.PaymentEnvelope(otherApp, channelstest.Delivery{})).Key)
}

// alipayRefundAnswer is Alipay's answer to the refund query about r of tr,
// signed with the kit's trusted key, received at at.
func alipayRefundAnswer(t *testing.T, tr channelstest.Trade, r channelstest.Refund, at time.Time) querytest.Answer {
	t.Helper()
	kit := querytest.New(t)
	body, err := alipay.SampleRefundQueryAnswer(tr, r, kit.Trusted)
	require.NoError(t, err)
	return querytest.Answer{
		Target: channels.QueryTarget{
			TenantID: tr.TenantID, Channel: channels.Alipay, Kind: channels.QueryRefund, MerchantID: querytest.AlipayMerchant,
			TradeNo: tr.TradeNo, MerchantOrderNo: tr.MerchantOrderNo, RefundNo: r.No,
		},
		Body: body, ReceivedAt: at,
	}
}

// TestAlipayRefundAnswers: Alipay's refund query names this refund's
// amount, its callback the trade's cumulative. A full refund's answer is
// the callback's event (the cumulative is the total): answer and callback
// settle once in either order, the trade refunded in full. A partial
// refund's answer proves no event (docs/queries.md says why): it is
// ignored and claims nothing, and the callbacks alone settle the trade.
func TestAlipayRefundAnswers(t *testing.T) {
	at := channelstest.BaseTime.Add(3 * time.Hour)
	for _, answerFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "full refund, answer first", false: "full refund, callback first"}[answerFirst], func(t *testing.T) {
			e := newQueryEnv(t)
			tr := channelstest.NewTrade(channels.Alipay, 881)
			r := channelstest.Refund{No: "RF881", Amount: tr.Total, Cumulative: tr.Total}
			pay := callback(alipay.SamplePayment(tr, channelstest.Delivery{}), 0)
			refundCB := callback(alipay.SampleRefund(tr, r, channelstest.Delivery{}), 1)
			ans := e.answer(t, alipayRefundAnswer(t, tr, r, at), 0, true)
			e.handleAll(t, true, pay)
			if answerFirst {
				e.handleAll(t, true, ans, refundCB)
			} else {
				e.handleAll(t, true, refundCB, ans)
			}
			ev := e.decode(t, refundCB.Value)
			assert.Equal(t, "SETTLED", string(e.claim(t, ev).Status))
			assert.Equal(t, 2, e.postings(t, tr.TenantID, ev.Key), "posted once")
			o, err := settlement.GetOrder(context.Background(), e.db, tr.TenantID, channels.Alipay, tr.TradeNo)
			require.NoError(t, err)
			assert.Equal(t, tr.Total, o.RefundedAmount)
			assert.InDelta(t, 1, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "duplicate"), 0)
			assert.Empty(t, e.dl.letters())
		})
	}
	t.Run("partial refund", func(t *testing.T) {
		e := newQueryEnv(t)
		tr := channelstest.NewTrade(channels.Alipay, 882)
		r1 := channelstest.Refund{No: "RF882a", Amount: 500, Cumulative: 500}
		r2 := channelstest.Refund{No: "RF882b", Amount: 300, Cumulative: 800, At: channelstest.BaseTime.Add(2 * time.Hour)}
		e.handleAll(t, true, callback(alipay.SamplePayment(tr, channelstest.Delivery{}), 0))
		e.handleAll(t, true, e.answer(t, alipayRefundAnswer(t, tr, r2, at), 0, true))
		cb2 := callback(alipay.SampleRefund(tr, r2, channelstest.Delivery{}), 1)
		e.requireUnclaimed(t, tr.TenantID, e.decode(t, cb2.Value).Key)
		assert.InDelta(t, 1, sumCounter(t, e.pipelineEnv, "paycb_events_total", "outcome", "ignored"), 0)
		e.handleAll(t, true, cb2, callback(alipay.SampleRefund(tr, r1, channelstest.Delivery{}), 2))
		o, err := settlement.GetOrder(context.Background(), e.db, tr.TenantID, channels.Alipay, tr.TradeNo)
		require.NoError(t, err)
		assert.Equal(t, int64(800), o.RefundedAmount, "the callbacks' cumulative, whatever the answer said")
	})
}
