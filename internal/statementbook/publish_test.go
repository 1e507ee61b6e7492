package statementbook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/internal/ops"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/internal/statementbook"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/statements"
)

// testSigning are the statement keys the tests publish with.
var testSigning = func() statementauth.Keys {
	ks, err := statementauth.Parse([]byte("ops-test=0123456789abcdef0123456789abcdef\n"))
	if err != nil {
		panic(err)
	}
	return ks
}()

// signatureOf is m's x-paycb-statement-signature header.
func signatureOf(m kafka.Message) string {
	for _, h := range m.Headers {
		if h.Key == statementauth.HeaderSignature {
			return string(h.Value)
		}
	}
	return ""
}

// publishDay reconciles the day and publishes what is missing.
func publishDay(t *testing.T, w *world, k kafkaops.Kafka, tenant int64, ch channels.Channel) (statementbook.StatementReport, statementbook.PublishReport) {
	t.Helper()
	rep := reconcileDay(t, w, tenant, ch, reconDay)
	pub, err := statementbook.PublishMissing(context.Background(), w.DB, input(k), rep, testSigning, time.Now())
	require.NoError(t, err)
	return rep, pub
}

// keysOf lists the items' keys, or trade numbers where there is no key.
func keysOf(items []statementbook.PublishItem) []string {
	out := []string{}
	for _, it := range items {
		if it.Key != "" {
			out = append(out, it.Key)
		} else {
			out = append(out, it.TradeNo)
		}
	}
	return out
}

// topicEvents reads every message of the input topic and decodes it.
func topicEvents(t *testing.T, w *world, k kafkaops.Kafka) (map[string]channels.Event, int) {
	t.Helper()
	msgs, err := kafkaops.ReadAll(context.Background(), k.Brokers, k.Topic)
	require.NoError(t, err)
	out := map[string]channels.Event{}
	for _, m := range msgs {
		var env channels.Envelope
		require.NoError(t, json.Unmarshal(m.Value, &env))
		assert.Equal(t, channels.ContentTypeStatement, env.ContentType)
		require.NoError(t, testSigning.Verify(m.Value, signatureOf(m)), "signed with the current key")
		res, err := w.Dec.Decode(m.Value)
		require.NoError(t, err)
		assert.Equal(t, string(res.Event.Channel)+":"+res.Event.TradeNo, string(m.Key), "keyed like the callbacks")
		out[string(res.Event.Key)] = res.Event
	}
	return out, len(msgs)
}

// topicEventsByTrade is topicEvents by trade number.
func topicEventsByTrade(t *testing.T, w *world, k kafkaops.Kafka) map[string]channels.Event {
	t.Helper()
	events, _ := topicEvents(t, w, k)
	out := map[string]channels.Event{}
	for _, ev := range events {
		out[ev.TradeNo] = ev
	}
	return out
}

// decoded is the event a callback decodes to.
func decoded(t *testing.T, w *world, value []byte) channels.Event {
	t.Helper()
	res, err := w.Dec.Decode(value)
	require.NoError(t, err)
	return res.Event
}

// TestPublishMissing: each missing_in_ledger item a statement describes
// exactly is published once with the callback's key and fingerprint;
// refunds of cumulative channels and refunds of unknown order total are
// left to the query API; claimed keys and a second run publish nothing;
// a status mismatch is never published.
func TestPublishMissing(t *testing.T) {
	w := newWorld(t)
	k := mustKafka(t, 3)
	d := channelstest.Delivery{}
	ctx := context.Background()

	// WeChat, tenant 61.
	wx := func(seq int) channelstest.Trade { return trade(channels.WeChat, 61, seq) }
	posted, withheld, refunded, elsewhere, processing, orphan := wx(1), wx(2), wx(3), wx(4), wx(5), wx(6)
	elsewhere.PaidAt = channelstest.BaseTime.AddDate(0, 0, -20) // its payment's statement is not imported
	w.post(channelstest.PaymentEnvelope(posted, d))
	w.post(channelstest.PaymentEnvelope(refunded, d))
	w.post(channelstest.PaymentEnvelope(processing, d))
	w.post(channelstest.RefundEnvelope(processing, channelstest.Refund{No: "R-5", Amount: 300}, d))
	w.post(channelstest.PaymentEnvelope(orphan, d))
	orphanRefund := channelstest.RefundEnvelope(orphan, channelstest.Refund{No: "R-6", Amount: 200}, d)
	w.Acquire(orphanRefund) // claimed, never settled
	withheldRefund := channelstest.RefundEnvelope(refunded, channelstest.Refund{No: "R-3", Amount: 1000}, d)
	elsewhereRefund := refundLine(elsewhere, "R-4", 500, "SUCCESS")
	elsewhereRefund.Time = channelstest.BaseTime.Add(2 * time.Hour) // refunded on the day
	withheldLine := payLine(withheld)
	withheldLine.MerchantID = "1230000109"
	w.importLines(61, channels.WeChat,
		payLine(posted), withheldLine, payLine(refunded), payLine(processing), payLine(orphan),
		refundLine(refunded, "R-3", 1000, "SUCCESS"),
		elsewhereRefund,
		refundLine(processing, "R-5", 300, "PROCESSING"),
		refundLine(orphan, "R-6", 200, "SUCCESS"),
	)
	rep, pub := publishDay(t, w, k, 61, channels.WeChat)
	assert.ElementsMatch(t, []string{
		"missing_in_ledger " + withheld.TradeNo + " ",
		"missing_in_ledger " + refunded.TradeNo + " R-3",
		"missing_in_ledger " + elsewhere.TradeNo + " R-4",
		"missing_in_ledger " + orphan.TradeNo + " R-6",
		"status_mismatch " + processing.TradeNo + " R-5",
	}, categories(rep))
	wantPayment, wantRefund := decoded(t, w, channelstest.PaymentEnvelope(withheld, d)), decoded(t, w, withheldRefund)
	assert.Equal(t, []string{string(wantPayment.Key), string(wantRefund.Key)}, keysOf(pub.Published))
	assert.Equal(t, []string{"WECHAT:" + orphan.TradeNo + ":REFUND_SUCCEEDED:R-6"}, keysOf(pub.Claimed))
	assert.Contains(t, pub.Claimed[0].Reason, "ACQUIRED")
	require.Equal(t, []string{"WECHAT:" + elsewhere.TradeNo + ":REFUND_SUCCEEDED:R-4"}, keysOf(pub.NeedsQuery))
	assert.Contains(t, pub.NeedsQuery[0].Reason, "order total is unknown")
	assert.Contains(t, pub.NeedsQuery[0].Query, "the querier cannot ask: no order of the trade names a bound merchant",
		"registered, but its trade has no order to send the refund query for")
	assert.Empty(t, pub.AlreadyPublished)
	assert.Equal(t, int64(2580), pub.Published[1].OrderTotal, "the refund's order total from the payment line and the order row")

	events, n := topicEvents(t, w, k)
	require.Equal(t, 2, n)
	for _, want := range []channels.Event{wantPayment, wantRefund} {
		got, ok := events[string(want.Key)]
		require.True(t, ok, "%s published", want.Key)
		assert.Equal(t, want.Fingerprint, got.Fingerprint, "%s: the callback's fingerprint", want.Key)
	}
	assert.Equal(t, "1230000109", events[string(wantPayment.Key)].StatementMerchant, "the line's merchant, which the import checked, travels signed")

	// Again: nothing more is published.
	_, again := publishDay(t, w, k, 61, channels.WeChat)
	assert.Empty(t, again.Published)
	assert.Equal(t, keysOf(pub.Published), keysOf(again.AlreadyPublished))
	_, n = topicEvents(t, w, k)
	assert.Equal(t, 2, n, "the second run published nothing")
	assert.Equal(t, pub.NeedsQuery, again.NeedsQuery)
	var regs []struct {
		RefundNo string `bun:"refund_no"`
		Amount   int64  `bun:"amount"`
		Status   string `bun:"status"`
		Key      string `bun:"idempotent_key"`
	}
	require.NoError(t, w.DB.NewSelect().Table("ss_refund_request").Column("refund_no", "amount", "status", "idempotent_key").
		Where("tenant_id = 61").Scan(ctx, &regs))
	require.Len(t, regs, 1, "the needs_query refund registered once for the querier, however often the day is published")
	assert.Equal(t, "R-4", regs[0].RefundNo)
	assert.Equal(t, int64(500), regs[0].Amount)
	assert.Equal(t, "REGISTERED", regs[0].Status)
	assert.Equal(t, "WECHAT:"+elsewhere.TradeNo+":REFUND_SUCCEEDED:R-4", regs[0].Key)

	// The worker settles the published events; the withheld callbacks,
	// delivered afterwards, are duplicates, never conflicts.
	for _, m := range events {
		_, err := w.Svc.Settle(ctx, w.acquireEvent(m))
		require.NoError(t, err)
	}
	for _, v := range [][]byte{channelstest.PaymentEnvelope(withheld, channelstest.Delivery{Attempt: 2}), withheldRefund} {
		ev := decoded(t, w, v)
		body, err := json.Marshal(ev)
		require.NoError(t, err)
		r, err := w.Claims.Acquire(ctx, idempotent.Claim{
			TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body,
			Source: idempotent.Source{Topic: ledgertest.Topic, Partition: 2, Offset: 900},
		})
		require.NoError(t, err)
		assert.Equal(t, idempotent.Duplicate, r.Kind, "%s", ev.Key)
	}
	rep = reconcileDay(t, w, 61, channels.WeChat, reconDay)
	assert.ElementsMatch(t, []string{
		"missing_in_ledger " + elsewhere.TradeNo + " R-4",
		"missing_in_ledger " + orphan.TradeNo + " R-6",
		"status_mismatch " + processing.TradeNo + " R-5",
	}, categories(rep))

	t.Run("alipay: payments published, refunds need the query API", func(t *testing.T) {
		k := mustKafka(t, 2)
		paid, refunded := trade(channels.Alipay, 62, 1), trade(channels.Alipay, 62, 2)
		w.post(channelstest.PaymentEnvelope(refunded, d))
		w.importLines(62, channels.Alipay, payLine(paid), payLine(refunded), refundLine(refunded, "R-1", 700, "SUCCESS"))
		_, pub := publishDay(t, w, k, 62, channels.Alipay)
		want := decoded(t, w, channelstest.PaymentEnvelope(paid, d))
		assert.Equal(t, []string{string(want.Key)}, keysOf(pub.Published))
		assert.Equal(t, []string{refunded.TradeNo}, keysOf(pub.NeedsQuery))
		assert.Contains(t, pub.NeedsQuery[0].Reason, "alipay.trade.fastpay.refund.query")
		assert.Contains(t, pub.NeedsQuery[0].Query, "the querier", "the day's refund line of the trade registered for the querier")
		n, err := w.DB.NewSelect().Table("ss_refund_request").Where("tenant_id = 62").Where("refund_no = 'R-1'").Where("amount = 700").Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		events, _ := topicEvents(t, w, k)
		assert.Equal(t, want.Fingerprint, events[string(want.Key)].Fingerprint)
	})

	t.Run("sqb: payments published, refunds need the query API", func(t *testing.T) {
		k := mustKafka(t, 2)
		paid, refunded := trade(channels.SQB, 63, 1), trade(channels.SQB, 63, 2)
		w.post(channelstest.PaymentEnvelope(refunded, d))
		order := func(tr channelstest.Trade, status string, net int64) statements.Line {
			l := payLine(tr)
			l.Kind, l.Status, l.SettledAmount = statements.KindOrder, status, net
			return l
		}
		w.importLines(63, channels.SQB, order(paid, "PAID", paid.Total), order(refunded, "PARTIAL_REFUNDED", refunded.Total-600))
		_, pub := publishDay(t, w, k, 63, channels.SQB)
		want := decoded(t, w, channelstest.PaymentEnvelope(paid, d))
		assert.Equal(t, []string{string(want.Key)}, keysOf(pub.Published))
		assert.Equal(t, []string{refunded.TradeNo}, keysOf(pub.NeedsQuery))
		assert.Contains(t, pub.NeedsQuery[0].Reason, "/upay/v2/query")
		assert.Contains(t, pub.NeedsQuery[0].Query, "no refund line of the trade names a refund number", "nothing to register")
		events, _ := topicEvents(t, w, k)
		assert.Equal(t, want.Fingerprint, events[string(want.Key)].Fingerprint)
	})

	t.Run("a statement corrected after publishing", func(t *testing.T) {
		k := mustKafka(t, 2)
		tr := trade(channels.WeChat, 64, 1)
		w.importLines(64, channels.WeChat, payLine(tr))
		_, pub := publishDay(t, w, k, 64, channels.WeChat)
		require.Len(t, pub.Published, 1)
		corrected := payLine(tr)
		corrected.Amount = tr.Total + 1
		w.importLines(64, channels.WeChat, corrected)
		_, pub = publishDay(t, w, k, 64, channels.WeChat)
		assert.Empty(t, pub.Published)
		require.Len(t, pub.NeedsQuery, 1)
		assert.Contains(t, pub.NeedsQuery[0].Reason, "corrected")
		_, n := topicEvents(t, w, k)
		assert.Equal(t, 1, n)
	})

	t.Run("a statement corrected between reconciling and publishing", func(t *testing.T) {
		k := mustKafka(t, 2)
		tr := trade(channels.WeChat, 67, 1)
		w.importLines(67, channels.WeChat, payLine(tr))
		rep := reconcileDay(t, w, 67, channels.WeChat, reconDay)
		require.Len(t, rep.Items, 1)
		corrected := payLine(tr) // as many lines, another amount
		corrected.Amount = tr.Total + 1
		w.importLines(67, channels.WeChat, corrected)
		_, err := statementbook.PublishMissing(ctx, w.DB, input(k), rep, testSigning, time.Now())
		require.ErrorIs(t, err, statementbook.ErrStatementChanged)
		_, n := topicEvents(t, w, k)
		assert.Equal(t, 0, n, "nothing published from a report of another file")
	})

	t.Run("a refund whose order row and payment line disagree", func(t *testing.T) {
		k := mustKafka(t, 2)
		tr := trade(channels.WeChat, 65, 1)
		w.post(channelstest.PaymentEnvelope(tr, d))
		line := payLine(tr)
		line.Amount = tr.Total - 80 // an amount_mismatch on the payment too
		w.importLines(65, channels.WeChat, line, refundLine(tr, "R-1", 100, "SUCCESS"))
		_, pub := publishDay(t, w, k, 65, channels.WeChat)
		assert.Empty(t, pub.Published)
		require.Len(t, pub.NeedsQuery, 1)
		assert.Contains(t, pub.NeedsQuery[0].Reason, fmt.Sprintf("%d fen on the statement's payment line, %d fen on the order row", tr.Total-80, tr.Total))
	})

	t.Run("an event published unsigned before signing is published again, signed", func(t *testing.T) {
		k := mustKafka(t, 1)
		tr, claimedTr := trade(channels.WeChat, 69, 1), trade(channels.WeChat, 69, 2)
		w.importLines(69, channels.WeChat, payLine(tr), payLine(claimedTr))
		_, pub := publishDay(t, w, k, 69, channels.WeChat)
		require.Len(t, pub.Published, 2)
		// As an earlier version recorded them: no signature.
		_, err := w.DB.NewUpdate().TableExpr("ss_statement_publish").Set("signature_key_id = NULL").Where("tenant_id = ?", 69).Exec(ctx)
		require.NoError(t, err)
		// One of them reached the worker before the upgrade and was claimed.
		w.acquireEvent(topicEventsByTrade(t, w, k)[claimedTr.TradeNo])

		again := mustKafka(t, 1)
		_, pub = publishDay(t, w, again, 69, channels.WeChat)
		require.Len(t, pub.Published, 1, "the unclaimed one, signed now")
		assert.Equal(t, tr.TradeNo, pub.Published[0].TradeNo)
		require.Len(t, pub.AlreadyPublished, 1, "the claimed one is not published again")
		assert.Equal(t, claimedTr.TradeNo, pub.AlreadyPublished[0].TradeNo)
		events, n := topicEvents(t, w, again) // verifies the signature
		assert.Equal(t, 1, n)
		assert.Contains(t, events, pub.Published[0].Key)
		var keyID string
		require.NoError(t, w.DB.NewSelect().ColumnExpr("signature_key_id").TableExpr("ss_statement_publish").
			Where("tenant_id = ?", 69).Where("idempotent_key = ?", pub.Published[0].Key).Scan(ctx, &keyID))
		assert.Equal(t, "ops-test", keyID)

		_, pub = publishDay(t, w, mustKafka(t, 1), 69, channels.WeChat)
		assert.Empty(t, pub.Published, "signed once: not again")
		assert.Len(t, pub.AlreadyPublished, 2)
	})

	t.Run("no statement key publishes nothing and records nothing", func(t *testing.T) {
		k := mustKafka(t, 1)
		tr := trade(channels.WeChat, 68, 1)
		w.importLines(68, channels.WeChat, payLine(tr))
		rep := reconcileDay(t, w, 68, channels.WeChat, reconDay)
		require.Len(t, rep.Items, 1)
		_, err := statementbook.PublishMissing(ctx, w.DB, input(k), rep, statementauth.Keys{}, time.Now())
		require.ErrorIs(t, err, statementauth.ErrNoKeys)
		assert.Contains(t, err.Error(), "PAYCB_STATEMENT_KEY_FILE")
		_, n := topicEvents(t, w, k)
		assert.Equal(t, 0, n)
		_, pub := publishDay(t, w, k, 68, channels.WeChat)
		assert.Len(t, pub.Published, 1, "not recorded as published")
	})

	t.Run("a missing topic publishes nothing and records nothing", func(t *testing.T) {
		tr := trade(channels.WeChat, 66, 1)
		w.importLines(66, channels.WeChat, payLine(tr))
		rep := reconcileDay(t, w, 66, channels.WeChat, reconDay)
		gone := mustKafka(t, 1)
		gone.Topic = "no-such-topic"
		_, err := statementbook.PublishMissing(ctx, w.DB, input(gone), rep, testSigning, time.Now())
		require.ErrorIs(t, err, ops.ErrTopicNotFound)
		_, pub := publishDay(t, w, mustKafka(t, 1), 66, channels.WeChat)
		assert.Len(t, pub.Published, 1, "not recorded as published")
	})
}

// acquireEvent claims ev as the worker would for the message carrying it.
func (w *world) acquireEvent(ev channels.Event) channels.Event {
	w.TB.Helper()
	body, err := json.Marshal(ev)
	require.NoError(w.TB, err)
	r, err := w.Claims.Acquire(context.Background(), idempotent.Claim{
		TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body, OccurredAt: ev.OccurredAt,
		Source: idempotent.Source{Topic: ledgertest.Topic, Partition: 1, Offset: w.NextOffset()},
	})
	require.NoError(w.TB, err)
	require.Equal(w.TB, idempotent.Acquired, r.Kind, "%s", ev.Key)
	return ev
}

// TestPublishMissingOnEveryDialect: the publication record keeps a second
// run from publishing, on MariaDB and on the embedded SQLite database.
func TestPublishMissingOnEveryDialect(t *testing.T) {
	sqldbtest.Dialects(t, func(t *testing.T, db *bun.DB) { //nolint:thelper // a test body run once per dialect
		ctx := context.Background()
		k := mustKafka(t, 1)
		tr := trade(channels.WeChat, 71, 1)
		line := payLine(tr)
		line.LineNo, line.Channel, line.Currency = 2, channels.WeChat, "CNY"
		_, err := statementbook.ImportStatement(ctx, db, 71, statements.Statement{Channel: channels.WeChat, Format: "test", SHA1: "sha-71", Lines: []statements.Line{line}}, time.Now())
		require.NoError(t, err)
		rep, err := statementbook.ReconcileStatement(ctx, db, 71, channels.WeChat, reconDay)
		require.NoError(t, err)
		require.Len(t, rep.Items, 1)
		for run, want := range []int{1, 0} {
			pub, err := statementbook.PublishMissing(ctx, db, input(k), rep, testSigning, time.Now())
			require.NoError(t, err)
			assert.Len(t, pub.Published, want, "run %d", run+1)
			assert.Len(t, pub.AlreadyPublished, 1-want, "run %d", run+1)
			assert.Equal(t, "sha-71", pub.StatementSHA1)
		}
		msgs, err := kafkaops.ReadAll(ctx, k.Brokers, k.Topic)
		require.NoError(t, err)
		assert.Len(t, msgs, 1)
	})
}

// TestPublishMissingConcurrently: runs that overlap may each publish an
// event (the worker counts the copies duplicates), but none fails, and each
// key is recorded once.
func TestPublishMissingConcurrently(t *testing.T) {
	w := newWorld(t)
	k := mustKafka(t, 2)
	var lines []statements.Line
	for i := range 5 {
		lines = append(lines, payLine(trade(channels.WeChat, 72, i+1)))
	}
	w.importLines(72, channels.WeChat, lines...)
	rep := reconcileDay(t, w, 72, channels.WeChat, reconDay)
	require.Len(t, rep.Items, 5)

	const runs = 8
	errs := make(chan error, runs)
	published := make(chan int, runs)
	for range runs {
		go func() {
			pub, err := statementbook.PublishMissing(context.Background(), w.DB, input(k), rep, testSigning, time.Now())
			errs <- err
			published <- len(pub.Published)
		}()
	}
	total := 0
	for range runs {
		require.NoError(t, <-errs)
		total += <-published
	}
	assert.GreaterOrEqual(t, total, 5, "every event published at least once")
	var rows []struct {
		Key string `bun:"idempotent_key"`
		N   int    `bun:"n"`
	}
	require.NoError(t, w.DB.NewSelect().ColumnExpr("idempotent_key, COUNT(*) AS n").TableExpr("ss_statement_publish").
		Where("tenant_id = ?", 72).GroupExpr("idempotent_key").Scan(context.Background(), &rows))
	require.Len(t, rows, 5)
	for _, r := range rows {
		assert.Equal(t, 1, r.N, r.Key)
	}
	events, n := topicEvents(t, w, k)
	assert.Len(t, events, 5)
	assert.Equal(t, total, n, "what the runs say they published is on the topic")
	pub, err := statementbook.PublishMissing(context.Background(), w.DB, input(k), rep, testSigning, time.Now())
	require.NoError(t, err)
	assert.Empty(t, pub.Published)
	assert.Len(t, pub.AlreadyPublished, 5)
}
