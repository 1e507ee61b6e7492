package settlement_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// BenchmarkSettle measures settlement throughput on MariaDB against the
// ceiling of one durable single-row commit, all in one run on one database:
//
//	go test -run '^$' -bench BenchmarkSettle -benchtime 2000x ./pkg/settlement/
//
// raw-insert-commit is BEGIN; INSERT one ledger row; COMMIT. payment and
// refund time Settle alone on claims acquired beforehand (WeChat events,
// decoded from real envelopes); payment-batch16 settles the payments 16 to a
// transaction with SettleBatch; acquire+settle adds the claim's own commit,
// the worker's whole database cost per new event. Each reports events/s and,
// after raw-insert-commit has run, x-raw: its rate as a fraction of the raw
// commit rate.
func BenchmarkSettle(b *testing.B) {
	db := sqldbtest.MustMySQL(b)
	h := newHarness(b, db)
	var rawRate float64
	report := func(b *testing.B) {
		b.Helper()
		rate := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(rate, "events/s")
		if rawRate > 0 {
			b.ReportMetric(rate/rawRate, "x-raw")
		}
	}

	b.Run("raw-insert-commit", func(b *testing.B) {
		ctx := context.Background()
		run := benchRun.Add(1)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO ss_ledger_entry (tenant_id, idempotent_key, channel_code,
				channel_trade_no, account, direction, amount, currency, created_at)
				VALUES (9, ?, 'WECHAT', 'RAW', 'merchant_payable', 'CREDIT', 1, 'CNY', ?)`,
				fmt.Sprintf("WECHAT:RAW%d-%d:PAYMENT_RECEIVED", run, i), time.Now().UTC()); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		rawRate = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(rawRate, "events/s")
	})

	b.Run("payment", func(b *testing.B) {
		ctx := context.Background()
		evs := benchPayments(b, h, b.N)
		for _, ev := range evs {
			h.acquire(b, ev, 0)
		}
		b.ResetTimer()
		for _, ev := range evs {
			if res, err := h.svc.Settle(ctx, ev); err != nil || res.Outcome != idempotent.OutcomePosted {
				b.Fatalf("settle: %+v %v", res, err)
			}
		}
		b.StopTimer()
		report(b)
	})

	b.Run("refund", func(b *testing.B) {
		ctx := context.Background()
		const perTrade = 50
		trades := (b.N + perTrade - 1) / perTrade
		pays := benchPayments(b, h, trades)
		evs := make([]channels.Event, 0, b.N)
		for t, pay := range pays {
			h.acquire(b, pay, 0)
			_, err := h.svc.Settle(ctx, pay)
			require.NoError(b, err)
			tr := channelstest.Trade{
				TenantID: pay.TenantID, Channel: channels.WeChat, TradeNo: pay.TradeNo,
				MerchantOrderNo: pay.MerchantOrderNo, Total: pay.OrderTotal, PaidAt: channelstest.BaseTime,
			}
			for r := 0; r < perTrade && len(evs) < b.N; r++ {
				ev := h.decode(b, channelstest.RefundEnvelope(tr, refundAt(tr, fmt.Sprintf("B%d-%d", t, r), 1, 0, 1), channelstest.Delivery{}))
				h.acquire(b, ev, 0)
				evs = append(evs, ev)
			}
		}
		b.ResetTimer()
		for _, ev := range evs {
			if res, err := h.svc.Settle(ctx, ev); err != nil || res.Outcome != idempotent.OutcomePosted {
				b.Fatalf("settle: %+v %v", res, err)
			}
		}
		b.StopTimer()
		report(b)
	})

	b.Run("payment-batch16", func(b *testing.B) {
		ctx := context.Background()
		evs := benchPayments(b, h, b.N)
		for _, ev := range evs {
			h.acquire(b, ev, 0)
		}
		b.ResetTimer()
		for i := 0; i < len(evs); i += 16 {
			res, err := h.svc.SettleBatch(ctx, evs[i:min(i+16, len(evs))])
			if err != nil || res[0].Outcome != idempotent.OutcomePosted {
				b.Fatalf("settle batch: %v", err)
			}
		}
		b.StopTimer()
		report(b)
	})

	b.Run("acquire+settle", func(b *testing.B) {
		ctx := context.Background()
		evs := benchPayments(b, h, b.N)
		bodies := make([][]byte, len(evs))
		for i, ev := range evs {
			var err error
			bodies[i], err = json.Marshal(ev)
			require.NoError(b, err)
		}
		b.ResetTimer()
		for i, ev := range evs {
			acq, err := h.claims.Acquire(ctx, idempotent.Claim{
				TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type,
				Fingerprint: ev.Fingerprint, Event: bodies[i], Source: idempotent.NoSource,
			})
			if err != nil || acq.Kind != idempotent.Acquired {
				b.Fatalf("acquire: %v %v", acq.Kind, err)
			}
			if res, err := h.svc.Settle(ctx, ev); err != nil || res.Outcome != idempotent.OutcomePosted {
				b.Fatalf("settle: %+v %v", res, err)
			}
		}
		b.StopTimer()
		report(b)
	})
}

var benchRun atomic.Int64

// benchPayments decodes n WeChat payments of new trades.
func benchPayments(b *testing.B, h *harness, n int) []channels.Event {
	b.Helper()
	run := int(benchRun.Add(1))
	evs := make([]channels.Event, n)
	for i := range evs {
		tr := channelstest.NewTrade(channels.WeChat, run*1_000_000+i)
		evs[i] = h.decode(b, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}))
	}
	return evs
}
