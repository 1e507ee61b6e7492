package metrics

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paycallback/paycallback/internal/buildinfo"
	"github.com/paycallback/paycallback/pkg/channels"
)

// ChannelUnknown is the channel label value of paycb_events_total for a
// channel that is not registered. The registered channels' values are
// their Spec.MetricLabel (channels.All: WECHAT, ALIPAY, SQB).
const ChannelUnknown = "UNKNOWN"

// Event-type label values of paycb_events_total. Anything else is recorded
// as EventTypeUnknown.
const (
	EventTypePaymentReceived = "PAYMENT_RECEIVED"
	EventTypeRefundSucceeded = "REFUND_SUCCEEDED"
	EventTypeUnknown         = "UNKNOWN"
)

// Outcome is what became of one consumed message: the outcome label of
// paycb_events_total. Each consumed message is counted exactly once.
type Outcome string

// The contract's outcomes. An Outcome outside this set is recorded as
// OutcomeOther.
const (
	// OutcomeAcquired: the message made the claim.
	OutcomeAcquired Outcome = "acquired"
	// OutcomeDuplicate: a channel retry of an already claimed event.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeRedelivered: the very Kafka message that made the claim, seen
	// again (a replay or a redelivery).
	OutcomeRedelivered Outcome = "redelivered"
	// OutcomeConflict: same key, different payload fingerprint.
	OutcomeConflict Outcome = "conflict"
	// OutcomeDeadLettered: the message could not be decoded.
	OutcomeDeadLettered Outcome = "dead_lettered"
	// OutcomeIgnored: no money moves (e.g. REFUND.ABNORMAL).
	OutcomeIgnored Outcome = "ignored"
	// OutcomeOther marks a value outside the set: a bug to fix, not a
	// category to use.
	OutcomeOther Outcome = "other"
)

// Outcomes lists the contract's outcomes, without OutcomeOther.
var Outcomes = []Outcome{OutcomeAcquired, OutcomeDuplicate, OutcomeRedelivered, OutcomeConflict, OutcomeDeadLettered, OutcomeIgnored}

// DeadLetterKind is the contract's x-error-kind of a dead letter: the kind
// label of paycb_dead_letters_total.
type DeadLetterKind string

// The contract's dead-letter kinds. A kind outside this set is recorded as
// KindOther.
const (
	KindMalformed      DeadLetterKind = "malformed"
	KindUnknownChannel DeadLetterKind = "unknown_channel"
	KindDecryptFailed  DeadLetterKind = "decrypt_failed"
	KindNoKey          DeadLetterKind = "no_key"
	KindConflict       DeadLetterKind = "conflict"
	KindOverRefund     DeadLetterKind = "over_refund"
	KindInvalidAmount  DeadLetterKind = "invalid_amount"
	KindUnsupported    DeadLetterKind = "unsupported"
	// KindUnauthenticated: a statement event without a valid signature.
	KindUnauthenticated DeadLetterKind = "unauthenticated"
	KindTenantMismatch  DeadLetterKind = "tenant_mismatch"
	// KindOther marks a value outside the set.
	KindOther DeadLetterKind = "other"
)

// DeadLetterKinds lists the contract's dead-letter kinds, without KindOther.
var DeadLetterKinds = []DeadLetterKind{
	KindMalformed, KindUnknownChannel, KindDecryptFailed, KindNoKey, KindConflict, KindOverRefund, KindInvalidAmount, KindUnsupported,
	KindUnauthenticated, KindTenantMismatch,
}

// SettleOutcome is the outcome label of paycb_settle_total.
type SettleOutcome string

// The contract's settle outcomes. A value outside this set is recorded as
// SettleOther.
const (
	// SettlePosted: the ledger postings were written.
	SettlePosted SettleOutcome = "POSTED"
	// SettleNoMoney: a late cumulative refund moved nothing.
	SettleNoMoney SettleOutcome = "NO_MONEY"
	// SettleOverRefund: the refund exceeded what was paid.
	SettleOverRefund SettleOutcome = "OVER_REFUND"
	// SettleFenceLost: another settler won the fence.
	SettleFenceLost SettleOutcome = "FENCE_LOST"
	// SettleOther marks a value outside the set.
	SettleOther SettleOutcome = "OTHER"
)

// SettleOutcomes lists the contract's settle outcomes, without SettleOther.
var SettleOutcomes = []SettleOutcome{SettlePosted, SettleNoMoney, SettleOverRefund, SettleFenceLost}

// Stage is where an error left a message unacknowledged for redelivery: the
// stage label of paycb_processing_errors_total.
type Stage string

// The stages. A value outside this set is recorded as StageOther.
const (
	StageFetch        Stage = "fetch"         // reading from Kafka
	StageDecode       Stage = "decode"        // a transient error while decoding (not a dead letter)
	StageRefundUpdate Stage = "refund_update" // updating a refund registration
	StageRegister     Stage = "register"      // recording a registration message
	StageAcquire      Stage = "acquire"       // the claim's insert
	StageSettle       Stage = "settle"        // the business transaction
	StageDeadLetter   Stage = "dead_letter"   // writing a dead letter
	StageCommit       Stage = "commit"        // committing the offset
	StageSweep        Stage = "sweep"         // the orphan sweeper
	StageOther        Stage = "other"         // a value outside the set
)

// Stages lists the stages, without StageOther.
var Stages = []Stage{StageFetch, StageDecode, StageRefundUpdate, StageRegister, StageAcquire, StageSettle, StageDeadLetter, StageCommit, StageSweep}

// SettleDurationBuckets are paycb_settle_duration_seconds's buckets, from
// 1ms to 10min: the duration runs from the envelope's received_at to the
// ledger commit, so it includes time spent waiting in Kafka.
var SettleDurationBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

var eventTypes = []string{EventTypePaymentReceived, EventTypeRefundSucceeded}

// Metrics records the contract's metrics. Build it with New. All methods are
// safe for concurrent use, and a nil *Metrics records nothing, so tests of
// other packages may pass nil.
type Metrics struct {
	events      *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	settles     *prometheus.CounterVec
	errors      *prometheus.CounterVec
	orphans     prometheus.Gauge
	settleDur   prometheus.Histogram
	lag         *prometheus.GaugeVec
	stalled     *prometheus.GaugeVec
	joined      prometheus.Gauge
	decryptKeys *prometheus.CounterVec
	merged      *prometheus.CounterVec
	mergedSize  prometheus.Histogram
}

// MergeResult is the result label of paycb_merged_transactions_total.
type MergeResult string

// The results of a merged transaction.
const (
	// MergeSettled: it settled every event of its round.
	MergeSettled MergeResult = "settled"
	// MergeSplit: it failed, or left events (a held order row) unsettled,
	// which went back to their own partitions.
	MergeSplit MergeResult = "split"
)

// MergedBatchSizeBuckets are the buckets of paycb_merged_transaction_events.
var MergedBatchSizeBuckets = []float64{2, 4, 8, 16, 32, 64, 128, 256}

// New creates the contract's metrics, registers them on reg and
// pre-initialises the common label combinations to zero, so dashboards and
// rate() see every series from the first scrape. It returns an error
// (wrapping the registry's) when a metric is already registered on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("new metrics: nil registerer")
	}
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paycb_events_total",
			Help: "Consumed channel-event messages, each counted once, by channel, event type and outcome.",
		}, []string{"channel", "event_type", "outcome"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paycb_dead_letters_total",
			Help: "Dead letters written, by contract error kind.",
		}, []string{"kind"}),
		settles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paycb_settle_total",
			Help: "Settlements by outcome.",
		}, []string{"outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paycb_processing_errors_total",
			Help: "Errors that left a message unacknowledged for redelivery, by pipeline stage.",
		}, []string{"stage"}),
		orphans: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paycb_orphan_claims",
			Help: "Claims ACQUIRED for longer than the configured orphan threshold.",
		}),
		settleDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "paycb_settle_duration_seconds",
			Help:    "Time from the callback's received_at to the ledger commit, including time waiting in Kafka.",
			Buckets: SettleDurationBuckets,
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paycb_consumer_lag",
			Help: "Messages behind the end of each partition assigned to this worker: its end offset minus the group's committed offset, from the broker.",
		}, []string{"partition"}),
		stalled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: PartitionStalled,
			Help: PartitionStalledHelp,
		}, []string{"partition"}),
		joined: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paycb_group_joined",
			Help: "1 while this instance is a member of the consumer group with a live session (a generation not ended), else 0.",
		}),
		merged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paycb_merged_transactions_total",
			Help: "Business transactions shared by the batches of several partitions, by result: settled, or split back to the partitions.",
		}, []string{"result"}),
		mergedSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "paycb_merged_transaction_events",
			Help:    "Events of each business transaction shared by the batches of several partitions.",
			Buckets: MergedBatchSizeBuckets,
		}),
		decryptKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paycb_wechat_decrypt_key_total",
			Help: "WeChat resources decrypted, by the position of the APIv3 key that opened them (1 = current); tenant set only for tenants with several keys.",
		}, []string{"position", "tenant"}),
	}
	build := buildinfo.Read()
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paycb_build_info",
		Help: "The running build: 1, labelled with its version, VCS revision and Go version.",
	}, []string{"version", "revision", "goversion"})
	buildInfo.WithLabelValues(build.Version, build.Revision, build.GoVersion).Set(1)
	for _, c := range []prometheus.Collector{m.events, m.deadLetters, m.settles, m.errors, m.orphans, m.settleDur, m.lag, m.stalled, m.joined, m.decryptKeys, m.merged, m.mergedSize, buildInfo} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}

	for _, spec := range channels.All() {
		for _, et := range eventTypes {
			for _, o := range Outcomes {
				m.events.WithLabelValues(spec.MetricLabel(), et, string(o))
			}
		}
	}
	// A message that cannot be decoded knows neither channel nor event type.
	m.events.WithLabelValues(ChannelUnknown, EventTypeUnknown, string(OutcomeDeadLettered))
	for _, k := range DeadLetterKinds {
		m.deadLetters.WithLabelValues(string(k))
	}
	for _, o := range SettleOutcomes {
		m.settles.WithLabelValues(string(o))
	}
	for _, s := range Stages {
		m.errors.WithLabelValues(string(s))
	}
	m.decryptKeys.WithLabelValues("1", "")
	m.merged.WithLabelValues(string(MergeSettled))
	m.merged.WithLabelValues(string(MergeSplit))
	return m, nil
}

// NewRegistry returns a new registry (never the global one) holding the Go
// runtime and process collectors, ready for New and for the admin server's
// /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Event counts one consumed message. channel and eventType are clamped to
// their sets (ChannelUnknown, EventTypeUnknown), outcome to Outcomes
// (OutcomeOther).
func (m *Metrics) Event(channel, eventType string, outcome Outcome) {
	if m == nil {
		return
	}
	m.events.WithLabelValues(ClampChannel(channel), ClampEventType(eventType), string(clampOutcome(outcome))).Inc()
}

// DeadLetter counts one dead letter written, by its contract kind (KindOther
// outside DeadLetterKinds).
func (m *Metrics) DeadLetter(kind DeadLetterKind) {
	if m == nil {
		return
	}
	m.deadLetters.WithLabelValues(string(clampKind(kind))).Inc()
}

// Settled counts one settlement by outcome (SettleOther outside
// SettleOutcomes).
func (m *Metrics) Settled(outcome SettleOutcome) {
	if m == nil {
		return
	}
	m.settles.WithLabelValues(string(clampSettle(outcome))).Inc()
}

// Merged records one business transaction shared by several partitions'
// batches: its events and its result.
func (m *Metrics) Merged(events int, result MergeResult) {
	if m == nil {
		return
	}
	if result != MergeSettled {
		result = MergeSplit
	}
	m.merged.WithLabelValues(string(result)).Inc()
	m.mergedSize.Observe(float64(events))
}

// ObserveSettleDuration records the time from the envelope's received_at to
// the ledger commit. A negative duration (the receiver's clock ahead of
// ours) is recorded as zero.
func (m *Metrics) ObserveSettleDuration(d time.Duration) {
	if m == nil {
		return
	}
	m.settleDur.Observe(max(d, 0).Seconds())
}

// ProcessingError counts one error that left a message unacknowledged, by
// stage (StageOther outside Stages).
func (m *Metrics) ProcessingError(stage Stage) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(string(clampStage(stage))).Inc()
}

// SetOrphanClaims sets the number of claims ACQUIRED longer than the orphan
// threshold.
func (m *Metrics) SetOrphanClaims(n int) {
	if m == nil {
		return
	}
	m.orphans.Set(float64(n))
}

// SetConsumerLag sets how many messages partition is behind its end. The
// partition label is bounded by the topic's partition count; negative
// partitions are ignored and negative lag is recorded as zero. Call
// DeleteConsumerLag when the partition is revoked, so another worker's
// partition is not reported stale from here.
func (m *Metrics) SetConsumerLag(partition int, lag int64) {
	if m == nil || partition < 0 {
		return
	}
	m.lag.WithLabelValues(strconv.Itoa(partition)).Set(float64(max(lag, 0)))
}

// DeleteConsumerLag removes partition's lag series.
func (m *Metrics) DeleteConsumerLag(partition int) {
	if m == nil || partition < 0 {
		return
	}
	m.lag.DeleteLabelValues(strconv.Itoa(partition))
}

// PartitionStalled is the gauge a worker serves for each partition it
// owns, labelled partition; PartitionStalledHelp says what it measures.
// `consumer status` reads it from every member's /metrics.
const PartitionStalled = "paycb_partition_stalled_seconds"

// PartitionStalledHelp is PartitionStalled's help: the one explanation of
// a partition's stall.
const PartitionStalledHelp = "Seconds since each partition assigned to this worker last advanced while it holds an unfinished message (0 when it holds none)."

// SetPartitionStalled sets how long partition has held an unfinished
// message without advancing (zero when it holds none; negative is recorded
// as zero). Negative partitions are ignored. Call DeletePartitionStalled
// when the partition is revoked.
func (m *Metrics) SetPartitionStalled(partition int, d time.Duration) {
	if m == nil || partition < 0 {
		return
	}
	m.stalled.WithLabelValues(strconv.Itoa(partition)).Set(max(d, 0).Seconds())
}

// DeletePartitionStalled removes partition's stall series.
func (m *Metrics) DeletePartitionStalled(partition int) {
	if m == nil || partition < 0 {
		return
	}
	m.stalled.DeleteLabelValues(strconv.Itoa(partition))
}

// SetGroupJoined sets paycb_group_joined: 1 while this instance is a
// member of the group with a live session, 0 otherwise (its value from
// New until the first generation is joined).
func (m *Metrics) SetGroupJoined(joined bool) {
	if m == nil {
		return
	}
	v := 0.0
	if joined {
		v = 1
	}
	m.joined.Set(v)
}

// MaxKeyPosition is the largest key position paycb_wechat_decrypt_key_total
// records as a number; a larger one is recorded as "other".
const MaxKeyPosition = 8

// WeChatDecrypted counts one WeChat resource decrypted by the key at
// position (1 = the tenant's current key) of the tenant's keys keys. The
// tenant label is the tenant ID when keys > 1 (a tenant in the middle of a
// rotation, so that an operator sees when its old key stops being used),
// else empty, so the label's values stay bounded by the configuration.
// A position outside 1..MaxKeyPosition is recorded as "other"; a
// non-positive position (nothing decrypted) is not recorded.
func (m *Metrics) WeChatDecrypted(tenant int64, position, keys int) {
	if m == nil || position <= 0 {
		return
	}
	pos := "other"
	if position <= MaxKeyPosition {
		pos = strconv.Itoa(position)
	}
	label := ""
	if keys > 1 && tenant > 0 {
		label = strconv.FormatInt(tenant, 10)
	}
	m.decryptKeys.WithLabelValues(pos, label).Inc()
}

// ClampChannel returns the metric label of channel when it is a registered
// channel (channels.Lookup, exact match: WECHAT, ALIPAY, SQB), else
// ChannelUnknown.
func ClampChannel(channel string) string {
	if spec, ok := channels.Lookup(channels.Channel(channel)); ok {
		return spec.MetricLabel()
	}
	return ChannelUnknown
}

// ClampEventType returns eventType when it is PAYMENT_RECEIVED or
// REFUND_SUCCEEDED, else EventTypeUnknown.
func ClampEventType(eventType string) string {
	switch eventType {
	case EventTypePaymentReceived, EventTypeRefundSucceeded:
		return eventType
	default:
		return EventTypeUnknown
	}
}

func clampOutcome(o Outcome) Outcome {
	switch o {
	case OutcomeAcquired, OutcomeDuplicate, OutcomeRedelivered, OutcomeConflict, OutcomeDeadLettered, OutcomeIgnored:
		return o
	default:
		return OutcomeOther
	}
}

func clampKind(k DeadLetterKind) DeadLetterKind {
	switch k {
	case KindMalformed, KindUnknownChannel, KindDecryptFailed, KindNoKey, KindConflict, KindOverRefund, KindInvalidAmount, KindUnsupported,
		KindUnauthenticated, KindTenantMismatch:
		return k
	default:
		return KindOther
	}
}

func clampSettle(o SettleOutcome) SettleOutcome {
	switch o {
	case SettlePosted, SettleNoMoney, SettleOverRefund, SettleFenceLost:
		return o
	default:
		return SettleOther
	}
}

func clampStage(s Stage) Stage {
	switch s {
	case StageFetch, StageDecode, StageRefundUpdate, StageRegister, StageAcquire, StageSettle, StageDeadLetter, StageCommit, StageSweep:
		return s
	default:
		return StageOther
	}
}
