package settlement_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// TestUnregisteredRefundWarnsOnlyWhenPreregistered: a refund settled without
// a registration is a WARN only where every refund is expected to be
// registered first; it is counted either way.
func TestUnregisteredRefundWarnsOnlyWhenPreregistered(t *testing.T) {
	for _, tc := range []struct {
		name          string
		preregistered bool
		wantLevel     string
	}{
		{name: "not expected (default)", preregistered: false, wantLevel: "level=DEBUG"},
		{name: "expected", preregistered: true, wantLevel: "level=WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := sqldbtest.MustSQLite(t)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			reg := prometheus.NewRegistry()
			claims := idempotent.NewStore(db)
			svc, err := settlement.New(db, claims, logger, reg)
			require.NoError(t, err)
			svc.SetRefundsPreregistered(tc.preregistered)
			h := &harness{db: db, claims: claims, svc: svc, reg: reg, dec: channels.NewDecoder(channelstest.Keys())}

			tr := channelstest.NewTrade(channels.WeChat, 1)
			h.deliver(t, channelstest.PaymentEnvelope(tr, channelstest.Delivery{}), 1)
			d := h.deliver(t, channelstest.RefundEnvelope(tr, refundAt(tr, "WHO", 100, 0, 1), channelstest.Delivery{}), 2)
			require.Equal(t, idempotent.OutcomePosted, d.result.Outcome)

			assert.InDelta(t, 1, metric(t, h, "paycb_refund_unregistered_total"), 0, "counted either way")
			var line string
			for _, l := range bytes.Split(logs.Bytes(), []byte("\n")) {
				if bytes.Contains(l, []byte("refund settled without a pre-registration")) {
					line = string(l)
				}
			}
			require.NotEmpty(t, line, "the refund is logged: %s", logs.String())
			assert.Contains(t, line, tc.wantLevel)
			assert.Contains(t, line, "refund_no=WHO")
			if !tc.preregistered {
				assert.NotContains(t, logs.String(), "level=WARN", "no WARN at all for an expected unregistered refund")
			}
		})
	}
}
