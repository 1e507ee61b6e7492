package statemente2e

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// statementKeys is the key file of the world: --publish-missing signs with
// e2e-2, the workers verify with both (e2e-1 is the key before a rotation).
const statementKeys = "# current first\ne2e-2=fedcba9876543210fedcba9876543210\ne2e-1=0123456789abcdef0123456789abcdef\n"

// TestTheBinaryPostsOnlySignedStatementEvents: the real `consumer run`
// settles a statement event signed with the older key of its file, and
// dead-letters unauthenticated, claiming nothing, one without a signature
// and one signed with a key it does not hold, as anyone able to write to
// the topic could produce them.
func TestTheBinaryPostsOnlySignedStatementEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	w := newWorld(ctx, t)
	_, code := w.consumer("migrate")
	require.Zero(t, code, "consumer migrate")
	wk := w.startWorker()

	sign := func(file string, value []byte) []kafka.Header {
		t.Helper()
		ks, err := statementauth.Parse([]byte(file))
		require.NoError(t, err)
		sig, err := ks.Sign(value)
		require.NoError(t, err)
		return []kafka.Header{{Key: statementauth.HeaderSignature, Value: []byte(sig)}}
	}
	payment := func(seq int) (channels.Event, kafkaops.Message) {
		t.Helper()
		tr := channelstest.NewTrade(channels.WeChat, seq)
		tr.TenantID = tenant
		ev, value := channelstest.StatementPayment(tr)
		return ev, kafkaops.Message{Key: []byte("WECHAT:" + tr.TradeNo), Value: value}
	}
	older, olderMsg := payment(701)
	olderMsg.Headers = sign("e2e-1=0123456789abcdef0123456789abcdef", olderMsg.Value)
	unsigned, unsignedMsg := payment(702)
	stranger, strangerMsg := payment(703)
	strangerMsg.Headers = sign("stranger=0123456789abcdef0123456789abcdef", strangerMsg.Value)
	require.NoError(t, kafkaops.Produce(ctx, w.brokers, topic, []kafkaops.Message{olderMsg, unsignedMsg, strangerMsg}))
	w.waitConsumed()

	assert.Equal(t, map[string]int{"acquired": 1, "dead_lettered": 2}, wk.outcomes(t))
	claimed := func(ev channels.Event) int {
		var n int
		w.query(&n, "SELECT COUNT(*) FROM ss_channel_idempotent WHERE tenant_id = ? AND idempotent_key = ?", ev.TenantID, string(ev.Key))
		return n
	}
	assert.Equal(t, 1, claimed(older), "signed with the older key: claimed")
	var posted int
	w.query(&posted, "SELECT COUNT(*) FROM ss_ledger_entry WHERE tenant_id = ? AND idempotent_key = ?", older.TenantID, string(older.Key))
	assert.Equal(t, 2, posted, "and posted")
	assert.Zero(t, claimed(unsigned), "unsigned: nothing claimed")
	assert.Zero(t, claimed(stranger), "unknown key: nothing claimed")

	dls, err := kafkaops.ReadAll(ctx, w.brokers, dlq)
	require.NoError(t, err)
	require.Len(t, dls, 2)
	for _, dl := range dls {
		for _, h := range dl.Headers {
			if h.Key == "x-error-kind" {
				assert.Equal(t, "unauthenticated", string(h.Value), "%s", dl.Key)
			}
		}
	}
	wk.stop(t)
	assert.Contains(t, wk.logText(), "statement keys loaded", "the logs are read")
	assert.NotContains(t, wk.logText(), "0123456789abcdef0123456789abcdef", "no secret in the logs")
	assert.NotContains(t, wk.logText(), "fedcba9876543210fedcba9876543210")
}
