package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

func TestQueryAnswerLabels(t *testing.T) {
	refund := channels.Event{Type: eventkey.RefundSucceeded}
	pay := channels.Event{Type: eventkey.PaymentReceived}
	for _, tc := range []struct {
		kind   channels.QueryKind
		answer channels.QueryAnswer
		want   string
	}{
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QuerySettled, Events: []channels.Event{pay}}, "paid"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QuerySettled, Events: []channels.Event{pay, refund}}, "refunded"},
		{channels.QueryRefund, channels.QueryAnswer{Outcome: channels.QuerySettled, Events: []channels.Event{refund}}, "refund_succeeded"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QueryPending}, "not_yet"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QueryClosed}, "closed"},
		{channels.QueryRefund, channels.QueryAnswer{Outcome: channels.QueryNotFound}, "not_found"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QueryThrottled}, "rate_limited"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QueryRetry}, "error"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QueryRefused}, "error"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: channels.QueryUncertain}, "ambiguous"},
		{channels.QueryPayment, channels.QueryAnswer{Outcome: "new-state"}, "ambiguous"},
	} {
		assert.Equal(t, tc.want, metrics.QueryAnswerLabel(tc.kind, tc.answer), "%s %s", tc.kind, tc.answer.Outcome)
	}
}

func TestQueryMetricsExportEverySeriesFromTheStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewQueryMetrics(reg)
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, metrics.QueryRequests)
	require.NoError(t, err)
	assert.Equal(t, len(channels.All())*len(metrics.QueryAnswers), n)
	m.Answered(channels.WeChat, metrics.QueryAnswerPaid)
	m.Answered("PAYPAL", "made-up")
	lint, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, lint)
	n, err = testutil.GatherAndCount(reg, metrics.QueryRequests)
	require.NoError(t, err)
	assert.Equal(t, len(channels.All())*len(metrics.QueryAnswers)+1, n, "an unknown channel is one UNKNOWN series")
}
