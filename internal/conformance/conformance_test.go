package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/ledgertest"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	_ "github.com/paycallback/paycallback/pkg/channels/channelstest" // the built-in channels
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/eventkey"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
	"github.com/paycallback/paycallback/pkg/statements"
	"github.com/paycallback/paycallback/pkg/statements/statementsample"
)

// TestEveryChannel runs the suite over every registered channel.
func TestEveryChannel(t *testing.T) {
	codes := channels.Codes()
	require.NotEmpty(t, codes, "the channels are registered (allchannels, through channelstest)")
	for i, ch := range codes {
		t.Run(string(ch), func(t *testing.T) { runSuite(t, ledgertest.New(t), ch, 1000*(i+1)) })
	}
}

// runSuite is the conformance suite for channel ch, on trades numbered
// from seq on in world w.
func runSuite(t *testing.T, w *ledgertest.World, ch channels.Channel, seq int) {
	t.Helper()
	spec, ok := channels.Lookup(ch)
	require.True(t, ok)
	b, ok := sample.BodiesOf(ch)
	require.True(t, ok, "%s has sample bodies", ch)
	_, ok = statements.ParserOf(ch)
	require.True(t, ok, "%s has a statement parser", ch)
	require.NotNil(t, b.StatementLines, "%s builds its statement lines", ch)
	require.NotNil(t, b.Statement, "%s writes its statement", ch)

	tr := sample.NewTrade(ch, seq)
	refund := sample.Refund{No: fmt.Sprintf("RF-%d-1", seq), Amount: 1000}
	payment := sample.PaymentEnvelope(tr, sample.Delivery{})
	retry := sample.PaymentEnvelope(tr, sample.Delivery{Attempt: 1})
	refunded := sample.RefundEnvelope(tr, refund, sample.Delivery{})

	t.Run("decode", func(t *testing.T) {
		p := decode(t, w, payment)
		assert.Equal(t, eventkey.PaymentReceived, p.Type)
		assert.Equal(t, ch, p.Channel)
		assert.Equal(t, tr.TradeNo, p.TradeNo)
		assert.Equal(t, tr.Total, p.OrderTotal)
		r := decode(t, w, retry)
		assert.NotEqual(t, string(payment), string(retry), "a redelivery differs in its bytes")
		assert.Equal(t, p.Key, r.Key, "a redelivery has the payment's key")
		assert.Equal(t, p.Fingerprint, r.Fingerprint, "and its fingerprint")
		f := decode(t, w, refunded)
		assert.Equal(t, eventkey.RefundSucceeded, f.Type)
		assert.Equal(t, refund.No, f.RefundNo)
		assert.NotEqual(t, p.Key, f.Key)
	})

	t.Run("settles in every arrival order", func(t *testing.T) {
		for o, order := range permutations(3) {
			tr := sample.NewTrade(ch, seq+10+o)
			msgs := [][]byte{
				sample.PaymentEnvelope(tr, sample.Delivery{}),
				sample.RefundEnvelope(tr, refund, sample.Delivery{}),
				sample.PaymentEnvelope(tr, sample.Delivery{Attempt: 1}),
			}
			settled, refundSettled := 0, false
			for _, i := range order {
				if settle(t, w, msgs[i]) {
					settled++
					refundSettled = refundSettled || i == 1
					if i == 0 && !refundSettled {
						// The refund is registered, as an operator would,
						// once the payment is posted and before it arrives.
						w.Register(tr, refund.No, refund.Amount)
					}
				}
			}
			assert.Equal(t, 2, settled, "order %v: the payment and the refund settle once each", order)
		}
		rep, err := settlement.Reconcile(context.Background(), w.DB, settlement.ReconcileOptions{})
		require.NoError(t, err)
		assert.Empty(t, rep.Discrepancies, "the ledger reconciles clean")
	})

	t.Run("statement", func(t *testing.T) {
		events := []channels.Event{decode(t, w, payment), decode(t, w, refunded), decode(t, w, retry)}
		lines, err := statementsample.FromEvents(ch, events)
		require.NoError(t, err)
		require.NotEmpty(t, lines)
		data, err := b.Statement(lines)
		require.NoError(t, err)
		st, err := statements.Parse(ch, data, "")
		require.NoError(t, err)
		assert.Equal(t, ch, st.Channel)
		require.Len(t, st.Lines, len(lines), "the statement parses back into the lines it was written from")
		for i, l := range st.Lines {
			assert.Equal(t, []any{lines[i].Kind, lines[i].TradeNo, lines[i].Amount, lines[i].SettledAmount},
				[]any{l.Kind, l.TradeNo, l.Amount, l.SettledAmount}, "line %d", i+1)
		}
		assert.NotEmpty(t, st.BindingMerchantIDs(), "the statement names a merchant (%s)", spec.StatementMerchantField)
	})

	t.Run("a statement keeps to its day, each line once", func(t *testing.T) { statementDays(t, w, ch, seq) })

	t.Run("metrics label", func(t *testing.T) {
		assert.Equal(t, spec.MetricLabel(), metrics.ClampChannel(string(ch)))
		assert.NotEqual(t, metrics.ChannelUnknown, metrics.ClampChannel(string(ch)))
	})

	t.Run("dlq show", func(t *testing.T) {
		v := deadletters.ViewOf("dlq", deadletters.Message{Key: []byte(tr.TradeNo), Value: payment, Kind: string(channels.KindMalformed)}, nil, sample.Keys())
		require.NotNil(t, v.Envelope)
		assert.True(t, v.Envelope.Valid, v.Envelope.Problem)
		assert.Equal(t, string(ch), v.Envelope.Channel)
		assert.NotEmpty(t, v.Body)
		if spec.ViewResource != nil {
			require.NotNil(t, v.Resource, "a channel with an encrypted resource shows it")
			assert.Empty(t, v.Resource.DecryptError)
		}
	})
}

// decode decodes value with the world's decoder; it must move money.
func decode(t *testing.T, w *ledgertest.World, value []byte) channels.Event {
	t.Helper()
	res, err := w.Dec.Decode(value)
	require.NoError(t, err)
	require.False(t, res.Ignored, res.IgnoreReason)
	return res.Event
}

// settle claims value and settles it as the worker would, reporting
// whether it settled (false: a duplicate of a claim already made).
func settle(t *testing.T, w *ledgertest.World, value []byte) bool {
	t.Helper()
	ev := decode(t, w, value)
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	ar, err := w.Claims.Acquire(context.Background(), idempotent.Claim{
		TenantID: ev.TenantID, Key: ev.Key, EventType: ev.Type, Fingerprint: ev.Fingerprint, Event: body,
		Source: idempotent.Source{Topic: ledgertest.Topic, Partition: 0, Offset: w.NextOffset()},
	})
	require.NoError(t, err)
	if ar.Kind != idempotent.Acquired {
		assert.Equal(t, idempotent.Duplicate, ar.Kind, "%s", ev.Key)
		return false
	}
	_, err = w.Svc.Settle(context.Background(), ev)
	require.NoError(t, err)
	return true
}

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}
