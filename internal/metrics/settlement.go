package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// The reason label values of paycb_refund_registration_mismatch_total
// (settlement.MismatchAmount, MismatchCumulative and MismatchClosed). A
// reason outside this set is recorded as ReasonOther.
const (
	// ReasonAmount: a per-refund amount (WeChat) differs from its
	// registration's.
	ReasonAmount = "amount"
	// ReasonCumulative: on a cumulative channel, the trade's refunded
	// total is outside what the registrations allow.
	ReasonCumulative = "cumulative"
	// ReasonClosed: a refund succeeded whose registration was CLOSED.
	ReasonClosed = "closed"
	// ReasonOther marks a value outside the set: a bug to fix.
	ReasonOther = "other"
)

// MismatchReasons lists the reason label values, without ReasonOther.
var MismatchReasons = []string{ReasonAmount, ReasonCumulative, ReasonClosed}

// Settlement records the settlement service's own metrics:
// paycb_ledger_duplicate_postings_total, paycb_order_total_mismatch_total,
// paycb_refund_unregistered_total and
// paycb_refund_registration_mismatch_total{reason}. Build it with
// NewSettlement. All methods are safe for concurrent use, and a nil
// *Settlement records nothing.
type Settlement struct {
	ledgerDuplicates prometheus.Counter
	totalMismatches  prometheus.Counter
	unregistered     prometheus.Counter
	regMismatches    *prometheus.CounterVec
}

// NewSettlement creates the settlement metrics, pre-initialises every
// reason to zero and registers them on reg; a nil reg keeps them
// unexported (they still count). It fails, wrapping the registry's error,
// when reg refuses a metric (for example a second Settlement on the same
// registry).
func NewSettlement(reg prometheus.Registerer) (*Settlement, error) {
	m := &Settlement{
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
	for _, r := range MismatchReasons {
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
func (m *Settlement) LedgerDuplicatePosting() {
	if m != nil {
		m.ledgerDuplicates.Inc()
	}
}

// OrderTotalMismatch counts one event whose order total differs from the
// total first recorded for its trade.
func (m *Settlement) OrderTotalMismatch() {
	if m != nil {
		m.totalMismatches.Inc()
	}
}

// RefundUnregistered counts one successful refund settled without a
// matching pre-registration.
func (m *Settlement) RefundUnregistered() {
	if m != nil {
		m.unregistered.Inc()
	}
}

// RegistrationMismatch counts one refund callback that disagrees with the
// pre-registrations, by reason (ReasonOther outside MismatchReasons).
func (m *Settlement) RegistrationMismatch(reason string) {
	if m == nil {
		return
	}
	switch reason {
	case ReasonAmount, ReasonCumulative, ReasonClosed:
	default:
		reason = ReasonOther
	}
	m.regMismatches.WithLabelValues(reason).Inc()
}
