package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// reasonDeadLetterer keeps each dead letter's kind and x-error, in the
// order written.
type reasonDeadLetterer struct {
	mu  sync.Mutex
	got []string
}

func (d *reasonDeadLetterer) DeadLetter(_ context.Context, _ kafka.Message, kind channels.ErrorKind, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, string(kind)+": "+reason)
	return nil
}

func (d *reasonDeadLetterer) letters() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// writeBinding writes a merchant binding file.
func writeBinding(t *testing.T, path, contents string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(contents), 0o600))
}

// TestTenantMismatchIsDeadLetteredBeforeTheClaim: with a merchant binding,
// in one batch (and so in batches of one, the same path), the callback of a
// merchant bound to its tenant settles; one of a merchant bound to another
// tenant, one of a merchant bound to none and one that names no merchant
// are dead-lettered tenant_mismatch with nothing claimed; a statement event
// is not checked. After the binding is fixed and re-read, the same message
// settles.
func TestTenantMismatchIsDeadLetteredBeforeTheClaim(t *testing.T) {
	for _, batch := range []bool{true, false} {
		name := "one batch"
		if !batch {
			name = "one message at a time"
		}
		t.Run(name, func(t *testing.T) {
			e := newPipelineEnv(t)
			dl := &reasonDeadLetterer{}
			e.p.DeadLetterer = dl
			path := filepath.Join(t.TempDir(), "merchants")
			// Tenant 1001 owns the channelstest WeChat direct merchant and
			// SQB terminal; the Alipay seller belongs to tenant 2002.
			writeBinding(t, path, "1001 WECHAT 1230000109\n1001 SQB 01939202039923029\n2002 ALIPAY 2088101117955611\n")
			f, err := merchantbinding.Load(path)
			require.NoError(t, err)
			e.p.Merchants = f

			bound := channelstest.NewTrade(channels.WeChat, 701)
			otherTenants := channelstest.NewTrade(channels.Alipay, 702)
			unbound := channelstest.NewTrade(channels.WeChat, 703) // partner mode: sub_mchid 1900000109, bound nowhere
			noMerchant := channelstest.NewTrade(channels.SQB, 704)
			stmt := channelstest.NewTrade(channels.Alipay, 705)
			stmtEv, err := channels.NewStatementEvent(channels.Event{
				TenantID: stmt.TenantID, Channel: stmt.Channel, Type: idempotent.PaymentReceived, TradeNo: stmt.TradeNo,
				MerchantOrderNo: stmt.MerchantOrderNo, OrderTotal: stmt.Total, OccurredAt: stmt.PaidAt, ReceivedAt: stmt.PaidAt, RawStatus: "SUCCESS",
			})
			require.NoError(t, err)
			stmtValue, err := channels.StatementEnvelope(stmtEv, stmt.PaidAt)
			require.NoError(t, err)
			values := [][]byte{
				channelstest.PaymentEnvelope(bound, channelstest.Delivery{}),
				channelstest.PaymentEnvelope(otherTenants, channelstest.Delivery{}),
				channelstest.PaymentEnvelope(unbound, channelstest.Delivery{Partner: true}),
				channelstest.PaymentEnvelope(noMerchant, channelstest.Delivery{Edit: func(m map[string]any) { delete(m, "terminal_sn") }}),
				stmtValue,
			}
			// The statement event is signed (it is checked for that, not
			// for its merchant).
			keys, err := statementauth.Parse([]byte("k1=0123456789abcdef0123456789abcdef\n"))
			require.NoError(t, err)
			e.p.Decoder = channels.NewDecoder(channelstest.Keys(), channels.VerifyStatements(keys))
			sig, err := keys.Sign(stmtValue)
			require.NoError(t, err)
			msgs := make([]kafka.Message, len(values))
			for i, v := range values {
				msgs[i] = kafka.Message{Topic: "channel-events", Offset: int64(i), Value: v}
			}
			msgs[4].Headers = []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}}
			if batch {
				require.NoError(t, e.p.Handle(context.Background(), msgs, make([]MessageState, len(msgs))))
			} else {
				for _, m := range msgs {
					require.NoError(t, e.p.Handle(context.Background(), []kafka.Message{m}, make([]MessageState, 1)))
				}
			}

			assert.Equal(t, []string{
				"tenant_mismatch: ALIPAY merchant 2088101117955611 is not bound to tenant 1001: " + path + " binds it to tenant 2002",
				"tenant_mismatch: WECHAT merchant 1900000109 is not bound to tenant 1001: " + path + " binds it to no tenant",
				"tenant_mismatch: the SQB callback of tenant 1001 names no merchant (terminal_sn); " + path + " binds merchants to tenants, so it is not posted",
			}, dl.letters())
			ctx := context.Background()
			var claims int
			require.NoError(t, e.db.NewRaw("SELECT COUNT(*) FROM ss_channel_idempotent").Scan(ctx, &claims))
			assert.Equal(t, 2, claims, "the bound merchant's payment and the statement event; nothing of the others")
			for _, tr := range []channelstest.Trade{otherTenants, unbound, noMerchant} {
				_, err := settlement.GetOrder(ctx, e.db, tr.TenantID, tr.Channel, tr.TradeNo)
				require.ErrorIs(t, err, settlement.ErrOrderNotFound, "nothing posted for %s", tr.TradeNo)
			}
			assert.InDelta(t, 3, counterValue(t, e.reg, "paycb_dead_letters_total", "kind", "tenant_mismatch"), 0)

			// The binding is fixed: the sub-merchant is tenant 1001's. A
			// broken edit first keeps the last good binding.
			writeBinding(t, path, "1001 WECHAT 1230000109\n2002 WECHAT 1230000109\n")
			_, err = f.Refresh()
			require.Error(t, err)
			e.handle(t, values[2])
			require.Len(t, dl.letters(), 4, "still refused under the last good binding")
			writeBinding(t, path, "1001 WECHAT 1230000109\n1001 WECHAT 1900000109\n1001 SQB 01939202039923029\n2002 ALIPAY 2088101117955611\n")
			changed, err := f.Refresh()
			require.NoError(t, err)
			require.True(t, changed)
			e.handle(t, values[2])
			ord, err := settlement.GetOrder(ctx, e.db, unbound.TenantID, unbound.Channel, unbound.TradeNo)
			require.NoError(t, err)
			assert.Equal(t, unbound.Total, ord.PaidAmount, "settled once the binding names it")
		})
	}
}

// counterValue reads the counter name{label=value}.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// TestMerchantBindingReReadWhileHandling: the binding swapped under the
// pipeline (as Watch does) while a batch is handled: every message is
// judged by a whole binding, never half of one. Run with -race.
func TestMerchantBindingReReadWhileHandling(t *testing.T) {
	e := newPipelineEnv(t)
	path := filepath.Join(t.TempDir(), "merchants")
	const binding = "1001 WECHAT 1230000109\n1001 SQB 01939202039923029\n1001 ALIPAY 2088101117955611\n"
	writeBinding(t, path, binding)
	f, err := merchantbinding.Load(path)
	require.NoError(t, err)
	e.p.Merchants = f

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		// The same binding in other words: each write is a change.
		for i := 0; ctx.Err() == nil; i++ {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, []byte(binding+"# edit "+strconv.Itoa(i)+"\n"), 0o600); err != nil {
				return
			}
			if err := os.Rename(tmp, path); err != nil {
				return
			}
			_, _ = f.Refresh()
		}
	})
	var values [][]byte
	for i := range 60 {
		tr := channelstest.NewTrade(channels.Codes()[i%len(channels.Codes())], 900+i)
		values = append(values, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
	}
	for i := 0; i < len(values); i += 6 {
		e.handle(t, values[i:i+6]...)
	}
	cancel()
	wg.Wait()
	var claims int
	require.NoError(t, e.db.NewRaw("SELECT COUNT(*) FROM ss_channel_idempotent WHERE status = 'SETTLED'").Scan(context.Background(), &claims))
	assert.Equal(t, len(values), claims, "every bound merchant's payment settled")
	assert.Empty(t, e.dl.letters())
}

// TestCallbackOfAnotherAppIsTenantMismatch: Alipay's notification docs
// say to check app_id beside seller_id. With the tenant's apps bound, a
// callback of its own seller sent for another app is dead-lettered
// tenant_mismatch with nothing claimed, one of the tenant's app settles;
// a tenant with no app bound is checked by seller alone, as before.
func TestCallbackOfAnotherAppIsTenantMismatch(t *testing.T) {
	e := newPipelineEnv(t)
	dl := &reasonDeadLetterer{}
	e.p.DeadLetterer = dl
	path := filepath.Join(t.TempDir(), "merchants")
	writeBinding(t, path, "1001 ALIPAY 2088101117955611\n1001 ALIPAY app_id 2021000000000000\n")
	f, err := merchantbinding.Load(path)
	require.NoError(t, err)
	e.p.Merchants = f
	otherApp := func(m map[string]any) { m["app_id"], m["auth_app_id"] = "2021009999999999", "2021009999999999" }

	own := channelstest.NewTrade(channels.Alipay, 801)
	foreign := channelstest.NewTrade(channels.Alipay, 802)
	e.handle(t, channelstest.PaymentEnvelope(own, channelstest.Delivery{}),
		channelstest.PaymentEnvelope(foreign, channelstest.Delivery{Edit: otherApp}))
	assert.Equal(t, []string{
		`tenant_mismatch: the ALIPAY callback of tenant 1001 is of app_id "2021009999999999", not one of the tenant's (2021000000000000 in ` + path + ")",
	}, dl.letters())
	ctx := context.Background()
	ord, err := settlement.GetOrder(ctx, e.db, own.TenantID, own.Channel, own.TradeNo)
	require.NoError(t, err)
	assert.Equal(t, own.Total, ord.PaidAmount)
	_, err = settlement.GetOrder(ctx, e.db, foreign.TenantID, foreign.Channel, foreign.TradeNo)
	require.ErrorIs(t, err, settlement.ErrOrderNotFound)
	var claims int
	require.NoError(t, e.db.NewRaw("SELECT COUNT(*) FROM ss_channel_idempotent").Scan(ctx, &claims))
	assert.Equal(t, 1, claims, "the other app's callback claimed nothing")

	// Without an app line the seller alone decides, as before.
	writeBinding(t, path, "1001 ALIPAY 2088101117955611\n")
	changed, err := f.Refresh()
	require.NoError(t, err)
	require.True(t, changed)
	e.handle(t, channelstest.PaymentEnvelope(foreign, channelstest.Delivery{Edit: otherApp}))
	ord, err = settlement.GetOrder(ctx, e.db, foreign.TenantID, foreign.Channel, foreign.TradeNo)
	require.NoError(t, err)
	assert.Equal(t, foreign.Total, ord.PaidAmount)
}
