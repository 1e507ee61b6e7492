package invariant

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/deadletters"
	"github.com/paycallback/paycallback/internal/demo"
	"github.com/paycallback/paycallback/internal/kafkaops"
	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/sample"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// Option adjusts what Check asserts.
type Option func(*options)

type options struct {
	gatherers []prometheus.Gatherer
	exact     bool
	keys      channels.KeyProvider
}

// WithMetrics makes Check account for every input message in
// paycb_events_total, summed over gs: pass the registry of every worker that
// ran over the stream, crashed ones included (a message handled by a worker
// that then died before committing its offset is counted there and again by
// the next owner). See Check for exactly what is asserted.
func WithMetrics(gs ...prometheus.Gatherer) Option {
	return func(o *options) { o.gatherers = append(o.gatherers, gs...) }
}

// Exact declares that no message was handled twice: no worker died or was
// stopped under an uncommitted message and no generation ended under one.
// With metrics, every outcome is then asserted to the message.
func Exact() Option { return func(o *options) { o.exact = true } }

// WithKeys sets the WeChat APIv3 keys used to decode the stream (default:
// sample.APIv3Key for every tenant, which demo.Generate uses).
func WithKeys(k channels.KeyProvider) Option { return func(o *options) { o.keys = k } }

// Report is what Check found. Violations lists every broken invariant; an
// empty list means the run lost nothing and posted nothing twice.
type Report struct {
	// Reconcile is what the reconciliation checks (settlement.Reconcile,
	// as consumer reconcile runs them by default) found in the ledger, the
	// orders, the claims and the registrations.
	Reconcile settlement.ReconcileReport
	// Totals sums the ledger and the orders, per tenant too.
	Totals settlement.LedgerTotals
	// Messages is the number of input messages; Events the distinct money
	// events they carry (the claims the stream must leave).
	Messages, Events int
	// Claims counts claim rows; ClaimOutcomes counts them by
	// "STATUS/OUTCOME".
	Claims        int
	ClaimOutcomes map[string]int
	// Lost counts the stream's money events without a SETTLED claim, or
	// whose POSTED claim has no posting. It must be zero.
	Lost int
	// Doubled counts money events posted more than once (more than one
	// DEBIT or CREDIT row for the key), or posted without a POSTED claim.
	// It must be zero.
	Doubled int
	// Unexpected counts claims for keys the stream does not carry.
	Unexpected int
	// Acquired counts claims still ACQUIRED.
	Acquired int
	// DeadLetters counts the dead-letter topic's records by x-error-kind;
	// DistinctDeadLetters counts distinct original messages per kind (a
	// message handled again after a crash may be dead-lettered twice).
	DeadLetters         map[string]int
	DistinctDeadLetters map[string]int
	// Outcomes sums paycb_events_total by outcome over the given registries
	// (nil without WithMetrics); Counted is their total.
	Outcomes map[string]float64
	Counted  float64
	// Recounted is Counted minus Messages: messages handled again after a
	// crash, a stop under the shutdown cap or a generation's end.
	Recounted int
	// Violations lists every broken invariant, readably.
	Violations []string
}

// OK reports whether every invariant held.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Err returns nil when r is OK, else an error listing the violations.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("invariants broken (%d): %s", len(r.Violations), strings.Join(r.Violations, "; "))
}

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// claimRow is what Check reads of a claim.
type claimRow struct {
	TenantID       int64      `bun:"tenant_id"`
	Key            string     `bun:"idempotent_key"`
	Status         string     `bun:"status"`
	Outcome        *string    `bun:"settle_outcome"`
	Fingerprint    string     `bun:"fingerprint"`
	DeadLetteredAt *time.Time `bun:"dead_lettered_at"`
}

type tenantKey struct {
	tenant int64
	key    string
}

// Check checks, on a quiescent database and topic (every message committed,
// no worker running), the invariants of stream having been consumed:
//
//   - reconciliation (settlement.Reconcile with the default options, the
//     checks consumer reconcile runs) finds nothing: every ledger row valid,
//     every posting one balanced DEBIT and CREDIT with a POSTED claim, per
//     trade the order row consistent and matching the ledger, every
//     OVER_REFUND claim dead-lettered;
//   - every distinct money event of the stream (found by decoding each
//     message) has exactly one claim, and no claim exists for any other key;
//   - every claim is SETTLED with an outcome POSTED, NO_MONEY or OVER_REFUND,
//     none is left ACQUIRED (run SweepOrphans first), an OVER_REFUND claim
//     was dead-lettered;
//   - a POSTED claim has exactly one posting (one DEBIT and one CREDIT row),
//     any other claim none: nothing lost, nothing posted twice;
//   - per tenant, merchant_payable's net credit equals the money the stream's
//     channels reported paid minus refunded (stream.Paid − stream.Refunded);
//   - the dead-letter topic holds every malformed message and every message
//     whose fingerprint differs from its key's claim (a conflict), by value,
//     each at least once, exactly stream.Conflicts and stream.Malformed
//     distinct ones, and no dead letter of another kind except over_refund.
//
// With WithMetrics, paycb_events_total summed over the registries accounts for
// every message. Each message is counted once each time a worker brings it to
// an outcome, and its offset is committed only after that, so on a topic
// consumed to its end:
//
//   - total ≥ messages (none unaccounted for);
//   - acquired ≤ events (only the message that inserted a claim, in the
//     attempt that inserted it, counts as acquired) and acquired +
//     redelivered ≥ events (the claiming message, if it died before being
//     counted, is counted redelivered when handled again);
//   - duplicate ≥ messages − events − conflicts − malformed (every other
//     copy of an event), conflict ≥ conflicts, dead_lettered ≥ malformed;
//   - no message outside the contract's outcomes ("other").
//
// The excess (Report.Recounted) is messages handled again after a worker died
// or a generation ended before their offset commit; how many depends on
// timing, so with faults it is reported, not bounded. With Exact (no message
// handled twice) every one of those is an equality and redelivered is zero.
//
// A broken invariant is reported in Report.Violations; errors are failures to
// read the database or the topic, or a stream that does not decode as
// expected.
func Check(ctx context.Context, db bun.IDB, brokers []string, dlqTopic string, stream demo.Stream, opts ...Option) (Report, error) {
	o := options{keys: channels.StaticKeys{Default: sample.APIv3Key}}
	for _, opt := range opts {
		opt(&o)
	}
	rep := Report{Messages: len(stream.Messages), ClaimOutcomes: map[string]int{}}

	// What the stream carries.
	dec := channels.NewDecoder(o.keys)
	type msgEvent struct {
		key tenantKey
		fp  string
		val string
	}
	var money []msgEvent
	malformed := map[string]bool{}
	expected := map[tenantKey]bool{}
	for i, m := range stream.Messages {
		res, err := dec.Decode(m.Value)
		if err != nil {
			malformed[string(m.Value)] = true
			continue
		}
		if res.Ignored {
			continue
		}
		if res.Event.Key == "" {
			return rep, fmt.Errorf("decode stream message %d (%s): money event without a key", i, m.Note)
		}
		k := tenantKey{res.Event.TenantID, string(res.Event.Key)}
		expected[k] = true
		money = append(money, msgEvent{key: k, fp: res.Event.Fingerprint, val: string(m.Value)})
	}
	rep.Events = len(expected)
	if rep.Events != stream.Events || len(malformed) != stream.Malformed {
		return rep, fmt.Errorf("decode stream: %d events and %d undecodable messages, the stream says %d and %d",
			rep.Events, len(malformed), stream.Events, stream.Malformed)
	}

	// Ledger and orders.
	rec, err := settlement.Reconcile(ctx, db, settlement.ReconcileOptions{})
	if err != nil {
		return rep, fmt.Errorf("check settlement: %w", err)
	}
	rep.Reconcile = rec
	for _, d := range rec.Discrepancies {
		rep.violate("reconcile %s", d)
	}
	sr, err := settlement.Totals(ctx, db)
	if err != nil {
		return rep, fmt.Errorf("check settlement: %w", err)
	}
	rep.Totals = sr
	for tenant, paid := range stream.Paid {
		if want, got := paid-stream.Refunded[tenant], sr.Tenants[tenant].MerchantPayableNet; got != want {
			rep.violate("tenant %d: merchant_payable net credit %d, the channels reported paid %d − refunded %d = %d",
				tenant, got, paid, stream.Refunded[tenant], want)
		}
	}
	for tenant, t := range sr.Tenants {
		if _, ok := stream.Paid[tenant]; !ok && t.MerchantPayableNet != 0 {
			rep.violate("tenant %d: merchant_payable net credit %d for a tenant the stream never paid", tenant, t.MerchantPayableNet)
		}
	}

	// Claims against the stream's events.
	var claims []claimRow
	if err := db.NewSelect().Table("ss_channel_idempotent").
		Column("tenant_id", "idempotent_key", "status", "settle_outcome", "fingerprint", "dead_lettered_at").
		Scan(ctx, &claims); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return rep, fmt.Errorf("read claims: %w", err)
	}
	rep.Claims = len(claims)
	byKey := make(map[tenantKey]claimRow, len(claims))
	for _, c := range claims {
		k := tenantKey{c.TenantID, c.Key}
		if _, dup := byKey[k]; dup {
			rep.violate("claim %d/%s: more than one row", c.TenantID, c.Key)
		}
		byKey[k] = c
		outcome := ""
		if c.Outcome != nil {
			outcome = *c.Outcome
		}
		rep.ClaimOutcomes[c.Status+"/"+outcome]++
		if !expected[k] {
			rep.Unexpected++
			rep.violate("claim %d/%s: no message of the stream carries this key", c.TenantID, c.Key)
		}
		switch {
		case c.Status == string(idempotent.StatusAcquired):
			rep.Acquired++
			rep.violate("claim %d/%s: left ACQUIRED", c.TenantID, c.Key)
		case c.Status != string(idempotent.StatusSettled):
			rep.violate("claim %d/%s: status %q", c.TenantID, c.Key, c.Status)
		case outcome != string(idempotent.OutcomePosted) && outcome != string(idempotent.OutcomeNoMoney) && outcome != string(idempotent.OutcomeOverRefund):
			rep.violate("claim %d/%s: SETTLED with outcome %q", c.TenantID, c.Key, outcome)
		case outcome == string(idempotent.OutcomeOverRefund) && c.DeadLetteredAt == nil:
			rep.violate("claim %d/%s: OVER_REFUND never dead-lettered", c.TenantID, c.Key)
		}
	}

	// Postings per key against the claims.
	var postings []struct {
		TenantID int64  `bun:"tenant_id"`
		Key      string `bun:"idempotent_key"`
		NDebit   int    `bun:"ndebit"`
		NCredit  int    `bun:"ncredit"`
	}
	if err := db.NewSelect().Table("ss_ledger_entry").
		ColumnExpr("tenant_id, idempotent_key").
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN 1 ELSE 0 END), 0) AS ndebit", string(settlement.Debit)).
		ColumnExpr("COALESCE(SUM(CASE WHEN direction = ? THEN 1 ELSE 0 END), 0) AS ncredit", string(settlement.Credit)).
		GroupExpr("tenant_id, idempotent_key").
		Scan(ctx, &postings); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return rep, fmt.Errorf("read postings: %w", err)
	}
	posted := make(map[tenantKey]bool, len(postings))
	for _, p := range postings {
		k := tenantKey{p.TenantID, p.Key}
		posted[k] = true
		c, ok := byKey[k]
		switch {
		case p.NDebit > 1 || p.NCredit > 1:
			rep.Doubled++
			rep.violate("posting %d/%s: %d DEBIT and %d CREDIT rows: posted more than once", p.TenantID, p.Key, p.NDebit, p.NCredit)
		case !ok || c.Outcome == nil || *c.Outcome != string(idempotent.OutcomePosted):
			rep.Doubled++
			rep.violate("posting %d/%s: ledger rows without a POSTED claim", p.TenantID, p.Key)
		}
	}
	lost := make([]string, 0)
	for k := range expected {
		c, ok := byKey[k]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("event %d/%s: no claim", k.tenant, k.key))
		case c.Status != string(idempotent.StatusSettled):
			lost = append(lost, fmt.Sprintf("event %d/%s: claim not SETTLED", k.tenant, k.key))
		case c.Outcome != nil && *c.Outcome == string(idempotent.OutcomePosted) && !posted[k]:
			lost = append(lost, fmt.Sprintf("event %d/%s: POSTED without ledger rows", k.tenant, k.key))
		}
	}
	sort.Strings(lost)
	rep.Lost = len(lost)
	for _, l := range lost {
		rep.violate("lost: %s", l)
	}

	// Dead letters: which messages must be there, by value.
	wantDL := map[string]map[string]bool{string(channels.KindMalformed): malformed, string(channels.KindConflict): {}}
	for _, m := range money {
		if c, ok := byKey[m.key]; ok && c.Fingerprint != m.fp {
			wantDL[string(channels.KindConflict)][m.val] = true
		}
	}
	dls, err := kafkaops.ReadAll(ctx, brokers, dlqTopic)
	if err != nil {
		return rep, fmt.Errorf("read dead letters: %w", err)
	}
	rep.DeadLetters, rep.DistinctDeadLetters = map[string]int{}, map[string]int{}
	seen := map[string]map[string]bool{}
	for _, m := range dls {
		kind := ""
		for _, h := range m.Headers {
			if h.Key == deadletters.HeaderErrorKind {
				kind = string(h.Value)
			}
		}
		rep.DeadLetters[kind]++
		if seen[kind] == nil {
			seen[kind] = map[string]bool{}
		}
		if !seen[kind][string(m.Value)] {
			seen[kind][string(m.Value)] = true
			rep.DistinctDeadLetters[kind]++
		}
		if kind != string(channels.KindMalformed) && kind != string(channels.KindConflict) && kind != string(channels.KindOverRefund) {
			rep.violate("dead letter of kind %q (offset %d of %s): the stream has no such message", kind, m.Offset, dlqTopic)
		}
	}
	for kind, want := range wantDL {
		for v := range want {
			if !seen[kind][v] {
				rep.violate("dead letter %s missing for a message of %d bytes", kind, len(v))
			}
		}
		for v := range seen[kind] {
			if !want[v] {
				rep.violate("dead letter %s for a message that is not one (%d bytes)", kind, len(v))
			}
		}
	}
	if n := len(wantDL[string(channels.KindConflict)]); n != stream.Conflicts {
		rep.violate("%d messages conflict with their claim, the stream has %d conflicts", n, stream.Conflicts)
	}

	if len(o.gatherers) > 0 {
		if err := checkOutcomes(&rep, stream, o); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// checkOutcomes sums paycb_events_total over the gatherers and accounts for
// every message; see Check.
func checkOutcomes(rep *Report, stream demo.Stream, o options) error {
	rep.Outcomes = map[string]float64{}
	for i, g := range o.gatherers {
		mfs, err := g.Gather()
		if err != nil {
			return fmt.Errorf("gather metrics of worker %d: %w", i, err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "paycb_events_total" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "outcome" {
						rep.Outcomes[l.GetValue()] += mt.GetCounter().GetValue()
					}
				}
				rep.Counted += mt.GetCounter().GetValue()
			}
		}
	}
	rep.Recounted = int(rep.Counted) - rep.Messages
	get := func(o metrics.Outcome) int { return int(rep.Outcomes[string(o)]) }
	acquired, redelivered := get(metrics.OutcomeAcquired), get(metrics.OutcomeRedelivered)
	duplicates := rep.Messages - rep.Events - stream.Conflicts - stream.Malformed
	type bound struct {
		name      string
		got, want int
	}
	atLeast := []bound{
		{"messages counted (all outcomes)", int(rep.Counted), rep.Messages},
		{"acquired + redelivered", acquired + redelivered, rep.Events},
		{"duplicate", get(metrics.OutcomeDuplicate), duplicates},
		{"conflict", get(metrics.OutcomeConflict), stream.Conflicts},
		{"dead_lettered", get(metrics.OutcomeDeadLettered), stream.Malformed},
	}
	for _, b := range atLeast {
		if b.got < b.want {
			rep.violate("paycb_events_total: %s = %d, want at least %d", b.name, b.got, b.want)
		} else if o.exact && b.got != b.want {
			rep.violate("paycb_events_total: %s = %d, want exactly %d (no message was handled twice)", b.name, b.got, b.want)
		}
	}
	if acquired > rep.Events {
		rep.violate("paycb_events_total: acquired = %d, more than the %d events", acquired, rep.Events)
	}
	if o.exact && redelivered != 0 {
		rep.violate("paycb_events_total: redelivered = %d, want 0 (no message was handled twice)", redelivered)
	}
	if n := get(metrics.OutcomeOther); n != 0 {
		rep.violate("paycb_events_total: %d messages with an outcome outside the contract", n)
	}
	return nil
}

// SweepOrphans settles every claim still ACQUIRED, however young, through the
// settle fence from its stored event, as the worker's sweeper does once
// PAYCB_ORPHAN_AFTER has passed. Run it only when no worker is running (a
// young claim may be a live settler's). It returns how many it settled and
// the first error.
func SweepOrphans(ctx context.Context, db *bun.DB) (int, error) {
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	met, err := metrics.New(reg)
	if err != nil {
		return 0, fmt.Errorf("sweep orphans: metrics: %w", err)
	}
	claims := idempotent.NewStore(db)
	settler, err := settlement.New(db, claims, logger, reg)
	if err != nil {
		return 0, fmt.Errorf("sweep orphans: settlement: %w", err)
	}
	s := &pipeline.Sweeper{Claims: claims, Settler: settler, Metrics: met, Logger: logger, OrphanAfter: time.Nanosecond}
	n, err := s.SweepOnce(ctx)
	if err != nil {
		return n, fmt.Errorf("sweep orphans: %w", err)
	}
	return n, nil
}
