package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// QueryRequests is the name of the querier's counter of queries by what
// the channel answered.
const QueryRequests = "paycb_query_requests_total"

// The answer label values of paycb_query_requests_total (contract).
const (
	QueryAnswerPaid            = "paid"
	QueryAnswerNotYet          = "not_yet"
	QueryAnswerClosed          = "closed"
	QueryAnswerRefunded        = "refunded"
	QueryAnswerRefundSucceeded = "refund_succeeded"
	QueryAnswerNotFound        = "not_found"
	QueryAnswerRateLimited     = "rate_limited"
	QueryAnswerError           = "error"
	QueryAnswerUnauthenticated = "unauthenticated"
	QueryAnswerAmbiguous       = "ambiguous"
)

// QueryAnswers lists the answer label values, each exported for every
// channel from the start.
var QueryAnswers = []string{
	QueryAnswerPaid, QueryAnswerNotYet, QueryAnswerClosed, QueryAnswerRefunded, QueryAnswerRefundSucceeded,
	QueryAnswerNotFound, QueryAnswerRateLimited, QueryAnswerError, QueryAnswerUnauthenticated, QueryAnswerAmbiguous,
}

// QueryAnswerLabel is the answer label of a verified answer to a query of
// kind: a settled payment query is paid, or refunded when the answer also
// proves a refund; a settled refund query is refund_succeeded; a refused
// request and a transient failure are error; an uncertain answer, or an
// outcome this function does not know, is ambiguous.
func QueryAnswerLabel(kind channels.QueryKind, a channels.QueryAnswer) string {
	switch a.Outcome {
	case channels.QuerySettled:
		if kind == channels.QueryRefund {
			return QueryAnswerRefundSucceeded
		}
		for _, ev := range a.Events {
			if ev.Type == eventkey.RefundSucceeded {
				return QueryAnswerRefunded
			}
		}
		return QueryAnswerPaid
	case channels.QueryPending:
		return QueryAnswerNotYet
	case channels.QueryClosed:
		return QueryAnswerClosed
	case channels.QueryNotFound:
		return QueryAnswerNotFound
	case channels.QueryThrottled:
		return QueryAnswerRateLimited
	case channels.QueryRetry, channels.QueryRefused:
		return QueryAnswerError
	default:
		return QueryAnswerAmbiguous
	}
}

// QueryMetrics are the querier's metrics. Build them with NewQueryMetrics
// on the injected registry.
type QueryMetrics struct {
	requests *prometheus.CounterVec
}

// NewQueryMetrics registers the querier's metrics on reg, with a series
// for every registered channel and answer from the start (a rate over a
// series that appears only with its first increment misses it).
func NewQueryMetrics(reg prometheus.Registerer) (*QueryMetrics, error) {
	m := &QueryMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: QueryRequests,
		Help: "Queries the querier sent to the channels, by channel and by what the channel answered.",
	}, []string{"channel", "answer"})}
	if err := reg.Register(m.requests); err != nil {
		return nil, err
	}
	for _, ch := range channels.All() {
		for _, a := range QueryAnswers {
			m.requests.WithLabelValues(ch.MetricLabel(), a)
		}
	}
	return m, nil
}

// Answered counts one query of channel answered answer (a QueryAnswers
// value; anything else is counted as ambiguous). An unknown channel is
// ChannelUnknown.
func (m *QueryMetrics) Answered(channel channels.Channel, answer string) {
	label := ChannelUnknown
	if spec, ok := channels.Lookup(channel); ok {
		label = spec.MetricLabel()
	}
	known := false
	for _, a := range QueryAnswers {
		known = known || a == answer
	}
	if !known {
		answer = QueryAnswerAmbiguous
	}
	m.requests.WithLabelValues(label, answer).Inc()
}
