package settlement

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSettlementMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newServiceMetrics(reg)
	require.NoError(t, err)
	m.LedgerDuplicatePosting()
	m.OrderTotalMismatch()
	m.RefundUnregistered()
	m.RefundUnregistered()
	m.RegistrationMismatch(MismatchClosed)
	m.RegistrationMismatch("a trade number") // unbounded: clamped
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP paycb_ledger_duplicate_postings_total Settlements that met the ledger's unique key: the event was already posted by a path that bypassed the claim (a bug).
# TYPE paycb_ledger_duplicate_postings_total counter
paycb_ledger_duplicate_postings_total 1
# HELP paycb_order_total_mismatch_total Events whose order total differs from the total first recorded for their trade (the first is kept).
# TYPE paycb_order_total_mismatch_total counter
paycb_order_total_mismatch_total 1
# HELP paycb_refund_registration_mismatch_total Refund callbacks that disagree with the pre-registrations, by reason (amount, cumulative, closed).
# TYPE paycb_refund_registration_mismatch_total counter
paycb_refund_registration_mismatch_total{reason="amount"} 0
paycb_refund_registration_mismatch_total{reason="closed"} 1
paycb_refund_registration_mismatch_total{reason="cumulative"} 0
paycb_refund_registration_mismatch_total{reason="other"} 1
# HELP paycb_refund_unregistered_total Successful refunds settled without a matching pre-registration.
# TYPE paycb_refund_unregistered_total counter
paycb_refund_unregistered_total 2
`)))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	_, err = newServiceMetrics(reg)
	require.Error(t, err, "a second set on one registry is refused")
	unexported, err := newServiceMetrics(nil)
	require.NoError(t, err)
	unexported.RefundUnregistered()
	var none *serviceMetrics
	none.RegistrationMismatch(MismatchAmount) // a nil *serviceMetrics records nothing

	assert.Equal(t, []string{MismatchAmount, MismatchCumulative, MismatchClosed}, mismatchReasons,
		"the reasons settlement reports are the label values the counter keeps")
}
