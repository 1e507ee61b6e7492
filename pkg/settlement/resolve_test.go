package settlement_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// refundChecks reconciles the refund registrations only, refunds expected
// to be pre-registered.
func refundChecks(tb testing.TB, db bun.IDB) settlement.ReconcileReport {
	tb.Helper()
	rep, err := settlement.Reconcile(context.Background(), db, settlement.ReconcileOptions{
		Checks:               []string{settlement.CheckRefundUnregistered, settlement.CheckRefundMismatch},
		RefundsPreregistered: true,
	})
	require.NoError(tb, err)
	return rep
}

// openOf returns the open discrepancies of tr.
func openOf(rep settlement.ReconcileReport, tr channelstest.Trade) []settlement.Discrepancy {
	var out []settlement.Discrepancy
	for _, d := range rep.Discrepancies {
		if d.TradeNo == tr.TradeNo && d.Channel == string(tr.Channel) {
			out = append(out, d)
		}
	}
	return out
}

// resolvedOf returns the resolved discrepancies of tr.
func resolvedOf(rep settlement.ReconcileReport, tr channelstest.Trade) []settlement.ResolvedDiscrepancy {
	var out []settlement.ResolvedDiscrepancy
	for _, d := range rep.Resolved {
		if d.TradeNo == tr.TradeNo && d.Channel == string(tr.Channel) {
			out = append(out, d)
		}
	}
	return out
}

func resolveReq(tr channelstest.Trade, refundNo, note string) settlement.ResolveRequest {
	return settlement.ResolveRequest{
		TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: refundNo,
		Note: note, By: "ops@host", RefundsPreregistered: true,
	}
}

// TestResolveRefund: an operator's decision clears a registration mismatch
// from reconcile (listed as resolved), leaves the registration as the
// channel made it, and a different mismatch of the same refund is open
// again; what cannot be resolved is refused with a reason.
func TestResolveRefund(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		h := newHarness(t, db)
		paid := func(t *testing.T, ch channels.Channel, seq int) channelstest.Trade {
			t.Helper()
			tr := channelstest.NewTrade(ch, seq)
			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), int64(seq*10))
			return tr
		}

		t.Run("an unregistered refund, resolved, then registered late: a new mismatch", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 1)
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "WHO", 100, 0, 1), channelstest.Delivery{}), 11)
			found := openOf(refundChecks(t, db), tr)
			require.Len(t, found, 1)
			assert.Equal(t, settlement.CheckRefundUnregistered, found[0].Check)
			assert.Equal(t, "WHO", found[0].RefundNo)
			assert.Equal(t, "no registration; callback SETTLED POSTED; posted 100", found[0].Fingerprint)

			before := time.Now().UTC().Add(-time.Second)
			res, err := settlement.ResolveRefund(ctx, db, resolveReq(tr, "WHO", "refund made by hand in the merchant portal, confirmed by finance"))
			require.NoError(t, err)
			require.Len(t, res, 1)
			assert.Equal(t, settlement.CheckRefundUnregistered, res[0].Check)
			assert.Equal(t, found[0].Fingerprint, res[0].Fingerprint)
			assert.Positive(t, res[0].Resolution.ID)

			rep := refundChecks(t, db)
			assert.Empty(t, openOf(rep, tr), "resolved, not open")
			rs := resolvedOf(rep, tr)
			require.Len(t, rs, 1)
			assert.Equal(t, "refund made by hand in the merchant portal, confirmed by finance", rs[0].Resolution.Note)
			assert.Equal(t, "ops@host", rs[0].Resolution.ResolvedBy)
			assert.Equal(t, "WHO", rs[0].Resolution.NamedRefundNo)
			assert.WithinDuration(t, time.Now(), rs[0].Resolution.ResolvedAt, time.Minute)
			assert.False(t, rs[0].Resolution.ResolvedAt.Before(before.Truncate(time.Second)))
			_, err = h.svc.GetRegistration(ctx, tr.TenantID, tr.Channel, tr.TradeNo, "WHO")
			require.ErrorIs(t, err, settlement.ErrRegistrationNotFound, "nothing registered by resolving")

			_, err = settlement.ResolveRefund(ctx, db, resolveReq(tr, "WHO", "again"))
			require.ErrorIs(t, err, settlement.ErrNothingToResolve)
			require.ErrorContains(t, err, "resolved already")
			require.ErrorContains(t, err, "ops@host")

			// Registered after its callback: the registration stays
			// REGISTERED, which is another mismatch, open.
			_, err = h.svc.RegisterRefund(ctx, request(tr, "WHO", 100))
			require.NoError(t, err)
			found = openOf(refundChecks(t, db), tr)
			require.Len(t, found, 1)
			assert.Equal(t, settlement.CheckRefundMismatch, found[0].Check)
			assert.Contains(t, found[0].Detail, "still REGISTERED")
			res, err = settlement.ResolveRefund(ctx, db, resolveReq(tr, "WHO", "registered late by the merchant"))
			require.NoError(t, err)
			require.Len(t, res, 1)
			rep = refundChecks(t, db)
			assert.Empty(t, openOf(rep, tr))
			require.Len(t, resolvedOf(rep, tr), 1, "only the discrepancy found now is listed")
			assert.Equal(t, "registered late by the merchant", resolvedOf(rep, tr)[0].Resolution.Note)
			assert.Equal(t, settlement.RegistrationRegistered, registration(t, h, tr, "WHO").Status,
				"the registration's status is the channel's, not the operator's")
		})

		t.Run("a WeChat refund of another amount than registered", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 2)
			_, err := h.svc.RegisterRefund(ctx, request(tr, "RF-1", 1000))
			require.NoError(t, err)
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-1", 900, 0, 1), channelstest.Delivery{}), 21)
			found := openOf(refundChecks(t, db), tr)
			require.Len(t, found, 1)
			assert.Equal(t, "registered 1000 but 900 was posted", found[0].Detail)
			assert.Equal(t, "registered 1000 SUCCEEDED; callback SETTLED POSTED; posted 900", found[0].Fingerprint)

			_, err = settlement.ResolveRefund(ctx, db, resolveReq(tr, "RF-1", "merchant lowered the refund at the channel"))
			require.NoError(t, err)
			assert.Empty(t, openOf(refundChecks(t, db), tr))
			reg := registration(t, h, tr, "RF-1")
			assert.Equal(t, settlement.RegistrationSucceeded, reg.Status)
			assert.Equal(t, int64(1000), reg.Amount, "the registration is not rewritten")

			// The same findings on the whole report: exit status 0.
			rep, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{
				Checks: []string{settlement.CheckRefundMismatch}, RefundsPreregistered: true,
			})
			require.NoError(t, err)
			assert.Empty(t, openOf(rep, tr))
			assert.Len(t, resolvedOf(rep, tr), 1)
			assert.Equal(t, len(rep.Discrepancies), rep.Counts()[settlement.CheckRefundMismatch], "counts are of open ones")
		})

		t.Run("a cumulative trade's total: resolved through a refund of it, open again when it moves", func(t *testing.T) {
			tr := paid(t, channels.Alipay, 3)
			_, err := h.svc.RegisterRefund(ctx, request(tr, "RF-1", 100))
			require.NoError(t, err)
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-1", 0, 300, 1), channelstest.Delivery{}), 31)
			found := openOf(refundChecks(t, db), tr)
			require.Len(t, found, 1, "%v", found)
			assert.Empty(t, found[0].RefundNo, "the trade's total names no refund")
			assert.Equal(t, "cumulative refunded 300; succeeded 100; open 0", found[0].Fingerprint)

			res, err := settlement.ResolveRefund(ctx, db, resolveReq(tr, "RF-1", "Alipay confirms 300 refunded"))
			require.NoError(t, err)
			require.Len(t, res, 1)
			assert.Empty(t, res[0].RefundNo)
			assert.Equal(t, "RF-1", res[0].Resolution.NamedRefundNo)
			assert.Empty(t, openOf(refundChecks(t, db), tr))

			// Another refund moves the total: a different mismatch, open,
			// and the unregistered refund beside it.
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "RF-2", 0, 500, 2), channelstest.Delivery{}), 32)
			rep := refundChecks(t, db)
			found = openOf(rep, tr)
			require.Len(t, found, 2, "%v", found)
			checks := map[string]string{}
			for _, d := range found {
				checks[d.Check] = d.Fingerprint
			}
			assert.Equal(t, "cumulative refunded 500; succeeded 100; open 0", checks[settlement.CheckRefundMismatch])
			assert.Equal(t, "no registration; callback SETTLED POSTED; posted 200", checks[settlement.CheckRefundUnregistered])
			assert.Empty(t, resolvedOf(rep, tr), "the resolved total is no longer what is found")

			res, err = settlement.ResolveRefund(ctx, db, resolveReq(tr, "RF-2", "second refund made at the channel's portal"))
			require.NoError(t, err)
			assert.Len(t, res, 2, "the refund's own and the trade's")
			rep = refundChecks(t, db)
			assert.Empty(t, openOf(rep, tr))
			assert.Len(t, resolvedOf(rep, tr), 2)
		})

		t.Run("what cannot be resolved is refused", func(t *testing.T) {
			tr := paid(t, channels.WeChat, 4)
			_, err := h.svc.RegisterRefund(ctx, request(tr, "OK-1", 100))
			require.NoError(t, err)
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "OK-1", 100, 0, 1), channelstest.Delivery{}), 41)
			h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "NOREG", 50, 0, 2), channelstest.Delivery{}), 42)

			_, err = settlement.ResolveRefund(ctx, db, resolveReq(tr, "OK-1", "nothing wrong"))
			require.ErrorIs(t, err, settlement.ErrNothingToResolve, "a refund that agrees with its registration")
			require.ErrorContains(t, err, "reconcile finds none")

			notExpected := resolveReq(tr, "NOREG", "n")
			notExpected.RefundsPreregistered = false
			_, err = settlement.ResolveRefund(ctx, db, notExpected)
			require.ErrorIs(t, err, settlement.ErrNothingToResolve)
			require.ErrorContains(t, err, "PAYCB_REFUNDS_PREREGISTERED=false")

			for name, r := range map[string]settlement.ResolveRequest{
				"unknown refund number":     resolveReq(tr, "NOPE", "n"),
				"refund numbers match case": resolveReq(tr, "noreg", "n"),
				"unknown tenant":            {TenantID: 4242, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: "NOREG", Note: "n", By: "ops@host", RefundsPreregistered: true},
				"another channel":           {TenantID: tr.TenantID, Channel: channels.Alipay, TradeNo: tr.TradeNo, RefundNo: "NOREG", Note: "n", By: "ops@host", RefundsPreregistered: true},
				"unknown trade":             {TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: "T-NONE", RefundNo: "NOREG", Note: "n", By: "ops@host", RefundsPreregistered: true},
			} {
				t.Run(name, func(t *testing.T) {
					_, err := settlement.ResolveRefund(ctx, db, r)
					require.ErrorIs(t, err, settlement.ErrRefundUnknown)
					assert.ErrorContains(t, err, "neither a registration nor a refund callback")
				})
			}
			for name, r := range map[string]settlement.ResolveRequest{
				"empty note":      resolveReq(tr, "NOREG", ""),
				"blank note":      resolveReq(tr, "NOREG", " \t\n"),
				"note too long":   resolveReq(tr, "NOREG", strings.Repeat("x", settlement.MaxResolutionNote+1)),
				"unknown channel": {TenantID: tr.TenantID, Channel: "PAYPAL", TradeNo: tr.TradeNo, RefundNo: "NOREG", Note: "n", By: "ops@host"},
				"no tenant":       {Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: "NOREG", Note: "n", By: "ops@host"},
				"no refund":       resolveReq(tr, "", "n"),
				"no one":          {TenantID: tr.TenantID, Channel: tr.Channel, TradeNo: tr.TradeNo, RefundNo: "NOREG", Note: "n"},
			} {
				t.Run(name, func(t *testing.T) {
					_, err := settlement.ResolveRefund(ctx, db, r)
					require.ErrorIs(t, err, settlement.ErrInvalidRequest)
				})
			}
			var n int
			require.NoError(t, db.NewRaw(`SELECT COUNT(*) FROM ss_refund_resolution WHERE channel_trade_no = ?`, tr.TradeNo).Scan(ctx, &n))
			assert.Zero(t, n, "nothing refused is recorded")
			assert.Len(t, openOf(refundChecks(t, db), tr), 1, "the unregistered refund is still open")
		})
		mustCheck(t, db)
	})
}

// TestResolveRefundConcurrently: operators resolving the same mismatch at
// once record it once; every other run is told it is resolved.
func TestResolveRefundConcurrently(t *testing.T) {
	db := sqldbtest.MustMySQL(t)
	ctx := context.Background()
	h := newHarness(t, db)
	tr := channelstest.NewTrade(channels.WeChat, 1)
	h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 1)
	h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "WHO", 100, 0, 1), channelstest.Delivery{}), 2)

	const n = 8
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = retry(func() error {
				_, err := settlement.ResolveRefund(ctx, db, resolveReq(tr, "WHO", fmt.Sprintf("operator %d", i)))
				return err
			})
		}()
	}
	start.Done()
	done.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, settlement.ErrNothingToResolve)
	}
	assert.Equal(t, 1, ok, "%v", errs)
	var rows int
	require.NoError(t, db.NewRaw(`SELECT COUNT(*) FROM ss_refund_resolution`).Scan(ctx, &rows))
	assert.Equal(t, 1, rows)
	assert.Empty(t, openOf(refundChecks(t, db), tr))
}
