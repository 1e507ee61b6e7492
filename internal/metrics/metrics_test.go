package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/buildinfo"
	"github.com/paycallback/paycallback/pkg/channels"
	_ "github.com/paycallback/paycallback/pkg/channels/allchannels" // the built-in channels
)

func mustNew(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	require.NoError(t, err)
	return m, reg
}

func TestLint(t *testing.T) {
	m, reg := mustNew(t)
	m.Event(string(channels.WeChat), EventTypePaymentReceived, OutcomeAcquired)
	m.ObserveSettleDuration(time.Second)
	m.SetConsumerLag(0, 5)
	m.SetPartitionStalled(0, 1500*time.Millisecond)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	m.WeChatDecrypted(1001, 2, 2)
	for _, c := range []prometheus.Collector{m.events, m.deadLetters, m.settles, m.errors, m.orphans, m.settleDur, m.lag, m.stalled, m.decryptKeys} {
		problems, err := testutil.CollectAndLint(c)
		require.NoError(t, err)
		assert.Empty(t, problems)
	}
}

func TestPreinitialised(t *testing.T) {
	m, _ := mustNew(t)
	// 3 channels x 2 event types x 6 outcomes, plus UNKNOWN/UNKNOWN/dead_lettered.
	assert.Equal(t, 3*2*6+1, testutil.CollectAndCount(m.events))
	assert.Equal(t, len(DeadLetterKinds), testutil.CollectAndCount(m.deadLetters), "every contract kind")
	assert.Len(t, DeadLetterKinds, 10)
	assert.Equal(t, 4, testutil.CollectAndCount(m.settles))
	assert.Equal(t, 9, testutil.CollectAndCount(m.errors), "every stage, register among them")
	assert.Equal(t, 0, testutil.CollectAndCount(m.lag), "lag appears only for assigned partitions")
	assert.Equal(t, 0, testutil.CollectAndCount(m.stalled), "stalls appear only for assigned partitions")

	require.NoError(t, testutil.CollectAndCompare(m.settles, strings.NewReader(`
# HELP paycb_settle_total Settlements by outcome.
# TYPE paycb_settle_total counter
paycb_settle_total{outcome="FENCE_LOST"} 0
paycb_settle_total{outcome="NO_MONEY"} 0
paycb_settle_total{outcome="OVER_REFUND"} 0
paycb_settle_total{outcome="POSTED"} 0
`)))
}

func TestEvent(t *testing.T) {
	for _, tc := range []struct {
		name                string
		channel, eventType  string
		outcome             Outcome
		wantChannel, wantET string
		wantOutcome         string
	}{
		{"known", string(channels.Alipay), EventTypeRefundSucceeded, OutcomeDuplicate, "ALIPAY", "REFUND_SUCCEEDED", "duplicate"},
		{"unknown channel", "PAYPAL", EventTypePaymentReceived, OutcomeDeadLettered, "UNKNOWN", "PAYMENT_RECEIVED", "dead_lettered"},
		{"channel case matters", "wechat", EventTypePaymentReceived, OutcomeAcquired, "UNKNOWN", "PAYMENT_RECEIVED", "acquired"},
		{"empty channel and type", "", "", OutcomeDeadLettered, "UNKNOWN", "UNKNOWN", "dead_lettered"},
		{"unknown event type", string(channels.SQB), "REFUND.ABNORMAL", OutcomeIgnored, "SQB", "UNKNOWN", "ignored"},
		{"unknown outcome", string(channels.WeChat), EventTypePaymentReceived, Outcome("trade-123"), "WECHAT", "PAYMENT_RECEIVED", "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := mustNew(t)
			m.Event(tc.channel, tc.eventType, tc.outcome)
			m.Event(tc.channel, tc.eventType, tc.outcome)
			assert.InDelta(t, 2, testutil.ToFloat64(m.events.WithLabelValues(tc.wantChannel, tc.wantET, tc.wantOutcome)), 0)
		})
	}
}

func TestDeadLetter(t *testing.T) {
	m, _ := mustNew(t)
	m.DeadLetter(KindOverRefund)
	m.DeadLetter(KindMalformed)
	m.DeadLetter(KindMalformed)
	m.DeadLetter(DeadLetterKind("parse error at byte 17"))
	m.DeadLetter(KindUnauthenticated)
	m.DeadLetter(KindTenantMismatch)
	require.NoError(t, testutil.CollectAndCompare(m.deadLetters, strings.NewReader(`
# HELP paycb_dead_letters_total Dead letters written, by contract error kind.
# TYPE paycb_dead_letters_total counter
paycb_dead_letters_total{kind="conflict"} 0
paycb_dead_letters_total{kind="decrypt_failed"} 0
paycb_dead_letters_total{kind="invalid_amount"} 0
paycb_dead_letters_total{kind="malformed"} 2
paycb_dead_letters_total{kind="no_key"} 0
paycb_dead_letters_total{kind="other"} 1
paycb_dead_letters_total{kind="over_refund"} 1
paycb_dead_letters_total{kind="tenant_mismatch"} 1
paycb_dead_letters_total{kind="unauthenticated"} 1
paycb_dead_letters_total{kind="unknown_channel"} 0
paycb_dead_letters_total{kind="unsupported"} 0
`)))
}

func TestSettledAndErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		record  func(m *Metrics)
		counter func(m *Metrics) prometheus.Collector
	}{
		{"posted", func(m *Metrics) { m.Settled(SettlePosted) }, func(m *Metrics) prometheus.Collector { return m.settles.WithLabelValues("POSTED") }},
		{"fence lost", func(m *Metrics) { m.Settled(SettleFenceLost) }, func(m *Metrics) prometheus.Collector { return m.settles.WithLabelValues("FENCE_LOST") }},
		{"settle other", func(m *Metrics) { m.Settled("posted") }, func(m *Metrics) prometheus.Collector { return m.settles.WithLabelValues("OTHER") }},
		{"stage settle", func(m *Metrics) { m.ProcessingError(StageSettle) }, func(m *Metrics) prometheus.Collector { return m.errors.WithLabelValues("settle") }},
		{"stage commit", func(m *Metrics) { m.ProcessingError(StageCommit) }, func(m *Metrics) prometheus.Collector { return m.errors.WithLabelValues("commit") }},
		{"stage other", func(m *Metrics) { m.ProcessingError("dial tcp 10.0.0.1:3306") }, func(m *Metrics) prometheus.Collector { return m.errors.WithLabelValues("other") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := mustNew(t)
			tc.record(m)
			assert.InDelta(t, 1, testutil.ToFloat64(tc.counter(m)), 0)
		})
	}
}

func TestGauges(t *testing.T) {
	m, _ := mustNew(t)
	m.SetOrphanClaims(3)
	assert.InDelta(t, 3, testutil.ToFloat64(m.orphans), 0)
	m.SetOrphanClaims(0)
	assert.InDelta(t, 0, testutil.ToFloat64(m.orphans), 0)

	m.SetConsumerLag(0, 12)
	m.SetConsumerLag(11, -4)
	m.SetConsumerLag(-1, 99)
	assert.InDelta(t, 12, testutil.ToFloat64(m.lag.WithLabelValues("0")), 0)
	assert.InDelta(t, 0, testutil.ToFloat64(m.lag.WithLabelValues("11")), 0)
	assert.Equal(t, 2, testutil.CollectAndCount(m.lag))
	m.DeleteConsumerLag(11)
	require.NoError(t, testutil.CollectAndCompare(m.lag, strings.NewReader(`
# HELP paycb_consumer_lag Messages behind the end of each partition assigned to this worker: its end offset minus the group's committed offset, from the broker.
# TYPE paycb_consumer_lag gauge
paycb_consumer_lag{partition="0"} 12
`)))

	m.SetPartitionStalled(3, 2500*time.Millisecond)
	m.SetPartitionStalled(4, -time.Second)
	m.SetPartitionStalled(-1, time.Second)
	assert.InDelta(t, 2.5, testutil.ToFloat64(m.stalled.WithLabelValues("3")), 0)
	assert.InDelta(t, 0, testutil.ToFloat64(m.stalled.WithLabelValues("4")), 0)
	m.DeletePartitionStalled(4)
	require.NoError(t, testutil.CollectAndCompare(m.stalled, strings.NewReader(`
# HELP paycb_partition_stalled_seconds Seconds since each partition assigned to this worker last advanced while it holds an unfinished message (0 when it holds none).
# TYPE paycb_partition_stalled_seconds gauge
paycb_partition_stalled_seconds{partition="3"} 2.5
`)))

	assert.InDelta(t, 0, testutil.ToFloat64(m.joined), 0, "not joined until told")
	m.SetGroupJoined(true)
	assert.InDelta(t, 1, testutil.ToFloat64(m.joined), 0)
	m.SetGroupJoined(false)
	assert.InDelta(t, 0, testutil.ToFloat64(m.joined), 0)
}

// TestBuildInfo: one paycb_build_info series, 1, labelled with this build.
func TestBuildInfo(t *testing.T) {
	_, reg := mustNew(t)
	b := buildinfo.Read()
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP paycb_build_info The running build: 1, labelled with its version, VCS revision and Go version.
# TYPE paycb_build_info gauge
paycb_build_info{goversion=%q,revision=%q,version=%q} 1
`, b.GoVersion, b.Revision, b.Version)), "paycb_build_info"))
}

func TestSettleDuration(t *testing.T) {
	m, reg := mustNew(t)
	m.ObserveSettleDuration(2 * time.Millisecond)
	m.ObserveSettleDuration(45 * time.Second)
	m.ObserveSettleDuration(-time.Second)
	m.ObserveSettleDuration(time.Hour)

	families, err := reg.Gather()
	require.NoError(t, err)
	var found bool
	for _, f := range families {
		if f.GetName() != "paycb_settle_duration_seconds" {
			continue
		}
		found = true
		h := f.GetMetric()[0].GetHistogram()
		assert.Equal(t, uint64(4), h.GetSampleCount())
		assert.InDelta(t, 0.002+45+3600, h.GetSampleSum(), 1e-9)
		buckets := h.GetBucket()
		require.Len(t, buckets, len(SettleDurationBuckets))
		assert.InDelta(t, 0.001, buckets[0].GetUpperBound(), 0)
		assert.InDelta(t, 600, buckets[len(buckets)-1].GetUpperBound(), 0)
		assert.Equal(t, uint64(1), buckets[0].GetCumulativeCount(), "the negative duration counts as zero")
		assert.Equal(t, uint64(3), buckets[len(buckets)-1].GetCumulativeCount(), "an hour is only in +Inf")
	}
	assert.True(t, found)
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	assert.NotPanics(t, func() {
		m.Event(string(channels.WeChat), EventTypePaymentReceived, OutcomeAcquired)
		m.DeadLetter(KindMalformed)
		m.Settled(SettlePosted)
		m.ObserveSettleDuration(time.Second)
		m.ProcessingError(StageSettle)
		m.SetOrphanClaims(1)
		m.SetConsumerLag(0, 1)
		m.DeleteConsumerLag(0)
		m.SetPartitionStalled(0, time.Second)
		m.DeletePartitionStalled(0)
		m.WeChatDecrypted(1001, 1, 2)
	})
}

func TestNewErrors(t *testing.T) {
	_, err := New(nil)
	require.Error(t, err)

	reg := prometheus.NewRegistry()
	_, err = New(reg)
	require.NoError(t, err)
	_, err = New(reg)
	require.Error(t, err, "registering twice on one registry")
	var are prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &are)
}

func TestNewRegistry(t *testing.T) {
	reg := NewRegistry()
	_, err := New(reg)
	require.NoError(t, err)
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	assert.True(t, names["go_goroutines"])
	assert.True(t, names["paycb_events_total"])
	assert.NotSame(t, prometheus.DefaultRegisterer, reg)
}

func TestClamp(t *testing.T) {
	for _, spec := range channels.All() {
		t.Run("channel "+string(spec.Code), func(t *testing.T) {
			assert.Equal(t, string(spec.Code), ClampChannel(string(spec.Code)), "the contract's label is the code")
		})
	}
	for in, want := range map[string]string{"UNKNOWN": "UNKNOWN", "Alipay": "UNKNOWN", "x": "UNKNOWN"} {
		t.Run("channel "+in, func(t *testing.T) { assert.Equal(t, want, ClampChannel(in)) })
	}
	for in, want := range map[string]string{"PAYMENT_RECEIVED": "PAYMENT_RECEIVED", "REFUND_SUCCEEDED": "REFUND_SUCCEEDED", "TRANSACTION.SUCCESS": "UNKNOWN"} {
		t.Run("event type "+in, func(t *testing.T) { assert.Equal(t, want, ClampEventType(in)) })
	}
}

func TestWeChatDecrypted(t *testing.T) {
	m, _ := mustNew(t)
	require.NoError(t, testutil.CollectAndCompare(m.decryptKeys, strings.NewReader(`
# HELP paycb_wechat_decrypt_key_total WeChat resources decrypted, by the position of the APIv3 key that opened them (1 = current); tenant set only for tenants with several keys.
# TYPE paycb_wechat_decrypt_key_total counter
paycb_wechat_decrypt_key_total{position="1",tenant=""} 0
`)), "the current key's series exists from the first scrape")

	m.WeChatDecrypted(1001, 1, 2) // tenant rotating: labelled
	m.WeChatDecrypted(1001, 2, 2)
	m.WeChatDecrypted(1001, 2, 2)
	m.WeChatDecrypted(1002, 1, 1) // one key: no tenant label
	m.WeChatDecrypted(1003, 1, 1)
	m.WeChatDecrypted(1004, MaxKeyPosition+1, MaxKeyPosition+1)
	m.WeChatDecrypted(1005, 0, 2) // nothing decrypted: not counted
	m.WeChatDecrypted(0, 1, 2)    // no tenant: never a label
	require.NoError(t, testutil.CollectAndCompare(m.decryptKeys, strings.NewReader(`
# HELP paycb_wechat_decrypt_key_total WeChat resources decrypted, by the position of the APIv3 key that opened them (1 = current); tenant set only for tenants with several keys.
# TYPE paycb_wechat_decrypt_key_total counter
paycb_wechat_decrypt_key_total{position="1",tenant=""} 3
paycb_wechat_decrypt_key_total{position="1",tenant="1001"} 1
paycb_wechat_decrypt_key_total{position="2",tenant="1001"} 2
paycb_wechat_decrypt_key_total{position="other",tenant="1004"} 1
`)))
}
