package settlement

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// mismatchOther is the reason label value recorded for a reason outside
// mismatchReasons: a bug to fix.
const mismatchOther = "other"

// mismatchReasons lists the reason label values of
// paycb_refund_registration_mismatch_total, without mismatchOther.
var mismatchReasons = []string{MismatchAmount, MismatchCumulative, MismatchClosed}

// serviceMetrics records the Service's own metrics:
// paycb_ledger_duplicate_postings_total, paycb_order_total_mismatch_total,
// paycb_refund_unregistered_total and
// paycb_refund_registration_mismatch_total{reason}. Build it with
// newServiceMetrics. All methods are safe for concurrent use, and a nil
// *serviceMetrics records nothing. They are defined here rather than in
// internal/metrics because pkg/ imports nothing under internal/.
type serviceMetrics struct {
	ledgerDuplicates prometheus.Counter
	totalMismatches  prometheus.Counter
	unregistered     prometheus.Counter
	regMismatches    *prometheus.CounterVec
}

// newServiceMetrics creates the settlement metrics, pre-initialises every
// reason to zero and registers them on reg; a nil reg keeps them
// unexported (they still count). It fails, wrapping the registry's error,
// when reg refuses a metric (for example a second set on the same
// registry).
func newServiceMetrics(reg prometheus.Registerer) (*serviceMetrics, error) {
	m := &serviceMetrics{
		ledgerDuplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paycb_ledger_duplicate_postings_total",
			Help: "Settlements that met the ledger's unique key: the event was already posted by a path that bypassed the claim (a bug).",
		}),
		totalMismatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paycb_order_total_mismatch_total",
			Help: "Events whose order total differs from the total first recorded for their trade (the first is kept).",
		}),
		unregistered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paycb_refund_unregistered_total",
			Help: "Successful refunds settled without a matching pre-registration.",
		}),
		regMismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paycb_refund_registration_mismatch_total",
			Help: "Refund callbacks that disagree with the pre-registrations, by reason (amount, cumulative, closed).",
		}, []string{"reason"}),
	}
	for _, r := range mismatchReasons {
		m.regMismatches.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.ledgerDuplicates, m.totalMismatches, m.unregistered, m.regMismatches} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register settlement metrics: %w", err)
			}
		}
	}
	return m, nil
}

// LedgerDuplicatePosting counts one settlement that met the ledger's unique
// key (the event was already posted by a path that bypassed the claim).
func (m *serviceMetrics) LedgerDuplicatePosting() {
	if m != nil {
		m.ledgerDuplicates.Inc()
	}
}

// OrderTotalMismatch counts one event whose order total differs from the
// total first recorded for its trade.
func (m *serviceMetrics) OrderTotalMismatch() {
	if m != nil {
		m.totalMismatches.Inc()
	}
}

// RefundUnregistered counts one successful refund settled without a
// matching pre-registration.
func (m *serviceMetrics) RefundUnregistered() {
	if m != nil {
		m.unregistered.Inc()
	}
}

// RegistrationMismatch counts one refund callback that disagrees with the
// pre-registrations, by reason (mismatchOther outside mismatchReasons).
func (m *serviceMetrics) RegistrationMismatch(reason string) {
	if m == nil {
		return
	}
	switch reason {
	case MismatchAmount, MismatchCumulative, MismatchClosed:
	default:
		reason = mismatchOther
	}
	m.regMismatches.WithLabelValues(reason).Inc()
}
